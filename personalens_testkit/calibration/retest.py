"""The judge's own noise, measured on the run's dialogues (``--judge-retest SHARE``).

A seeded share of the cases is judged a second time, the same dialogue and the same prompts; the
second judgement never counts in any score. Per dimension the report gives how often the two agree,
the chance-corrected agreement (Cohen's kappa for task completion, quadratic-weighted kappa for the
rated scales) with its BCa interval, and the mean shift of the second judgement against the first
with its interval.

That shift is what ``--baseline`` tolerates by default, but only where it measures the judge and
nothing else: on the dialogues whose first judgement was played back from the recording and whose
second was drawn now (last month's judge against today's, on the same dialogue). Pairs played back
twice are the recording's, not a measurement (a recording could hold any numbers), and pairs drawn
twice now compare today's judge with itself. When today's judge rates those dialogues lower, the
part of that drop shown at the run's confidence, times the share of the compared run's scores that
were judged now (a replayed score carries no drift), is the baseline's non-inferiority margin for
that metric: red needs a drop beyond it. Green is decided as with no margin. A judge that shows no
such drop, or a run that measured none, gets margin 0.

Which cases are judged again depends on the case id alone (a hash: evaluation.retest_selected), so a recording and its replay
pick the same ones, and a re-judgement that a recording played back instead of drawing it afresh is
refused (it would measure nothing).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from pydantic import BaseModel

from .agreement import kappa_interval
from ..scales import HEADLINE, METRIC_BY_NAME, METRICS, Metric
from ..gating.intervals import mean_estimate
from ..gating.stats import Estimate, weighted_kappa
from ..results.digest import judged_live

#: fewer re-judged dialogues than this: a dimension's figures are shown, but no margin is taken from them
MIN_PAIRS = 10


class RetestDimension(BaseModel):
    dimension: str
    #: dialogues judged twice with a readable answer both times
    n: int
    exact_agreement: Optional[float]
    #: Cohen's kappa (task completion) or quadratic-weighted kappa (rated scales), with its BCa interval
    kappa: Optional[float]
    kappa_low: Optional[float] = None
    kappa_high: Optional[float] = None
    #: mean of (second judgement - first), with its interval
    shift: Estimate


class JudgeRetest(BaseModel):
    #: the share of cases chosen, how many were judged again, and how many of those failed
    share: Optional[float]
    retested: int
    failed: int
    dimensions: list[RetestDimension]
    #: why some re-judgements failed (the first few, one line each)
    failures: list[str] = []
    #: the dialogues judged first from the recording and again now, and per headline metric the mean shift
    #: of today's judgement against the recording's on them (what a default baseline margin is taken from)
    drift_pairs: int = 0
    drift: dict[str, Estimate] = {}
    #: of every interval here
    confidence: float = 0.95


def _pairs(rows: Iterable[Any]) -> tuple[dict[str, list[tuple[Any, Any]]], dict[str, list[tuple[Any, Any]]], int, int,
                                         list[str]]:
    pairs: dict[str, list[tuple[Any, Any]]] = {m.name: [] for m in METRICS}
    drift: dict[str, list[tuple[Any, Any]]] = {m.name: [] for m in METRICS}
    retested = failed = 0
    failures: list[str] = []
    for row in rows:
        retest = getattr(row, "retest", None)
        if retest is None or not row.scored:
            continue
        retested += 1
        if retest.scores is None:
            failed += 1
            if len(failures) < 5:
                failures.append(f"{row.case_id}: {retest.error or 'no scores'}")
            continue
        drifted = retest.first == "replayed" and retest.second == "live"
        for metric in METRICS:
            pair = (row.score(metric.name), getattr(retest.scores, metric.name))
            pairs[metric.name].append(pair)
            if drifted:
                drift[metric.name].append(pair)
    return pairs, drift, retested, failed, failures


def _shift(metric: Metric, pairs: list[tuple[Any, Any]], confidence: float) -> Estimate:
    span = 1.0 if metric.kind == "bool" else float(metric.high - metric.low)
    return mean_estimate([round(float(b) - float(a), 9) for a, b in pairs], low=-span, high=span, confidence=confidence)


def _dimension(metric: Metric, pairs: list[tuple[Any, Any]], confidence: float) -> RetestDimension:
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    levels: list[Any] = [False, True] if metric.kind == "bool" else list(range(metric.low, metric.high + 1))
    weights = "none" if metric.kind == "bool" else "quadratic"
    kappa = weighted_kappa(first, second, categories=levels, weights=weights) if pairs else None
    low, high = kappa_interval(first, second, levels, weights, confidence=confidence) if pairs else (None, None)
    shift = _shift(metric, pairs, confidence)
    return RetestDimension(dimension=metric.name, n=len(pairs),
                           exact_agreement=sum(a == b for a, b in pairs) / len(pairs) if pairs else None,
                           kappa=kappa, kappa_low=low, kappa_high=high, shift=shift)


def measure(rows: Iterable[Any], *, share: float | None = None, confidence: float = 0.95) -> JudgeRetest | None:
    """The judge's test-retest figures from the rows that carry a second judgement (None: no row does)."""
    pairs, drift, retested, failed, failures = _pairs(rows)
    if not retested:
        return None
    drift_pairs = len(drift[METRICS[0].name])
    shifts = {m: _shift(METRIC_BY_NAME[m], drift[m], confidence) for m in HEADLINE} if drift_pairs else {}
    return JudgeRetest(share=share, retested=retested, failed=failed, failures=failures,
                       dimensions=[_dimension(m, pairs[m.name], confidence) for m in METRICS],
                       drift_pairs=drift_pairs, drift=shifts, confidence=confidence)


