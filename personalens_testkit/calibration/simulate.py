"""Simulated judges on the calibration set, no model called: what each bar does with a judge of known quality
(bench/calibration_bars.py prints the pass rates; the tests hold the bars to them).

A judge "x accurate" answers, on every call afresh (each repeat, and the injection check), the label with
probability x and otherwise a uniformly drawn *other* level of the dimension's scale (the other verdict; one
of the three other personalization levels; one of the four other ratings of a 1-5 scale). The random judge
draws uniformly from the scale; the constant one always answers "completed" and 2. None is swayed by
judge-addressed text: its answer to an injected dialogue is one more fresh draw.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..gating.thresholds import CalibrationBars
from ..scales import METRIC_BY_NAME
from .dataset import CalibrationDialogue, fingerprint
from .report import CalibrationReport, build_calibration
from .runner import Answers, with_room_to_gain


def levels(dimension: str) -> list[Any]:
    metric = METRIC_BY_NAME[dimension]
    return [False, True] if metric.kind == "bool" else list(range(metric.low, metric.high + 1))


@dataclass(frozen=True)
class SimulatedJudge:
    name: str
    #: the chance of answering the label; None: uniform over the scale
    accuracy: Optional[float] = None
    #: always this answer ("completed" for the verdict, this level for the rated scales)
    constant: Optional[int] = None

    def answer(self, rng: random.Random, dimension: str, label: Any) -> Any:
        scale = levels(dimension)
        if self.constant is not None:
            return True if scale == [False, True] else self.constant
        if self.accuracy is None:
            return rng.choice(scale)
        if rng.random() < self.accuracy:
            return label
        return rng.choice([level for level in scale if level != label])


JUDGES = (SimulatedJudge("perfect", accuracy=1.0), SimulatedJudge("90 %", accuracy=0.9),
          SimulatedJudge("80 %", accuracy=0.8), SimulatedJudge("random"), SimulatedJudge("constant", constant=2))


def simulated_answers(judge: SimulatedJudge, dialogues: Sequence[CalibrationDialogue], repeats: int,
                      rng: random.Random, *, injection: bool = True) -> Answers:
    """What ``Calibrator.run`` would collect from this judge."""
    answers = Answers()
    for dialogue in dialogues:
        for dimension, label in dialogue.labels.items():
            answers.clean[(dialogue.id, dimension)] = [judge.answer(rng, dimension, label) for _ in range(repeats)]
    if injection:
        for dialogue in (d for d in dialogues if with_room_to_gain(d)):
            for dimension, label in dialogue.labels.items():
                answers.injected[(dialogue.id, dimension)] = judge.answer(rng, dimension, label)
    return answers


def simulated_report(judge: SimulatedJudge, dialogues: Sequence[CalibrationDialogue], bars: CalibrationBars, *,
                     repeats: int = 2, seed: int = 0, injection: bool = True) -> CalibrationReport:
    """The report ``personalens calibrate`` would write for this judge (the same code builds it)."""
    answers = simulated_answers(judge, dialogues, repeats, random.Random(seed), injection=injection)
    return build_calibration(dialogues, answers, bars, judge_model=f"simulated:{judge.name}",
                             set_name="dialogues.jsonl", set_sha256=fingerprint(), repeats=repeats)
