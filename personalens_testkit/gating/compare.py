"""Two runs on the same scenarios: their coverage, paired differences with intervals, and the verdict of a
baseline gate - a drop is significant when the whole interval of the difference lies below ``-margin``,
and a candidate that leaves too many of the base's scenarios unscored fails on its coverage alone.

Rows pair by scenario id, a scenario's tries averaged first; for task completion a try on which the
bot failed counts as not completed, so a bot that errors where it used to answer shows a drop instead
of leaving the comparison. A difference on fewer than ``min_n`` scenarios is not evaluated.
"""

from __future__ import annotations

import math

from typing import Iterable, Mapping, Optional

from pydantic import BaseModel

from ..errors import UsageError
from ..results.rows import ResultRow
from ..scales import HEADLINE, METRIC_BY_NAME
from .aggregate import scenario_values
from .decision import Test, decide, detectable
from .intervals import mean_estimate, p_below, spread_of
from .stats import Estimate

#: Groups whose significant drop fails a comparison by default (domains are reported only).
GATED_GROUPS = ("overall", "sd", "md")


class Difference(BaseModel):
    group: str
    metric: str
    n: int
    difference: Estimate
    #: shown below ``-margin`` (the decision over every gated test: Holm's procedure, gating/decision.py)
    significant_drop: bool
    gated: bool
    #: False: too few paired scenarios to say anything (not a pass either)
    evaluated: bool = True
    #: the one-sided p-value of "no drop beyond the margin" (None: not evaluated)
    p_below: Optional[float] = None
    #: red / green (shown within the margin) / undecided / not evaluated
    decision: str = "not evaluated"
    #: the smallest true drop this comparison finds with 80 % power (from the spread of the paired differences)
    detectable_drop: Optional[float] = None
    #: for an undecided difference: what would likely decide it
    undecided: str = ""
    #: the drop this difference tolerates (non-inferiority margin)
    margin: float = 0.0
    #: the margin is the judge's measured drift: it moves only the red bar (green is decided as with no margin)
    measured_margin: bool = False


class Coverage(BaseModel):
    """Which scenarios the two runs share. ``errored_*``: a run has only errors of the scenario."""

    base: int
    paired: int
    only_in_base: int
    only_in_candidate: int
    errored_in_base: int
    errored_in_candidate: int

    @property
    def missing(self) -> int:
        """Base scenarios the candidate did not score: absent, or only errors."""
        return self.only_in_base + self.errored_in_candidate


class Comparison(BaseModel):
    shared_scenarios: int
    only_in_base: int
    only_in_candidate: int
    #: the margin stated (``--baseline-margin``/``--margin``), or the largest of the measured ones
    margin: float
    confidence: float
    results: list[Difference]
    coverage: Optional[Coverage] = None
    #: the largest share of the base's scenarios the candidate may leave unscored
    max_missing: float = 0.05
    #: why the coverage fails the comparison (None: it does not)
    coverage_failure: Optional[str] = None
    failed: bool
    #: each headline metric's margin, and where the margins come from
    margins: dict[str, float] = {}
    margin_basis: str = "stated"

    def margin_text(self) -> str:
        """The margin as a report states it: the one stated, or each metric's measured one and their basis."""
        if self.margin_basis == "stated":
            return f"margin {self.margin:g}"
        shown = ", ".join(f"{metric} {value:.3g}" for metric, value in self.margins.items() if value > 0)
        return f"margins {shown} (measured)" if shown else f"margin 0 ({self.margin_basis})"


def _outcomes(rows: Iterable[ResultRow]) -> tuple[dict[str, str], dict[str, dict]]:
    """Each scenario's state in a run (``scored`` if any try scored, else ``errored``), and its rows by task kind."""
    state: dict[str, str] = {}
    info: dict[str, dict] = {}
    for row in rows:
        scored = row.scored  # an error of the bot counts in task completion, but leaves the scenario unscored
        if scored or row.scenario_id not in state:
            state[row.scenario_id] = "scored" if scored or state.get(row.scenario_id) == "scored" else "errored"
        info.setdefault(row.scenario_id, {"kind": row.task_kind, "domains": row.domains})
    return state, info


def coverage_of(base: dict[str, str], candidate: dict[str, str]) -> Coverage:
    scored_base = {s for s, v in base.items() if v == "scored"}
    scored_candidate = {s for s, v in candidate.items() if v == "scored"}
    return Coverage(
        base=len(scored_base), paired=len(scored_base & scored_candidate),
        only_in_base=len(scored_base - set(candidate)), only_in_candidate=len(scored_candidate - set(base)),
        errored_in_base=sum(1 for s, v in base.items() if v == "errored"),
        errored_in_candidate=sum(1 for s in scored_base if candidate.get(s) == "errored"),
    )


