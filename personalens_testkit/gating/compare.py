"""Two runs on the same scenarios: paired differences with bootstrap intervals, and the verdict of a
baseline gate (a drop is significant when the whole interval of the difference lies below ``-margin``).

Rows pair by scenario id; repeated tries of a scenario are averaged first. Only scenarios
scored in both runs count.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from pydantic import BaseModel

from ..results.rows import ResultRow
from .aggregate import HEADLINE
from .stats import Estimate, paired_difference

#: Groups whose significant drop fails a comparison by default (domains are reported only).
GATED_GROUPS = ("overall", "sd", "md")


class Difference(BaseModel):
    group: str
    metric: str
    n: int
    difference: Estimate
    significant_drop: bool
    gated: bool


class Comparison(BaseModel):
    shared_scenarios: int
    only_in_base: int
    only_in_candidate: int
    margin: float
    confidence: float
    results: list[Difference]
    failed: bool


class _Means(BaseModel):
    task_kind: str
    domains: list[str]
    scores: dict[str, float]


def _means_by_scenario(rows: Iterable[ResultRow]) -> dict[str, _Means]:
    tries: dict[str, list[ResultRow]] = defaultdict(list)
    for row in rows:
        if row.scored:
            tries[row.scenario_id].append(row)
    return {sid: _Means(task_kind=group[0].task_kind, domains=group[0].domains,
                        scores={m: sum(float(r.score(m)) for r in group) / len(group) for m in HEADLINE})
            for sid, group in tries.items()}


def compare_rows(base: Iterable[ResultRow], candidate: Iterable[ResultRow], *, margin: float = 0.0,
                 confidence: float = 0.95, gate_domains: bool = False) -> Comparison:
    a, b = _means_by_scenario(base), _means_by_scenario(candidate)
    shared = sorted(set(a) & set(b))
    groups: dict[str, list[str]] = {"overall": shared, "sd": [], "md": []}
    for sid in shared:
        groups.setdefault(a[sid].task_kind or "sd", []).append(sid)
        if a[sid].task_kind == "sd" and a[sid].domains:
            groups.setdefault(f"domain:{a[sid].domains[0]}", []).append(sid)
    results = []
    for group, ids in groups.items():
        if not ids:
            continue
        for metric in HEADLINE:
            diff = paired_difference([a[s].scores[metric] for s in ids], [b[s].scores[metric] for s in ids],
                                     confidence=confidence)
            drop = diff.high is not None and diff.high < -margin
            gated = group in GATED_GROUPS or (gate_domains and group.startswith("domain:"))
            results.append(Difference(group=group, metric=metric, n=len(ids), difference=diff, significant_drop=drop,
                                      gated=gated))
    return Comparison(
        shared_scenarios=len(shared), only_in_base=len(set(a) - set(b)), only_in_candidate=len(set(b) - set(a)),
        margin=margin, confidence=confidence, results=results,
        failed=any(r.significant_drop and r.gated for r in results),
    )
