"""Two runs on the same scenarios: their coverage, paired differences with intervals, and the verdict of a
baseline gate. Per metric, a difference is **green** when its interval is shown at or above ``-margin`` (a
drop that does not matter, thresholds.yaml's ``margin``), **red** when it is shown below ``-drift`` (beyond
what the judge's drift explains: thresholds.yaml's ``drift``, or more where ``--judge-retest`` measures more,
never more than the margin), inconclusive between - with the largest drop the run still leaves open. A
candidate that leaves too many of the base's scenarios unscored fails on its coverage alone.

Rows pair by scenario id, a scenario's tries averaged first; for task completion a try on which the
bot failed counts as not completed, so a bot that errors where it used to answer shows a drop instead
of leaving the comparison. A difference on fewer than ``min_n`` scenarios is not evaluated.

A scenario the candidate **replayed whole** - every call of every try answered by a cassette, the same
dialogue and the same scores as the base's - is the base's own recording played back: its difference is 0
exactly, not a draw of the judge's noise. The interval of the mean difference is the changed scenarios'
interval times their share (an unchanged bot replayed everywhere differs by exactly 0: green at any margin).
"""

from __future__ import annotations

import math
from statistics import fmean
from typing import Iterable, Mapping, Optional

from pydantic import BaseModel

from ..errors import UsageError
from ..results.rows import ResultRow
from ..scales import HEADLINE, METRIC_BY_NAME, SHORT
from .aggregate import scenario_values
from .decision import Test, decide, detectable
from .intervals import mean_estimate, p_below, spread_of
from .replayed import replayed_whole
from .stats import Estimate
from .thresholds import DEFAULT_DRIFTS, DEFAULT_MARGINS

#: Groups whose significant drop fails a comparison by default (domains are reported only).
GATED_GROUPS = ("overall", "sd", "md")
#: Of those, the groups a green comparison must show within the margin: the whole run (a single-domain or a
#: multi-domain difference turns the run red when shown below the drift, but its fifth of the scenarios need not
#: show the margin: that would take five times the scenarios for the same margin)
REQUIRED_GROUPS = ("overall",)


class Difference(BaseModel):
    group: str
    metric: str
    n: int
    difference: Estimate
    #: shown below ``-drift`` (the decision over every gated test: Holm's procedure, gating/decision.py)
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
    #: the drop that does not matter (green: shown at or above ``-margin``)
    margin: float = 0.0
    #: what the judge's drift explains (red: shown below ``-drift``; at most the margin)
    drift: float = 0.0
    #: the drift is the one ``--judge-retest`` measured on this run (more than thresholds.yaml's)
    measured_margin: bool = False
    #: scenarios replayed whole, the base's own recording (a difference of exactly 0, not a draw of noise)
    replayed: int = 0
    #: a gated difference the run must show within the margin to pass (False: it can only turn the run red)
    required: bool = True


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
    #: the largest of the metrics' margins (``--baseline-margin``/``--margin``: the one stated for every metric)
    margin: float
    confidence: float
    results: list[Difference]
    coverage: Optional[Coverage] = None
    #: the largest share of the base's scenarios the candidate may leave unscored
    max_missing: float = 0.05
    #: why the coverage fails the comparison (None: it does not)
    coverage_failure: Optional[str] = None
    failed: bool
    #: each headline metric's margin and drift, and where the drifts come from
    margins: dict[str, float] = {}
    drifts: dict[str, float] = {}
    #: where the margins come from: ``stated`` (``--baseline-margin``/``--margin``) or ``thresholds``
    margin_basis: str = "thresholds"
    #: where a drift above thresholds.yaml's comes from (``--judge-retest``'s measurement); "" when none is
    drift_basis: str = ""

    def margin_text(self) -> str:
        """The margins and drifts as a report states them."""
        margins = ", ".join(f"{SHORT.get(m, m)} {v:.3g}" for m, v in self.margins.items())
        drifts = ", ".join(f"{SHORT.get(m, m)} {v:.3g}" for m, v in self.drifts.items())
        basis = f"; drift measured: {self.drift_basis}" if self.drift_basis else ""
        stated = " stated" if self.margin_basis == "stated" else ""
        return f"green at or above -margin{stated} ({margins}), red below -drift ({drifts}){basis}"


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


