"""Aggregates over result rows - the paper's figures with their uncertainty - and the gates on them.

Groups: ``overall``, ``sd`` (single-domain), ``md`` (multi-domain) and ``domain:<Name>``
(the single-domain scenarios of one domain: the paper's per-domain figure).

The unit is the scenario: a scenario's tries (``--repeat``) are averaged first, so n is the
number of scenarios and repeats narrow an interval only as much as they steady each scenario.
Task completion is a rate in which **the assistant's own errors count as not completed** (a bot
that crashes on its hard tasks gets no better rate); the other metrics are means of scored cases.
Errors of the benchmark's own models (and of the setup) are counted apart and never score.
Every figure is a function of the set of rows, never of their order.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any, Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, computed_field

from ..results.rows import ResultRow
from ..scales import HEADLINE, METRIC_BY_NAME, METRICS, SHORT, TASK_COMPLETION, Metric
from .intervals import mean_estimate, p_below, rate_estimate
from .stats import Estimate
from .thresholds import Gate

__all__ = ["GROUP_TITLES", "GateResult", "GroupSummary", "HEADLINE", "REPLY_CHANGED", "SHORT", "evaluate_gates",
           "group_rows", "is_assistant_error", "is_reply_changed", "scenario_values", "summarise"]
GROUP_TITLES = {"overall": "all", "sd": "single-domain", "md": "multi-domain"}


#: the error of a case whose bot answered a recorded turn differently in an offline replay: not scored
REPLY_CHANGED = "ReplyChangedError"


def is_assistant_error(row: ResultRow) -> bool:
    """An error of the bot under test (it counts against the bot); any other error is infrastructure. A bot
    whose reply changed in an offline replay did not fail: its case is not scored (see :data:`REPLY_CHANGED`)."""
    return (row.status == "error" and row.error is not None and row.error.source == "assistant"
            and row.error.kind != REPLY_CHANGED)


def is_reply_changed(row: ResultRow) -> bool:
    return row.status == "error" and row.error is not None and row.error.kind == REPLY_CHANGED


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


def scenario_values(rows: Iterable[ResultRow], metric: str, *, counting: str = "ours") -> dict[str, float]:
    """One value per scenario: the mean of its tries' scores (for task completion, a try on which the
    bot failed counts as not completed), by scenario id. A dimension whose judge answer was unreadable is
    missing for that dimension only; under ``counting="paper"`` an unreadable completion verdict is not completed."""
    tries: dict[str, list[float]] = {}
    for row in rows:
        value = row.measured(metric)
        if value is not None:
            value = float(value)
        elif metric == TASK_COMPLETION.name and (
                is_assistant_error(row) or (counting == "paper" and row.partial_scores is not None
                                            and TASK_COMPLETION.name in row.unreadable)):
            value = 0.0
        else:
            continue
        tries.setdefault(row.scenario_id, []).append(value)
    same: dict[float, float] = {}  # one float object per value (a summary keeps them all: few values, many scenarios)
    return {sid: same.setdefault(mean, mean) for sid, values in sorted(tries.items()) for mean in (fmean(values),)}


def estimate(metric: Metric, values: Iterable[float], confidence: float) -> Estimate:
    data = list(values)
    if metric.kind == "bool":
        return rate_estimate(data, confidence=confidence)
    return mean_estimate(data, low=metric.low, high=metric.high, confidence=confidence)


class GroupSummary(BaseModel):
    """A group's counts and, per metric, its mean (over scenarios) with a confidence interval."""

    model_config = ConfigDict(frozen=True)

    group: str
    scored: int
    errors: int
    #: errors of the assistant under test (they count against it), and of the benchmark's models or setup
    assistant_errors: int = 0
    infrastructure_errors: int = 0
    metrics: dict[str, Estimate]
    #: per metric, the cases whose judge answer for it was unreadable (the judge's errors; missing from that figure
    #: only, their readable dimensions counted in theirs)
    unreadable: dict[str, int] = {}
    #: the task-completion rate under the other counting of an unreadable verdict than ``metrics``' (reported
    #: beside it; the same figure when no verdict was unreadable)
    task_completion_other: Optional[Estimate] = None
    #: how ``metrics["task_completion"]`` counts an unreadable verdict (see :data:`~personalens_testkit.scales.COMPLETION_COUNTINGS`)
    completion_counting: str = "ours"
    #: the scenario values each estimate was made from (for the gates' tests; not written to reports)
    values: dict[str, tuple[float, ...]] = Field(default_factory=dict, exclude=True, repr=False)

    @property
    def name(self) -> str:
        return self.group

    @property
    def estimates(self) -> dict[str, Estimate]:
        return self.metrics

    def as_dict(self) -> dict[str, object]:
        return self.model_dump()


def summarise(rows: Iterable[ResultRow], *, confidence: float = 0.95, counting: str = "ours") -> dict[str, GroupSummary]:
    """``counting``: how the headline task-completion rate counts an unreadable verdict (the other count is
    reported beside it, ``task_completion_other``)."""
    summaries = {}
    for name, members in group_rows(rows).items():
        errors = [r for r in members if r.status == "error"]
        bot = sum(1 for r in errors if is_assistant_error(r))
        values = {m.name: tuple(scenario_values(members, m.name, counting=counting).values()) for m in METRICS}
        estimates = {m.name: estimate(m, values[m.name], confidence) for m in METRICS}
        unreadable = {m.name: sum(1 for r in members if m.name in r.unreadable) for m in METRICS}
        other = "ours" if counting == "paper" else "paper"  # the two counts differ only with an unreadable verdict
        other_rate = estimates[TASK_COMPLETION.name] if not unreadable[TASK_COMPLETION.name] else estimate(
            TASK_COMPLETION, scenario_values(members, TASK_COMPLETION.name, counting=other).values(), confidence)
        summaries[name] = GroupSummary(group=name, scored=sum(1 for r in members if r.scored), errors=len(errors),
                                       assistant_errors=bot, infrastructure_errors=len(errors) - bot, metrics=estimates,
                                       values=values, unreadable={k: v for k, v in unreadable.items() if v},
                                       task_completion_other=other_rate, completion_counting=counting)
    return summaries


