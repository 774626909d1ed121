"""Chance-corrected agreement with its interval, and agreement between a judge's repeats.

The interval of a kappa (Cohen's for the verdict, quadratic-weighted for the rated scales) is a BCa bootstrap
over the labelled dialogues (bias-corrected and accelerated: Efron & Tibshirani, ch. 14): ``RESAMPLES``
resamples drawn with a fixed seed, so the same answers always give the same interval. A constant judge gets
[0, 0] (kappa is 0 whichever dialogues are drawn), a perfect one [1, 1]; resamples where kappa is undefined
(every label and answer one level) are left out. Measured on simulated judges (bench/calibration_bars.py
--coverage): it covers the true kappa 94-95 % of the time for a random judge, 90-97 % for one right 8 times
in 10, 86-97 % for one right 9 times in 10 (agreement near 0.88 on 36 dialogues, which often hold none of
its rare large errors) - far above any bar. numpy is loaded by the functions that compute
(``gating.stats.numpy``), not with the module: a pytest process reads this module's report types long before (if
ever) it computes an interval.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..gating.stats import numpy, weighted_kappa

if TYPE_CHECKING:
    import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20


def _weights(k: int, kind: str) -> np.ndarray:
    np = numpy()

    i, j = np.indices((k, k))
    return (i != j).astype(float) if kind == "none" else ((i - j) / (k - 1)) ** 2


def kappas(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Kappa of each (k x k) table of counts in ``counts`` (shape R x k x k); NaN where undefined."""
    np = numpy()

    observed = counts / counts.sum(axis=(1, 2), keepdims=True)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
    chance = (weights * expected).sum(axis=(1, 2))
    seen = (weights * observed).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance > 0, 1 - seen / np.where(chance > 0, chance, 1), np.nan)


def kappa_interval(labels: Sequence[Any], answers: Sequence[Any], levels: Sequence[Any], weights: str, *,
                   resamples: int = RESAMPLES, seed: int = SEED,
                   confidence: float = CONFIDENCE) -> tuple[Optional[float], Optional[float]]:
    """The BCa bootstrap interval of kappa (``weights``: ``none`` or ``quadratic``) over the (label, answer) pairs."""
    np = numpy()

    n, k = len(labels), len(levels)
    if n < 2 or k < 2:
        return None, None
    index = {level: i for i, level in enumerate(levels)}
    cells = np.array([index[a] * k + index[b] for a, b in zip(labels, answers)])
    w = _weights(k, weights)
    full = np.bincount(cells, minlength=k * k).reshape(1, k, k).astype(float)
    estimate = kappas(full, w)[0]
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    offsets = (np.arange(resamples) * k * k)[:, None]
    counts = np.bincount((cells[picks] + offsets).ravel(), minlength=resamples * k * k).reshape(resamples, k, k)
    values = kappas(counts.astype(float), w)
    values = values[~np.isnan(values)]
    if np.isnan(estimate) or len(values) < resamples // 2:
        return None, None
    left_out = np.repeat(full, n, axis=0)
    left_out.reshape(n, k * k)[np.arange(n), cells] -= 1
    tail = (1 - confidence) / 2
    low, high = np.quantile(values, _bca_levels(values, float(estimate), kappas(left_out, w), (tail, 1 - tail)))
    return float(low), float(high)


def _bca_levels(values: np.ndarray, estimate: float, jackknife: np.ndarray,
                levels: tuple[float, float]) -> list[float]:
    """The percentiles BCa reads instead of ``levels``: corrected for the bootstrap's bias (its median off the
    estimate) and for the skew the jackknife shows (a few large errors weigh more than many small ones)."""
    np = numpy()

    normal = NormalDist()
    below = (np.sum(values < estimate) + 0.5 * np.sum(values == estimate)) / len(values)
    bias = normal.inv_cdf(min(max(float(below), 1e-6), 1 - 1e-6))
    spread = np.nanmean(jackknife) - jackknife
    scale = 6 * float(np.nansum(spread ** 2)) ** 1.5
    skew = float(np.nansum(spread ** 3)) / scale if scale > 0 and not np.isnan(spread).any() else 0.0
    adjusted = []
    for level in levels:
        z = bias + normal.inv_cdf(level)
        adjusted.append(normal.cdf(bias + z / (1 - skew * z)) if skew * z < 1 else level)
    return adjusted


def repeat_pairs(answers: Sequence[Sequence[Any]]) -> list[tuple[Any, Any]]:
    """Every pair of readable answers to the same dialogue (three repeats: three pairs)."""
    pairs = []
    for tries in answers:
        got = [a for a in tries if a is not None]
        pairs += [(got[i], got[j]) for i in range(len(got)) for j in range(i + 1, len(got))]
    return pairs


def repeat_agreement(answers: Sequence[Sequence[Any]]) -> Optional[float]:
    """The share of pairs of repeated judgements of a dialogue that agree (None without repeats).

    Unlike the share of dialogues whose repeats *all* agree, it does not fall as --repeat rises: a judge
    right 90 % of the time, sampled afresh each call, agrees with itself on about 0.81-0.82 of pairs."""
    pairs = repeat_pairs(answers)
    return sum(1 for a, b in pairs if a == b) / len(pairs) if pairs else None


def repeat_kappa(answers: Sequence[Sequence[Any]], levels: Sequence[Any], weights: str) -> Optional[float]:
    """Test-retest agreement, chance-corrected: kappa between repeats over every pair, both ways round."""
    pairs = repeat_pairs(answers)
    if not pairs:
        return None
    first = [a for a, _ in pairs] + [b for _, b in pairs]
    second = [b for _, b in pairs] + [a for a, _ in pairs]
    return weighted_kappa(first, second, categories=levels, weights=weights)