def compare_rows(base: Iterable[ResultRow], candidate: Iterable[ResultRow], *, margin: float | None = None,
                 confidence: float = 0.95, gate_domains: bool = False, min_n: int = 1,
                 max_missing: float = 0.05, measured: Mapping[str, float] | None = None,
                 margin_basis: str = "", counting: str = "ours", margins: Mapping[str, float] | None = None,
                 drifts: Mapping[str, float] | None = None) -> Comparison:
    """``margin``: the drop every metric tolerates (stated on the command line); None: each metric's ``margins``
    (thresholds.yaml's; default the shipped ones). ``drifts``: per metric, what the judge's drift explains
    (thresholds.yaml's), raised to the ``measured`` one where a retest shows more, never above the margin
    (``margin_basis``: where the measured ones come from, in words);
    ``counting``: how an unreadable completion verdict counts (``--completion-counting``)."""
    if not 0.5 < confidence < 1.0:
        raise UsageError(f"--confidence: must be more than 0.5 and less than 1 (got {confidence:g})")
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise UsageError(f"--margin: must be a number, 0 or more (got {margin:g})")
    stated = {**DEFAULT_MARGINS, **(margins or {})}
    margin_of = {metric: float(margin) if margin is not None else float(stated[metric]) for metric in HEADLINE}
    judge = {**DEFAULT_DRIFTS, **(drifts or {})}
    found = measured or {}
    drift_of = {metric: min(margin_of[metric], max(float(judge[metric]), float(found.get(metric, 0.0))))
                for metric in HEADLINE}
    base_rows, candidate_rows = list(base), list(candidate)
    base_state, info = _outcomes(base_rows)
    candidate_state, _ = _outcomes(candidate_rows)
    coverage = coverage_of(base_state, candidate_state)
    replayed = replayed_whole(base_rows, candidate_rows)
    results = []
    for metric in HEADLINE:
        a = scenario_values(base_rows, metric, counting=counting)
        b = scenario_values(candidate_rows, metric, counting=counting)
        shared = sorted(set(a) & set(b))
        for group, ids in _groups(shared, info).items():
            results.append(_difference(group, metric, ids, a, b, replayed, margin=margin_of[metric],
                                       drift=drift_of[metric], confidence=confidence, min_n=min_n,
                                       measured=found.get(metric, 0.0) > judge[metric],
                                       gated=group in GATED_GROUPS or (gate_domains and group.startswith("domain:"))))
    decide_differences(results, confidence)
    failure = None
    if coverage.base and coverage.missing / coverage.base > max_missing:
        failure = (f"the candidate leaves {coverage.missing} of the base's {coverage.base} scored scenarios unscored "
                   f"({coverage.only_in_base} missing, {coverage.errored_in_candidate} errored): more than "
                   f"{max_missing:.0%}")
    return Comparison(
        shared_scenarios=coverage.paired, only_in_base=coverage.only_in_base, only_in_candidate=coverage.only_in_candidate,
        margin=max(margin_of.values()), confidence=confidence, results=results, coverage=coverage,
        max_missing=max_missing, coverage_failure=failure,
        failed=failure is not None or any(r.significant_drop and r.gated for r in results),
        margins=margin_of, drifts=drift_of, margin_basis="stated" if margin is not None else "thresholds",
        drift_basis=margin_basis if any(found.get(m, 0.0) > judge[m] for m in HEADLINE) else "",
    )