def compare_rows(base: Iterable[ResultRow], candidate: Iterable[ResultRow], *, margin: float | None = 0.0,
                 confidence: float = 0.95, gate_domains: bool = False, min_n: int = 1,
                 max_missing: float = 0.05, measured: Mapping[str, float] | None = None,
                 margin_basis: str = "stated", counting: str = "ours") -> Comparison:
    """``margin``: the drop every metric tolerates; None: each metric's ``measured`` margin (0 where none is);
    ``counting``: how an unreadable completion verdict counts (``--completion-counting``)."""
    if not 0.5 < confidence < 1.0:
        raise UsageError(f"--confidence: must be more than 0.5 and less than 1 (got {confidence:g})")
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise UsageError(f"--margin: must be a number, 0 or more (got {margin:g})")
    margins = {metric: float(margin) if margin is not None else float((measured or {}).get(metric, 0.0))
               for metric in HEADLINE}
    base_rows, candidate_rows = list(base), list(candidate)
    base_state, info = _outcomes(base_rows)
    candidate_state, _ = _outcomes(candidate_rows)
    coverage = coverage_of(base_state, candidate_state)
    results = []
    for metric in HEADLINE:
        a = scenario_values(base_rows, metric, counting=counting)
        b = scenario_values(candidate_rows, metric, counting=counting)
        shared = sorted(set(a) & set(b))
        for group, ids in _groups(shared, info).items():
            results.append(_difference(group, metric, ids, a, b, margin=margins[metric], confidence=confidence,
                                       min_n=min_n, measured=margin is None,
                                       gated=group in GATED_GROUPS or (gate_domains and group.startswith("domain:"))))
    decide_differences(results, confidence)
    failure = None
    if coverage.base and coverage.missing / coverage.base > max_missing:
        failure = (f"the candidate leaves {coverage.missing} of the base's {coverage.base} scored scenarios unscored "
                   f"({coverage.only_in_base} missing, {coverage.errored_in_candidate} errored): more than "
                   f"{max_missing:.0%}")
    return Comparison(
        shared_scenarios=coverage.paired, only_in_base=coverage.only_in_base, only_in_candidate=coverage.only_in_candidate,
        margin=max(margins.values()), confidence=confidence, results=results, coverage=coverage,
        max_missing=max_missing, coverage_failure=failure,
        failed=failure is not None or any(r.significant_drop and r.gated for r in results),
        margins=margins, margin_basis="stated" if margin is not None else margin_basis,
    )


def _groups(shared: list[str], info: dict[str, dict]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {"overall": shared, "sd": [], "md": []}
    for sid in shared:
        kind = info[sid]["kind"] or "sd"
        groups.setdefault(kind, []).append(sid)
        if kind == "sd" and info[sid]["domains"]:
            groups.setdefault(f"domain:{info[sid]['domains'][0]}", []).append(sid)
    return {name: ids for name, ids in groups.items() if ids}


def _difference(group: str, metric: str, ids: list[str], a: dict[str, float], b: dict[str, float], *, margin: float,
                confidence: float, min_n: int, gated: bool, measured: bool = False) -> Difference:
    scale = METRIC_BY_NAME[metric]
    span = 1.0 if scale.kind == "bool" else float(scale.high - scale.low)
    differences = [round(b[s] - a[s], 9) for s in ids]  # one value, whatever float spelling it was stored in
    diff = mean_estimate(differences, low=-span, high=span, confidence=confidence)
    evaluated = len(ids) >= min_n and diff.high is not None
    p = p_below(differences, -margin, low=-span, high=span) if evaluated else None
    sd = spread_of(sorted(differences), diff.mean, -span, span) if evaluated and diff.mean is not None else None
    alpha = (1.0 - confidence) / max(1, len(HEADLINE) * len(GATED_GROUPS))  # Holm's first, strictest step
    return Difference(group=group, metric=metric, n=len(ids), difference=diff, significant_drop=False, gated=gated,
                      evaluated=evaluated, p_below=p,
                      detectable_drop=detectable(sd, len(ids), alpha=alpha, margin=margin), margin=margin,
                      measured_margin=measured)


def as_test(result: Difference) -> Test:
    d, margin = result.difference, result.margin
    # with a stated non-inferiority margin a difference passes only when shown above -margin; with none, or with the
    # judge's measured drift (a tolerance for its noise, not a stricter bar), unless shown below -margin
    shown = d.low is not None and d.low >= -margin if margin > 0 and not result.measured_margin else True
    return Test(name=f"{result.group} {result.metric}", p_below=result.p_below if result.gated else None,
                shown_above=shown, n=result.n, half_width=d.reach(-margin),
                distance=None if d.mean is None else d.mean + margin)


def apply_decision(result: Difference, test: Test) -> None:
    margin = result.margin
    result.decision = test.decision if result.gated else ("not evaluated" if not result.evaluated else "reported")
    high = result.difference.high
    # a reported (ungated) difference is described by its own interval; a gated one by the run's decision
    result.significant_drop = test.decision == "red" if result.gated else (
        result.evaluated and high is not None and high < -margin)
    result.undecided = test.undecided_text() if test.decision == "undecided" else ""


def decide_differences(results: list[Difference], confidence: float) -> None:
    """The comparison's own decision (the `compare` command): Holm over its gated differences."""
    tests = [as_test(r) for r in results]
    decide(tests, confidence)
    for result, test in zip(results, tests):
        apply_decision(result, test)