_EXTRA = ("p_below", "decision", "undecided", "margin", "drift")


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    metric: str
    scope: str
    on: str
    threshold: float
    estimate: Estimate
    #: True: shown at or above the threshold; False: shown below it (the run's decision, over every gated test);
    #: None: neither - not evaluated (too few scenarios), or undecided at this n - and so not passed
    passed: Optional[bool]
    #: the fewest scenarios a gate is evaluated on
    min_n: int = 1
    #: the one-sided p-value of "at or above the threshold" (None: not evaluated)
    p_below: Optional[float] = None
    #: red / green / undecided / not evaluated (see gating/decision.py); "" before the run's decision
    decision: str = ""
    #: for an undecided gate: what would likely decide it
    undecided: str = ""
    #: the metric's margin (a drop that does not matter: a ``mean`` gate is green when shown at or above
    #: ``threshold - margin``) and the judge's drift (red when shown below ``threshold - drift``)
    margin: float = 0.0
    drift: float = 0.0

    def __init__(self, metric: str, scope: str, on: str, threshold: float, estimate: Estimate,
                 passed: bool | None, min_n: int = 1, **extra: Any) -> None:
        super().__init__(metric=metric, scope=scope, on=on, threshold=threshold, estimate=estimate, passed=passed,
                         min_n=min_n, **{k: v for k, v in extra.items() if k in _EXTRA})

    @property
    def green_bar(self) -> float:
        """What the interval's low end must reach for green: the threshold less the margin (a ``lower_bound``
        gate asks the low end to reach the threshold itself)."""
        return self.threshold - self.margin if self.on == "mean" else self.threshold

    @property
    def red_bar(self) -> float:
        """What the run must show the metric below for red: the threshold less the judge's drift."""
        return self.threshold - self.drift

    @computed_field  # type: ignore[prop-decorator]
    @property
    def value(self) -> float | None:
        """What the gate compares: the mean, or the interval's low end."""
        return self.estimate.bound(self.on)

    @property
    def title(self) -> str:
        title = METRIC_BY_NAME[self.metric].title + (" rate" if self.metric == "task_completion" else "")
        what = "mean" if self.on == "mean" else f"lower bound of the {self.estimate.confidence:.0%} CI"
        where = GROUP_TITLES.get(self.scope, self.scope.replace("domain:", "domain "))
        return f"gate {title}, {where}, {what}"

    def describe(self) -> str:
        if self.decision == "undecided":
            return (f"{self.title}: INCONCLUSIVE, not passed: mean {self.estimate.describe(3)}, n={self.estimate.n}, "
                    f"threshold {self.threshold:g}: not shown at or above {self.green_bar:g} (green), nor below "
                    f"{self.red_bar:g} (red); {self.undecided}")
        if self.passed is None:
            return (f"{self.title}: NOT EVALUATED, not passed (n={self.estimate.n} scenarios; a gate needs "
                    f"{self.min_n})")
        verdict = "passed" if self.passed else "FAILED"
        return (f"{self.title}: {verdict}: {self.value:.3f} vs threshold {self.threshold:g} "
                f"(mean {self.estimate.describe(3)}, n={self.estimate.n})")

    def as_dict(self) -> dict[str, object]:
        return self.model_dump()


def evaluate_gates(gates: Iterable[Gate], summaries: Mapping[str, GroupSummary], *, min_n: int = 1,
                   margins: Mapping[str, float] | None = None,
                   drifts: Mapping[str, float] | None = None) -> list[GateResult]:
    """Each gate against its group(s); ``each_domain`` expands to every domain with rows. A gate on fewer
    than ``min_n`` scenarios (or without an interval) is not evaluated. ``margins``/``drifts``: per metric, the
    thresholds' (none: 0)."""
    margins, drifts = margins or {}, drifts or {}
    results = []
    for gate in gates:
        scopes = [g for g in summaries if g.startswith("domain:")] if gate.scope == "each_domain" else [gate.scope]
        for name in scopes:
            summary = summaries.get(name)
            estimate = summary.estimates[gate.metric] if summary else Estimate(0, None, None, None)
            value = estimate.bound(gate.statistic)
            evaluated = value is not None and estimate.n >= min_n
            drift = float(drifts.get(gate.metric, 0.0))
            p = _p_below(gate, summary, min_n, gate.min - drift) if evaluated and summary is not None else None
            passed = (value >= gate.min) if evaluated else None  # provisional: the run's decision settles it
            results.append(GateResult(gate.metric, name, gate.statistic, gate.min, estimate, passed, min_n, p_below=p,
                                      margin=float(margins.get(gate.metric, 0.0)), drift=drift))
    return results


def _p_below(gate: Gate, summary: GroupSummary, min_n: int, bar: float) -> float | None:
    metric = METRIC_BY_NAME[gate.metric]
    values = list(summary.values.get(gate.metric, ())) if summary.values else []
    if len(values) < max(2, min_n):
        return None
    return p_below(values, bar, low=float(metric.low), high=float(metric.high), rate=metric.kind == "bool")
