"""Aggregates over result rows - the paper's figures with their uncertainty - and the gates on them.

Groups: ``overall``, ``sd`` (single-domain), ``md`` (multi-domain) and ``domain:<Name>``
(the single-domain scenarios of one domain: the paper's per-domain figure). Only scored
rows count (``passed``/``failed``); errors are counted apart and never score. Task
completion aggregates to a rate (0-1), the rated dimensions to means on their own scales.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, computed_field

from ..results.rows import ResultRow
from ..scales import HEADLINE, METRIC_BY_NAME, METRICS, SHORT
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Estimate, bootstrap_mean
from .thresholds import Gate

__all__ = ["GROUP_TITLES", "GateResult", "GroupSummary", "HEADLINE", "SHORT", "evaluate_gates", "group_rows", "summarise"]
GROUP_TITLES = {"overall": "all", "sd": "single-domain", "md": "multi-domain"}


def group_rows(rows: Iterable[ResultRow]) -> dict[str, list[ResultRow]]:
    """Rows (all statuses) by group, groups in report order: overall, sd, md, then domains A-Z."""
    groups: dict[str, list[ResultRow]] = {"overall": [], "sd": [], "md": []}
    domains: dict[str, list[ResultRow]] = {}
    for row in rows:
        groups["overall"].append(row)
        groups[row.task_kind].append(row)
        if row.task_kind == "sd" and row.domains:
            domains.setdefault(f"domain:{row.domains[0]}", []).append(row)
    groups.update(sorted(domains.items()))
    return groups


class GroupSummary(BaseModel):
    """A group's counts and, per metric, its mean with a confidence interval."""

    model_config = ConfigDict(frozen=True)

    group: str
    scored: int
    errors: int
    metrics: dict[str, Estimate]

    @property
    def name(self) -> str:
        return self.group

    @property
    def estimates(self) -> dict[str, Estimate]:
        return self.metrics

    def as_dict(self) -> dict[str, object]:
        return self.model_dump()


def summarise(
    rows: Iterable[ResultRow], *, confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
) -> dict[str, GroupSummary]:
    summaries = {}
    for name, members in group_rows(rows).items():
        scored = [r for r in members if r.scored]
        errors = sum(1 for r in members if r.status == "error")
        estimates = {
            metric.name: bootstrap_mean([r.score(metric.name) for r in scored],
                                        confidence=confidence, resamples=resamples, seed=seed)
            for metric in METRICS
        }
        summaries[name] = GroupSummary(group=name, scored=len(scored), errors=errors, metrics=estimates)
    return summaries


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    metric: str
    scope: str
    on: str
    threshold: float
    estimate: Estimate
    #: None: not evaluated (no scored case, or too few for an interval)
    passed: Optional[bool]

    def __init__(self, metric: str, scope: str, on: str, threshold: float, estimate: Estimate,
                 passed: bool | None, **_: object) -> None:
        super().__init__(metric=metric, scope=scope, on=on, threshold=threshold, estimate=estimate, passed=passed)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def value(self) -> float | None:
        """What the gate compares: the mean, or the interval's low end."""
        return self.estimate.bound(self.on)

    def describe(self) -> str:
        title = METRIC_BY_NAME[self.metric].title + (" rate" if self.metric == "task_completion" else "")
        what = "mean" if self.on == "mean" else f"lower bound of the {self.estimate.confidence:.0%} CI"
        where = GROUP_TITLES.get(self.scope, self.scope.replace("domain:", "domain "))
        head = f"gate {title}, {where}, {what}"
        if self.passed is None:
            return f"{head}: not evaluated (n={self.estimate.n}: too few scored cases)"
        verdict = "passed" if self.passed else "FAILED"
        return (f"{head}: {verdict}: {self.value:.3f} vs threshold {self.threshold:g} "
                f"(mean {self.estimate.describe(3)}, n={self.estimate.n})")

    def as_dict(self) -> dict[str, object]:
        return self.model_dump()


def evaluate_gates(gates: Iterable[Gate], summaries: Mapping[str, GroupSummary]) -> list[GateResult]:
    """Each gate against its group(s); ``each_domain`` expands to every domain with rows."""
    results = []
    for gate in gates:
        scopes = [g for g in summaries if g.startswith("domain:")] if gate.scope == "each_domain" else [gate.scope]
        for name in scopes:
            summary = summaries.get(name)
            estimate = summary.estimates[gate.metric] if summary else Estimate(0, None, None, None)
            value = estimate.bound(gate.statistic)
            passed = None if value is None else value >= gate.min
            results.append(GateResult(gate.metric, name, gate.statistic, gate.min, estimate, passed))
    return results
