"""Statistics for gates and reports: the Estimate a gate reads (a mean with its confidence interval,
made by gating/intervals.py), pass^k, and agreement between two raters (Cohen's kappa,
quadratic-weighted kappa, Krippendorff's alpha for ordinal data). Nothing here is random.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from pydantic import BaseModel, ConfigDict

class Estimate(BaseModel):
    """A mean with its confidence interval (``low``/``high`` are None below two values)."""

    model_config = ConfigDict(frozen=True)

    n: int
    mean: Optional[float]
    low: Optional[float]
    high: Optional[float]
    confidence: float = 0.95

    def __init__(self, n: int, mean: float | None, low: float | None, high: float | None, confidence: float = 0.95,
                 **_: Any) -> None:
        super().__init__(n=n, mean=mean, low=low, high=high, confidence=confidence)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def bound(self, on: str) -> float | None:
        """The value a gate compares: ``mean`` or ``lower_bound`` (the interval's low end)."""
        return self.mean if on == "mean" else self.low

    def reach(self, bar: float) -> float | None:
        """The interval's reach on ``bar``'s side of the mean: what has to shrink for it to be decided against it."""
        if self.high is None or self.low is None or self.mean is None:
            return None
        return self.mean - self.low if self.mean >= bar else self.high - self.mean

    def describe(self, digits: int = 2) -> str:
        if self.mean is None:
            return "n/a"
        if self.low is None or self.high is None:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def pass_hat_k(successes: Sequence[Sequence[bool]], k: int) -> float | None:
    """pass^k: the chance that k tries of a scenario all succeed, averaged over scenarios
    (per scenario C(c, k) / C(n, k) with c successes in n >= k tries; a caller counts an errored
    try as a failed one, as tau-bench does, so pass^k never exceeds pass^1 on the same scenarios)."""
    rates = []
    for tries in successes:
        n, c = len(tries), sum(bool(t) for t in tries)
        if n >= k:
            rates.append(math.comb(c, k) / math.comb(n, k))
    return sum(rates) / len(rates) if rates else None


_NUMPY: list[Any] = []


def numpy() -> Any:
    """numpy, loaded by the first statistic that needs it rather than with the package (it costs a pytest process
    0.1 s before its first case), and kept here: pytester's in-process runs drop the modules a run imported, and
    numpy refuses to load its C core a second time in one process, so it is never imported twice."""
    if not _NUMPY:
        import numpy as np

        _NUMPY.append(np)
    return _NUMPY[0]


# -- agreement between two raters -----------------------------------------------------------

def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa for two raters' categorical labels (None when undefined)."""
    return weighted_kappa(a, b, categories=sorted(set(a) | set(b), key=str), weights="none")


def weighted_kappa(a: Sequence[Any], b: Sequence[Any], *, categories: Sequence[Any] | None = None,
                   weights: str = "quadratic") -> float | None:
    """Cohen's kappa with ``none``, ``linear`` or ``quadratic`` disagreement weights over ordered categories."""
    if len(a) != len(b) or not a:
        return None
    cats = list(categories) if categories is not None else sorted(set(a) | set(b))
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    if k < 2:
        return None
    np = numpy()

    observed = np.zeros((k, k))
    for x, y in zip(a, b):
        observed[index[x], index[y]] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    if weights == "none":
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / (k - 1)
    else:
        w = ((i - j) / (k - 1)) ** 2
    denominator = float((w * expected).sum())
    if denominator == 0:
        return None
    return 1 - float((w * observed).sum()) / denominator


def krippendorff_alpha_ordinal(a: Sequence[int], b: Sequence[int], *, categories: Sequence[int]) -> float | None:
    """Krippendorff's alpha, ordinal metric, for two raters who rated every unit."""
    if len(a) != len(b) or not a:
        return None
    cats = list(categories)
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    np = numpy()

    coincidence = np.zeros((k, k))
    for x, y in zip(a, b):
        coincidence[index[x], index[y]] += 1
        coincidence[index[y], index[x]] += 1
    totals = coincidence.sum(axis=1)
    n = totals.sum()
    # ordinal distance: (sum of marginals from c to k, minus half of each end)^2
    delta = np.zeros((k, k))
    for c in range(k):
        for d in range(k):
            lo, hi = min(c, d), max(c, d)
            delta[c, d] = (totals[lo:hi + 1].sum() - (totals[lo] + totals[hi]) / 2) ** 2
    observed = float((coincidence * delta).sum())
    expected = float((np.outer(totals, totals) * delta).sum()) / (n - 1)
    if expected == 0:
        return None
    return 1 - observed / expected
