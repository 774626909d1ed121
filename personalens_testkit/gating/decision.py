"""One decision over everything that gates a run, whose red the judge's own noise cannot explain.

Each gated test asks whether the run *shows* the bot below a bar: an aggregate gate's ``min``, or - with
``--baseline`` - the base's value less the non-inferiority margin. Its one-sided p-value
(:func:`~.intervals.p_below`) is small when the values are unlikely with the truth on the bar. The tests are
taken together with Holm's step-down procedure at ``1 - confidence``: the chance that any of them turns the
run red when none is truly below its bar is at most that, however many gates there are. A test is then

- **red** (regressed): Holm rejects "at or above the bar";
- **green** (passed): the interval's low end is at or above the bar (shown above it);
- **undecided** (inconclusive): neither at this n - with how many scenarios would likely decide it.

A single judgement is evidence, not a decision: the run's red comes from these tests (and from cases that
fail deterministically - a bot error, an offline replay below its floor), never from one noisy score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, Sequence

Decision = Literal["red", "green", "undecided", "not evaluated"]


@dataclass
class Test:
    """One gated test: its name, the p-value of "at or above the bar" (None: not evaluated), whether the
    interval shows it at or above the bar, and what a more-scenarios estimate needs."""

    name: str
    p_below: float | None
    shown_above: bool
    n: int
    #: the interval's half-width and the estimate's distance to the bar (for "how many more")
    half_width: float | None = None
    distance: float | None = None
    decision: Decision = "not evaluated"

    def more_needed(self) -> int | None:
        """About how many more scenarios would likely decide an undecided test (None: not estimable)."""
        if self.half_width is None or self.distance is None or self.n < 2:
            return None
        if abs(self.distance) < 1e-9:
            return None  # on the bar: no number of scenarios is likely to decide it
        total = self.n * (self.half_width / abs(self.distance)) ** 2
        return max(1, math.ceil(total - self.n))

    def undecided_text(self) -> str:
        more = self.more_needed()
        if more is None:
            return "the estimate sits on its bar: more scenarios would not likely decide it"
        return f"about {more:,} more scenarios would likely decide it"


def holm(p_values: Sequence[float | None], alpha: float) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise level ``alpha`` (None: not a test)."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    rejected = [False] * len(p_values)
    m = len(ranked)
    for step, (p, i) in enumerate(ranked):
        if p > alpha / (m - step):
            break
        rejected[i] = True
    return rejected


def decide(tests: Sequence[Test], confidence: float) -> None:
    """Set each test's decision, together (Holm over every evaluated test)."""
    for test, red in zip(tests, holm([t.p_below for t in tests], 1.0 - confidence)):
        if test.p_below is None:
            test.decision = "not evaluated"
        elif red:
            test.decision = "red"
        else:
            test.decision = "green" if test.shown_above else "undecided"


def detectable(sd: float | None, n: int, *, alpha: float, power: float = 0.8, margin: float = 0.0) -> float | None:
    """The smallest true drop a one-sided test at ``alpha`` on ``n`` paired scenarios whose differences spread ``sd``
    finds with ``power``, beyond the margin."""
    if sd is None or n < 2:
        return None
    z = NormalDist().inv_cdf
    return margin + (z(1.0 - alpha) + z(power)) * sd / math.sqrt(n)
