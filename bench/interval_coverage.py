"""Coverage of the gates' confidence intervals at small n: how often the interval holds the true value.

For rates (task completion) the coverage is exact - a sum over every count of successes - for the
Agresti-Coull interval the testkit uses, Wilson's, and the percentile bootstrap it replaced; for means
(personalization on the paper's distribution) it is simulated, Student-t against the bootstrap. Also the
one-sided miss rate of the low end: how often a lower-bound gate would fail a bot that truly sits on it.

    python bench/interval_coverage.py [--trials 2000] [--sizes 10,25,100]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from personalens_testkit.gating.intervals import _z, mean_estimate  # noqa: E402

PERSONALIZATION = ([1, 2, 3, 4], [0.22, 0.50, 0.24, 0.04])  # mean 2.10, as the paper's assistants


def agresti_coull(k: int, n: int) -> tuple[float, float]:
    z = _z(0.95)
    total = n + z * z
    centre = (k + z * z / 2) / total
    half = z * math.sqrt(centre * (1 - centre) / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson(k: int, n: int) -> tuple[float, float]:
    z, p = _z(0.95), k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def bootstrap(values: np.ndarray, rng: np.random.Generator, resamples: int = 2000) -> tuple[float, float]:
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def rate_coverage(interval, n: int, p: float) -> tuple[float, float]:
    """(coverage, share of samples whose low end lies above p)."""
    cover = above = 0.0
    for k in range(n + 1):
        weight = math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        low, high = interval(k, n)
        cover += weight if low <= p <= high else 0.0
        above += weight if low > p else 0.0
    return cover, above


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--sizes", default="10,25,100")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    rates = [0.5 + i * 0.005 for i in range(95)]
    np_rng = np.random.default_rng(1)

    def boot_rate(k: int, n: int) -> tuple[float, float]:
        return bootstrap(np.array([1.0] * k + [0.0] * (n - k)), np_rng, 500) if 0 < k < n else (k / n, k / n)

    print("task completion rate, true rate 0.50-0.97: coverage mean / min (low end above the truth, mean)")
    for name, interval in (("agresti-coull", agresti_coull), ("wilson", wilson), ("percentile bootstrap", boot_rate)):
        for n in sizes:
            found = [rate_coverage(interval, n, p) for p in rates]
            cover = [c for c, _ in found]
            print(f"  {name:22} n={n:<4} {sum(cover) / len(cover):.3f} / {min(cover):.3f} "
                  f"({sum(a for _, a in found) / len(found):.3f})")
    levels, weights = PERSONALIZATION
    truth = sum(level * w for level, w in zip(levels, weights))
    print(f"personalization (true mean {truth:.2f}), {args.trials} samples: coverage (low end above the truth)")
    for n in sizes:
        rng = random.Random(n)
        t_cover = t_above = b_cover = b_above = 0
        for _ in range(args.trials):
            sample = rng.choices(levels, weights, k=n)
            e = mean_estimate(sample, low=1, high=4)
            t_cover += e.low <= truth <= e.high
            t_above += e.low > truth
            low, high = bootstrap(np.asarray(sample, dtype=float), np_rng, 1000)
            b_cover += low <= truth <= high
            b_above += low > truth
        print(f"  n={n:<4} student-t {t_cover / args.trials:.3f} ({t_above / args.trials:.3f})   "
              f"percentile bootstrap {b_cover / args.trials:.3f} ({b_above / args.trials:.3f})")


if __name__ == "__main__":
    main()
