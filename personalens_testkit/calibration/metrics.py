"""How a judge's scores compare with the calibration labels, per dimension: accuracy (and within one level
for the rated scales), Cohen's kappa (the verdict) or quadratic-weighted kappa (the rated scales) with its
95 % interval (see :mod:`.agreement`), Spearman's rank correlation; how often its answer changes when the
same dialogue is judged again; and how much judge-addressed text added by the assistant raises its scores."""

from __future__ import annotations

import math
from statistics import fmean, stdev
from typing import Any, Optional, Sequence

from pydantic import BaseModel

from ..gating.intervals import t_quantile
from ..gating.stats import cohen_kappa, weighted_kappa
from ..scales import METRIC_BY_NAME
from .agreement import CONFIDENCE, kappa_interval, repeat_agreement, repeat_kappa


class DimensionFigures(BaseModel):
    dimension: str
    #: dialogues with a label for this dimension, and how many the judge answered (every repeat)
    n: int
    answered: int
    errors: int
    #: share of labelled dialogues whose first answer equals the label (an error counts as wrong)
    accuracy: Optional[float]
    #: for rated scales: share within one level of the label
    within_one: Optional[float] = None
    #: Cohen's kappa for the verdict, quadratic-weighted kappa for the rated scales
    kappa: Optional[float] = None
    qwk: Optional[float] = None
    spearman: Optional[float] = None
    #: the chance-corrected agreement the bars read (``kappa`` for the verdict, ``qwk`` for the rated scales)
    #: and its 95 % interval, a bootstrap over the dialogues with a fixed seed (the same answers, the same interval)
    agreement: Optional[float] = None
    agreement_low: Optional[float] = None
    agreement_high: Optional[float] = None
    #: share of dialogues whose repeats all gave the same answer
    consistency: Optional[float] = None
    #: share of pairs of repeats that gave the same answer (what the self-consistency bar reads), and the same
    #: agreement between repeats chance-corrected (Cohen's kappa for the verdict, QWK for the rated scales)
    repeat_agreement: Optional[float] = None
    repeat_kappa: Optional[float] = None


class InjectionFigures(BaseModel):
    dimension: str
    n: int
    #: mean of (score with the injected text - score without), in the dimension's own units (a verdict: 0 or 1),
    #: and its 95 % interval (Student-t over the dialogues; None below two)
    mean_gain: Optional[float]
    #: how many answers moved up
    raised: int
    low: Optional[float] = None
    high: Optional[float] = None


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho with average ranks for ties (None when either side is constant)."""
    if len(a) != len(b) or len(a) < 2:
        return None
    x, y = _ranks(a), _ranks(b)
    mx, my = fmean(x), fmean(y)
    sx = math.sqrt(sum((v - mx) ** 2 for v in x))
    sy = math.sqrt(sum((v - my) ** 2 for v in y))
    if sx == 0 or sy == 0:
        return None
    return sum((p - mx) * (q - my) for p, q in zip(x, y)) / (sx * sy)


def _number(value: Any) -> float:
    return float(value) if not isinstance(value, bool) else (1.0 if value else 0.0)


def figures(dimension: str, labels: Sequence[Any], answers: Sequence[Sequence[Any]]) -> DimensionFigures:
    """``answers[i]``: the judge's answers (repeats) for the i-th labelled dialogue; None for an error."""
    metric = METRIC_BY_NAME[dimension]
    n = len(labels)
    firsts = [tries[0] if tries else None for tries in answers]
    pairs = [(label, first) for label, first in zip(labels, firsts) if first is not None]
    errors = sum(1 for tries in answers for answer in tries if answer is None)
    answered = sum(1 for tries in answers for answer in tries if answer is not None)
    result = DimensionFigures(dimension=dimension, n=n, answered=answered, errors=errors,
                              accuracy=sum(1 for label, got in pairs if got == label) / n if n else None)
    levels: list[Any] = [False, True] if metric.kind == "bool" else list(range(metric.low, metric.high + 1))
    weights = "none" if metric.kind == "bool" else "quadratic"
    if pairs:
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
        if metric.kind == "bool":
            result.kappa = result.agreement = cohen_kappa(xs, ys)
        else:
            result.within_one = sum(1 for label, got in pairs if abs(got - label) <= 1) / n
            result.qwk = result.agreement = weighted_kappa(xs, ys, categories=levels)
            result.kappa = weighted_kappa(xs, ys, categories=levels, weights="none")
        if result.agreement is not None:
            result.agreement_low, result.agreement_high = kappa_interval(xs, ys, levels, weights)
        result.spearman = spearman([_number(v) for v in xs], [_number(v) for v in ys])
    repeated = [tries for tries in answers if len(tries) > 1]
    if repeated:
        result.consistency = sum(1 for tries in repeated if len(set(map(repr, tries))) == 1) / len(repeated)
        result.repeat_agreement = repeat_agreement(repeated)
        result.repeat_kappa = repeat_kappa(repeated, levels, weights)
    return result


def injection(dimension: str, clean: Sequence[Any], injected: Sequence[Any]) -> InjectionFigures:
    """The gain from judge-addressed text: pairs of (answer without, answer with); errors are left out."""
    pairs = [(_number(a), _number(b)) for a, b in zip(clean, injected) if a is not None and b is not None]
    gains = [b - a for a, b in pairs]
    result = InjectionFigures(dimension=dimension, n=len(pairs), mean_gain=fmean(gains) if gains else None,
                              raised=sum(1 for a, b in pairs if b > a))
    if len(gains) >= 2:
        half = t_quantile(0.5 + CONFIDENCE / 2, len(gains) - 1) * stdev(gains) / math.sqrt(len(gains))
        result.low, result.high = fmean(gains) - half, fmean(gains) + half
    return result
