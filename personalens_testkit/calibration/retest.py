"""The judge's own noise, measured on the run's dialogues (``--judge-retest SHARE``).

A seeded share of the cases is judged a second time, the same dialogue and the same prompts; the
second judgement never counts in any score. Per dimension the report gives how often the two agree,
the chance-corrected agreement (Cohen's kappa for task completion, quadratic-weighted kappa for the
rated scales) with its BCa interval, and the mean shift of the second judgement against the first
with its interval.

That shift is what ``--baseline`` tolerates by default: when the judge is shown to rate the same
dialogues lower now than in the judgement it is compared with (a recording made with last month's
judge, replayed, against today's live one), the part of that drop shown at the run's confidence is
the baseline's non-inferiority margin for that metric - a drop the judge alone produces is not the
bot's. A judge that shows no such drop, or a run that measured none, gets margin 0.

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


def _pairs(rows: Iterable[Any]) -> tuple[dict[str, list[tuple[Any, Any]]], int, int, list[str]]:
    pairs: dict[str, list[tuple[Any, Any]]] = {m.name: [] for m in METRICS}
    retested = failed = 0
    failures: list[str] = []
    for row in rows:
        retest = getattr(row, "retest", None)
        if not retest or not row.scored:
            continue
        retested += 1
        second = retest.get("scores")
        if not isinstance(second, Mapping):
            failed += 1
            if len(failures) < 5:
                failures.append(f"{row.case_id}: {retest.get('error', 'no scores')}")
            continue
        for metric in METRICS:
            first, again = row.score(metric.name), second.get(metric.name)
            if first is not None and again is not None:
                pairs[metric.name].append((first, again))
    return pairs, retested, failed, failures


def _dimension(metric: Metric, pairs: list[tuple[Any, Any]], confidence: float) -> RetestDimension:
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    levels: list[Any] = [False, True] if metric.kind == "bool" else list(range(metric.low, metric.high + 1))
    weights = "none" if metric.kind == "bool" else "quadratic"
    kappa = weighted_kappa(first, second, categories=levels, weights=weights) if pairs else None
    low, high = kappa_interval(first, second, levels, weights, confidence=confidence) if pairs else (None, None)
    span = 1.0 if metric.kind == "bool" else float(metric.high - metric.low)
    shift = mean_estimate([round(float(b) - float(a), 9) for a, b in pairs], low=-span, high=span, confidence=confidence)
    return RetestDimension(dimension=metric.name, n=len(pairs),
                           exact_agreement=sum(a == b for a, b in pairs) / len(pairs) if pairs else None,
                           kappa=kappa, kappa_low=low, kappa_high=high, shift=shift)


def measure(rows: Iterable[Any], *, share: float | None = None, confidence: float = 0.95) -> JudgeRetest | None:
    """The judge's test-retest figures from the rows that carry a second judgement (None: no row does)."""
    pairs, retested, failed, failures = _pairs(rows)
    if not retested:
        return None
    return JudgeRetest(share=share, retested=retested, failed=failed, failures=failures,
                       dimensions=[_dimension(m, pairs[m.name], confidence) for m in METRICS])


def drift_margins(retest: JudgeRetest | None) -> dict[str, float]:
    """Per headline metric, the drop the judge alone is shown to produce (the part of a downward shift
    that the interval shows, 0 when it shows none or fewer than :data:`MIN_PAIRS` dialogues were re-judged)."""
    found = {metric: 0.0 for metric in HEADLINE}
    for dim in retest.dimensions if retest is not None else ():
        if dim.dimension in found and dim.n >= MIN_PAIRS and dim.shift.high is not None and dim.shift.high < 0:
            found[dim.dimension] = round(-dim.shift.high, 6)
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
    lines += [f"  failed: {line}" for line in retest.failures]
    return lines


def margin_basis(retest: JudgeRetest | None, margins: Mapping[str, float]) -> str:
    """Where ``--baseline``'s default margins come from, in words."""
    if retest is None:
        return "none measured: no dialogue was judged again (--judge-retest SHARE measures the judge's drift)"
    shown = {metric: value for metric, value in margins.items() if value > 0}
    pairs = max((d.n for d in retest.dimensions), default=0)
    if not shown:
        return f"the judge showed no drop of its own on {pairs} re-judged dialogue(s)"
    return (f"the drop the judge alone showed on {pairs} re-judged dialogue(s): "
            + ", ".join(f"{metric} {value:.3g}" for metric, value in shown.items()))