def _groups(shared: list[str], info: dict[str, dict]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {"overall": shared, "sd": [], "md": []}
    for sid in shared:
        kind = info[sid]["kind"] or "sd"
        groups.setdefault(kind, []).append(sid)
        if kind == "sd" and info[sid]["domains"]:
            groups.setdefault(f"domain:{info[sid]['domains'][0]}", []).append(sid)
    return {name: ids for name, ids in groups.items() if ids}


def _difference(group: str, metric: str, ids: list[str], a: dict[str, float], b: dict[str, float],
                replayed: frozenset[str], *, margin: float, drift: float, confidence: float, min_n: int, gated: bool,
                measured: bool = False) -> Difference:
    scale = METRIC_BY_NAME[metric]
    span = 1.0 if scale.kind == "bool" else float(scale.high - scale.low)
    drawn = [round(b[s] - a[s], 9) for s in ids if s not in replayed]  # one value, whatever float spelling it had
    n, share = len(ids), len(drawn) / len(ids) if ids else 0.0
    diff = _scaled(mean_estimate(drawn, low=-span, high=span, confidence=confidence), n, share, span)
    evaluated = n >= min_n and diff.high is not None
    p = _p_scaled(drawn, -drift, share, span) if evaluated else None
    sd = (spread_of(sorted(drawn), fmean(drawn), -span, span) * share if len(drawn) > 1 else 0.0) if evaluated else None
    alpha = (1.0 - confidence) / max(1, len(HEADLINE) * len(GATED_GROUPS))  # Holm's first, strictest step
    return Difference(group=group, metric=metric, n=n, difference=diff, significant_drop=False, gated=gated,
                      required=gated and group in REQUIRED_GROUPS,
                      evaluated=evaluated, p_below=p,
                      detectable_drop=detectable(sd, n, alpha=alpha, margin=drift), margin=margin, drift=drift,
                      measured_margin=measured, replayed=n - len(drawn))


def _scaled(drawn: Estimate, n: int, share: float, span: float) -> Estimate:
    """The mean difference over all ``n`` scenarios when only a ``share`` of them are draws (the rest exactly 0): the
    draws' interval times their share; one draw alone is anywhere on the scale."""
    if n == 0:
        return Estimate(0, None, None, None, drawn.confidence)
    if drawn.n == 0:
        return Estimate(n, 0.0, 0.0, 0.0, drawn.confidence) if n > 1 else Estimate(n, 0.0, None, None, drawn.confidence)
    low, high = (drawn.low, drawn.high) if drawn.low is not None and drawn.high is not None else (-span, span)
    if n < 2:
        return Estimate(n, drawn.mean, None, None, drawn.confidence)
    return Estimate(n, drawn.mean * share, low * share, high * share, drawn.confidence)


def _p_scaled(drawn: list[float], bar: float, share: float, span: float) -> float:
    """The p-value of "the mean over all scenarios is at or above ``bar``": the draws' mean at or above
    ``bar / share`` (1 - never shown below - with no draw, or a bar beyond the scale)."""
    if share == 0.0 or bar / share <= -span:
        return 1.0
    if len(drawn) < 2:
        return 1.0
    found = p_below(drawn, bar / share, low=-span, high=span)
    return 1.0 if found is None else found


def as_test(result: Difference) -> Test:
    d = result.difference
    return Test.against(f"{result.group} {result.metric}", result.p_below if result.gated else None, result.n, d,
                        green_bar=-result.margin, red_bar=-result.drift, what="a drop of more than",
                        sign=-1.0)


def apply_decision(result: Difference, test: Test) -> None:
    decision = test.decision if result.gated else ("not evaluated" if not result.evaluated else "reported")
    mean = result.difference.mean
    if (result.gated and not result.required and decision in ("undecided", "not evaluated")
            and (mean is None or mean >= -result.margin)):
        # it could have turned the run red; short of that it is not asked to show green - unless its own estimate
        # points at a drop that matters (a few multi-domain scenarios all broken): then it must be decided
        decision = "reported"
    result.decision = decision
    high = result.difference.high
    # a reported (ungated) difference is described by its own interval; a gated one by the run's decision
    result.significant_drop = test.decision == "red" if result.gated else (
        result.evaluated and high is not None and high < -result.drift)
    result.undecided = test.undecided_text() if test.decision == "undecided" else ""


def decide_differences(results: list[Difference], confidence: float) -> None:
    """The comparison's own decision (the `compare` command): Holm over its gated differences."""
    tests = [as_test(r) for r in results]
    decide(tests, confidence)
    for result, test in zip(results, tests):
        apply_decision(result, test)
