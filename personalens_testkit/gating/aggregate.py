"""Aggregates over result rows - the paper's figures with their uncertainty - and the gates on them.

Groups: ``overall``, ``sd`` (single-domain), ``md`` (multi-domain) and ``domain:<Name>``
(the single-domain scenarios of one domain: the paper's per-domain figure). Only scored
rows count (``passed``/``failed``); errors are counted apart and never score. Task
completion aggregates to a rate (0-1), the rated dimensions to means on their own scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..scales import METRIC_BY_NAME, METRICS
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Estimate, bootstrap_mean

#: The dimensions the paper's tables report for the assistant (Table 3, Figure 4).
HEADLINE = ("task_completion", "personalization", "naturalness_assistant", "coherence_assistant")
SHORT = {"task_completion": "TCR", "personalization": "P", "naturalness_assistant": "Nat.", "coherence_assistant": "Coh.",
         "naturalness_user": "Nat.(U)", "coherence_user": "Coh.(U)"}
GROUP_TITLES = {"overall": "all", "sd": "single-domain", "md": "multi-domain"}


def is_scored(row: Mapping[str, Any]) -> bool:
    return row.get("status") in ("passed", "failed") and row.get("scores") is not None


def group_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows (all statuses) by group, groups in report order: overall, sd, md, then domains A-Z."""
    groups: dict[str, list[Mapping[str, Any]]] = {"overall": [], "sd": [], "md": []}
    domains: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups["overall"].append(row)
        groups[row.get("task_kind", "sd")].append(row)
        if row.get("task_kind") == "sd" and row.get("domains"):
            domains.setdefault(f"domain:{row['domains'][0]}", []).append(row)
    groups.update(sorted(domains.items()))
    return groups


@dataclass(frozen=True)
class GroupSummary:
    name: str
    scored: int
    errors: int
    estimates: dict[str, Estimate]

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.name, "scored": self.scored, "errors": self.errors,
                "metrics": {k: v.as_dict() for k, v in self.estimates.items()}}


def summarise(
    rows: Iterable[Mapping[str, Any]], *, confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, GroupSummary]:
    summaries = {}
    for name, members in group_rows(rows).items():
        scored = [r for r in members if is_scored(r)]
        errors = sum(1 for r in members if r.get("status") == "error")
        estimates = {
            metric.name: bootstrap_mean([r["scores"][metric.name] for r in scored],
                                        confidence=confidence, resamples=resamples, seed=seed)
            for metric in METRICS
        }
        summaries[name] = GroupSummary(name, len(scored), errors, estimates)
    return summaries


@dataclass(frozen=True)
class GateResult:
    metric: str
    scope: str
    on: str
    threshold: float
    estimate: Estimate
    #: None: not evaluated (no scored case, or too few for an interval)
    passed: bool | None

    @property
    def value(self) -> float | None:
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

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "scope": self.scope, "on": self.on, "threshold": self.threshold,
                "value": self.value, "passed": self.passed, "estimate": self.estimate.as_dict()}


def evaluate_gates(gates: Iterable[Any], summaries: Mapping[str, GroupSummary]) -> list[GateResult]:
    """Each gate against its group(s); ``each_domain`` expands to every domain with rows."""
    results = []
    for gate in gates:
        scopes = [g for g in summaries if g.startswith("domain:")] if gate.scope == "each_domain" else [gate.scope]
        for scope in scopes:
            summary = summaries.get(scope)
            estimate = summary.estimates[gate.metric] if summary else Estimate(0, None, None, None)
            value = estimate.bound(gate.statistic)
            passed = None if value is None else value >= gate.min
            results.append(GateResult(gate.metric, scope, gate.statistic, gate.min, estimate, passed))
    return results
