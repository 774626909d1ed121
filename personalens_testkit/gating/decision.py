"""One decision over everything that gates a run: green only where the run shows it, red only where the
judge's noise and drift cannot explain it, inconclusive otherwise.

Each gated test has two bars. Its **green bar** is the lowest value that does not matter: an aggregate gate's
``min`` less the metric's margin, or - with ``--baseline`` - a difference of ``-margin`` (thresholds.yaml's
``margin``: a drop that does not matter). Its **red bar** is what the judge's drift explains: ``min`` less the
metric's drift, or a difference of ``-drift`` (never beyond the margin). A test is then

- **green** (passed): the interval's low end is at or above the green bar - shown, never assumed;
- **red** (regressed): not green, and the run shows it below the red bar: its one-sided p-value of "at or
  above the red bar" (:func:`~.intervals.p_below`) is rejected by Holm's step-down procedure taken over every
  gated test at ``1 - confidence``, so the chance that the judge's noise alone turns any of them red is at most
  that, however many there are;
- **undecided** (inconclusive): neither at this n - with the value the run still leaves open and how many
  scenarios would likely decide it.

With a drop of at least the margin, green needs the interval to miss the truth on its low side: at most
``(1 - confidence) / 2`` of runs, at any n. A single judgement is evidence, not a decision: the run's red
comes from these tests (and from cases that fail deterministically - a bot error, an offline replay below its
floor), never from one noisy score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, Sequence

from .stats import Estimate

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
    #: what the run rules out, in words (for an undecided test)
    ruled_out: str = ""

    @classmethod
    def against(cls, name: str, p_below: float | None, n: int, estimate: Estimate, *, green_bar: float,
                red_bar: float, what: str, sign: float = 1.0) -> Test:
        """A test of ``estimate`` against its two bars: green when its low end reaches ``green_bar``; red is decided
        on ``p_below`` (at ``red_bar``). ``what``/``sign``: how the low end it rules out is said (a value below
        it; with ``sign`` -1, a drop of more than its negative)."""
        mean, low = estimate.mean, estimate.low
        shown = low is not None and low >= green_bar - 1e-12
        # "how many more": towards green when the mean is on green's side of its bar, else towards red
        on_green = mean is not None and mean >= green_bar
        bar = green_bar if on_green else red_bar
        ruled = "" if low is None else f"it rules out {what} {sign * low:.3g}"
        return cls(name=name, p_below=p_below, shown_above=shown, n=n, half_width=estimate.reach(bar),
                   distance=None if mean is None else mean - bar, ruled_out=ruled)

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
        said = f"{self.ruled_out}; " if self.ruled_out else ""
        if more is None:
            return said + "the estimate sits on its bar: more scenarios would not likely decide it"
        return said + f"about {more:,} more scenarios would likely decide it"


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
    """Set each test's decision, together (Holm over every evaluated test): green where shown at or above the green
    bar, else red where Holm rejects "at or above the red bar", else undecided."""
    for test, red in zip(tests, holm([t.p_below for t in tests], 1.0 - confidence)):
        if test.p_below is None:
            test.decision = "not evaluated"
        elif test.shown_above:
            test.decision = "green"
        else:
            test.decision = "red" if red else "undecided"


def detectable(sd: float | None, n: int, *, alpha: float, power: float = 0.8, margin: float = 0.0) -> float | None:
    """The smallest true drop a one-sided test at ``alpha`` on ``n`` paired scenarios whose differences spread ``sd``
    finds with ``power``, beyond the margin."""
    if sd is None or n < 2:
        return None
    z = NormalDist().inv_cdf
    return margin + (z(1.0 - alpha) + z(power)) * sd / math.sqrt(n)
