"""Result rows of a bot at the paper's level over the whole 50-profile sample (3,283 single-domain and 813
multi-domain scenarios), drawn from score distributions that match Table 3's figures, and a worse copy."""

from __future__ import annotations

import random
from typing import Sequence

from personalens_testkit.data.loader import open_dataset
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds, shortfalls
from personalens_testkit.results.rows import ResultRow

#: personalization levels 1-4: mean 2.10 (Table 3: 1.93-2.32 single-domain); the weakest assistant's: 1.93
PAPER = (0.22, 0.50, 0.24, 0.04)
WEAKEST = (0.30, 0.49, 0.19, 0.02)
#: task completion rates (Table 3: 88.5-96.0 % single-domain, 70.9-83.0 % multi-domain)
TCR = {"sd": 0.92, "md": 0.77}
NATURALNESS = (0.0, 0.02, 0.08, 0.62, 0.28)   # 1-5, mean 4.16
COHERENCE = (0.0, 0.01, 0.06, 0.52, 0.41)     # 1-5, mean 4.33


def scenarios() -> list[tuple[str, str, list[str]]]:
    dataset = open_dataset()
    return [(s.scenario_id, s.kind.value, list(s.domains)) for n in dataset.user_numbers() for s in dataset.scenarios_for(n)]


def _draw(rng: random.Random, weights: Sequence[float]) -> int:
    return rng.choices(range(1, len(weights) + 1), weights)[0]


FLOORS = load_thresholds(default_thresholds_path()).scenario


def row(sid: str, kind: str, domains: list[str], scores: dict) -> ResultRow:
    found = shortfalls(FLOORS, scores)
    return ResultRow.model_validate({
        "scenario_id": sid, "task_kind": kind, "domains": domains, "status": "failed" if found else "passed",
        "scores": scores, "shortfalls": [s.as_dict() for s in found]})


def paper_rows(personalization: Sequence[float] = PAPER, seed: int = 2025) -> list[ResultRow]:
    rng = random.Random(seed)
    rows = []
    for sid, kind, domains in scenarios():
        rows.append(row(sid, kind, domains, {
            "task_completion": rng.random() < TCR[kind], "personalization": _draw(rng, personalization),
            "naturalness_user": _draw(rng, NATURALNESS), "naturalness_assistant": _draw(rng, NATURALNESS),
            "coherence_user": _draw(rng, COHERENCE), "coherence_assistant": _draw(rng, COHERENCE)}))
    return rows


def lowered(rows: Sequence[ResultRow], drop: float, *, levels: Sequence[int] = (2, 3, 4), seed: int = 7) -> list[ResultRow]:
    """The same rows with personalization one level lower in randomly chosen scenarios (among those at
    ``levels``) until its mean has dropped by ``drop``."""
    rng = random.Random(seed)
    order = [i for i, r in enumerate(rows) if r.scores.personalization in levels]
    rng.shuffle(order)
    chosen = set(order[:round(drop * len(rows))])
    out = []
    for i, r in enumerate(rows):
        scores = r.scores.model_dump()
        if i in chosen:
            scores["personalization"] -= 1
        out.append(row(r.scenario_id, r.task_kind, r.domains, scores))
    return out