def judged_now(rows: Iterable[Any]) -> float:
    """The share of the scored rows whose scores a judge drew now rather than a recording played back (a row that
    no longer keeps its calls counts as played back)."""
    scored = [row for row in rows if row.scored]
    return sum(map(_judged_live, scored)) / len(scored) if scored else 0.0


def _judged_live(row: Any) -> bool:
    if row.retest is not None and row.retest.first is not None:  # the first judgement's own record
        return row.retest.first == "live"
    return judged_live(row)


def drift_margins(retest: JudgeRetest | None, live_share: float = 1.0) -> dict[str, float]:
    """Per headline metric, the drop the judge alone is shown to produce on the compared scores: the part of
    today's downward shift against the recording's judge that the interval shows, times ``live_share`` (the
    share of the scores judged now); 0 when none is shown or fewer than :data:`MIN_PAIRS` dialogues were judged
    from the recording and again now."""
    found = {metric: 0.0 for metric in HEADLINE}
    if retest is None or retest.drift_pairs < MIN_PAIRS:
        return found
    for metric, shift in retest.drift.items():
        if metric in found and shift.high is not None and shift.high < 0:
            found[metric] = round(-shift.high * max(0.0, min(1.0, live_share)), 6)
    return found


def describe(retest: JudgeRetest) -> list[str]:
    """The terminal's lines: one per dimension."""
    chosen = f" ({retest.share:.0%} of the cases chosen)" if retest.share is not None else ""
    head = f"judge test-retest: {retest.retested} dialogue(s) judged again{chosen}"
    lines = [head + (f", {retest.failed} re-judgement(s) failed" if retest.failed else "")]
    for dim in retest.dimensions:
        if not dim.n:
            continue
        kind = "kappa" if METRIC_BY_NAME[dim.dimension].kind == "bool" else "QWK"
        kappa = "undefined" if dim.kappa is None else f"{dim.kappa:.2f}" + (
            f" [{dim.kappa_low:.2f}, {dim.kappa_high:.2f}]" if dim.kappa_low is not None else "")
        lines.append(f"  {dim.dimension:<24} n={dim.n:<4} agree {dim.exact_agreement:.0%}  {kind} {kappa}  "
                     f"shift {dim.shift.describe()}")
    if retest.drift_pairs:
        lines.append(f"  against the recording's judge ({retest.drift_pairs} dialogue(s) judged from it and again now): "
                     + ", ".join(f"{metric} {shift.describe()}" for metric, shift in retest.drift.items()))
    lines += [f"  failed: {line}" for line in retest.failures]
    return lines


def margin_basis(retest: JudgeRetest | None, margins: Mapping[str, float], live_share: float = 1.0) -> str:
    """Where ``--baseline``'s default margins come from, in words."""
    if retest is None:
        return "none measured: no dialogue was judged again (--judge-retest SHARE measures the judge's drift)"
    if retest.drift_pairs < MIN_PAIRS:
        return (f"none measured: {retest.drift_pairs} dialogue(s) judged from the recording and again now, fewer "
                f"than {MIN_PAIRS}")
    shown = {metric: value for metric, value in margins.items() if value > 0}
    where = f"{retest.drift_pairs} dialogue(s) judged from the recording and now"
    if not shown:
        return f"the judge showed no drop of its own on {where}"
    return (f"the drop the judge alone showed on {where}, times the {live_share:.0%} of scores judged now: "
            + ", ".join(f"{metric} {value:.3g}" for metric, value in shown.items()))
