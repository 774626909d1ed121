"""The benchmark's judged metrics and their scales, named once for every module.

Scores keep these scales everywhere (results, reports, thresholds); any 0-1
normalisation happens only inside the deepeval adapter.

A judge dimension is one row of :data:`METRICS` and its prompt template (``prompts/<prompt>.txt``): the
judge asks every row, in this order (:mod:`personalens_testkit.agents.judge`); the results' ``Scores``, the
thresholds' floors, every report's columns, figures and distributions, and the retest read the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pydantic import create_model


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    low: int
    high: int
    #: "bool" for the task-completion verdict, "int" for rated scales
    kind: Literal["bool", "int"]
    #: whose messages the metric rates ("dialogue" for task completion and personalization)
    side: Literal["dialogue", "user", "assistant"]
    #: its column title in the paper's tables
    short: str
    #: the prompt template that asks the judge for it (``prompts/<prompt>.txt``; it may use ``$goal``, ``$scale``
    #: - the personalization rubric with everything known about the user - and ``$side``)
    prompt: str

    @property
    def python_type(self) -> type:
        return bool if self.kind == "bool" else int


TASK_COMPLETION = Metric("task_completion", "Task completion", 0, 1, "bool", "dialogue", "TCR",
                         "judge_task_completion")
PERSONALIZATION = Metric("personalization", "Personalization", 1, 4, "int", "dialogue", "P", "judge_personalization")
NATURALNESS_USER = Metric("naturalness_user", "Naturalness (user)", 1, 5, "int", "user", "Nat.(U)",
                          "judge_naturalness")
NATURALNESS_ASSISTANT = Metric("naturalness_assistant", "Naturalness (assistant)", 1, 5, "int", "assistant", "Nat.",
                               "judge_naturalness")
COHERENCE_USER = Metric("coherence_user", "Coherence (user)", 1, 5, "int", "user", "Coh.(U)",
                        "judge_coherence")
COHERENCE_ASSISTANT = Metric("coherence_assistant", "Coherence (assistant)", 1, 5, "int", "assistant", "Coh.",
                             "judge_coherence")

METRICS: tuple[Metric, ...] = (
    TASK_COMPLETION, PERSONALIZATION, NATURALNESS_USER, NATURALNESS_ASSISTANT, COHERENCE_USER, COHERENCE_ASSISTANT,
)
METRIC_BY_NAME = {m.name: m for m in METRICS}
METRIC_NAMES = tuple(m.name for m in METRICS)
#: The dimensions that rate the assistant (its side, or the whole dialogue), as the paper's tables report them
#: (Table 3, Figure 4): the summaries, the baseline comparison, early stop and the retest read these; the user side
#: rates the simulated user, not the assistant under test.
HEADLINE = tuple(m.name for m in METRICS if m.side != "user")
SHORT = {m.name: m.short for m in METRICS}

#: how an unreadable task-completion verdict counts: ``ours`` leaves it out (nothing is guessed); ``paper`` counts
#: it as not completed, as upstream's code does (util/gather_evaluation.py:206-213; a rating it cannot read it leaves
#: out, line 84, as both countings do), so the figure compares with the paper's
COMPLETION_COUNTINGS = ("ours", "paper")

#: The judged scores of one dialogue, on the benchmark's own scales: a field per metric of this module
#: (None: the judge's answer for that dimension could not be read - missing for that dimension only, never guessed).
Scores = create_model("Scores", __doc__="The judged scores of one dialogue, on the benchmark's own scales.",
                      **{m.name: (Optional[m.python_type], ...) for m in METRICS})
