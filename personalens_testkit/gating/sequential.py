"""Deciding while the run goes on (``--stop-when-decided``): confidence sequences, valid at every look.

A fixed-n interval looked at after every case and acted on the first time it excludes a bar is not valid: with
enough looks it excludes any bar by chance. A **confidence sequence** covers the truth at all times at once, so
the run may look after every case and stop the first time each gated test is decided. This one is the predictable
plug-in empirical-Bernstein sequence of Waudby-Smith and Ramdas ("Estimating means of bounded random variables by
betting", JRSS-B 2024, Theorem 2): for values in [0, 1], with bets

    lambda_t = min(1/2, sqrt(2 log(1/a) / (t log(1 + t) sigma2_{t-1}))),

(sigma2 a regularised running variance), the lower bound after t values is

    sum(lambda_i x_i) / sum(lambda_i) - (log(1/a) + sum(v_i psi(lambda_i))) / sum(lambda_i),
    v_i = (x_i - mean_{i-1})^2, psi(l) = -log(1 - l) - l,

and the upper bound the same on 1 - x; each side at a/2, intersected over time. It adapts to the variance (a
metric that barely moves is decided in few cases), and it is checked against the authors' own implementation
(confseq's ``predmix_empbern_twosided_cs``) in tests/test_sequential.py.

Each gated test (an enforced aggregate gate, a gated difference from the baseline) gets its own sequence at
``alpha / m`` (Bonferroni over the m tests): the chance that any test is ever decided wrongly is at most alpha,
however long the run looks. A test is **green** once its sequence lies wholly at or above its green bar (the
bar less the metric's margin: non-inferiority shown, so an unchanged bot's run ends early too), **red** once
wholly below its red bar (the bar less the judge's drift). The run is decided when one test is red (the run is red whatever the
rest say) or every test is green.

The unit is the scenario (its tries averaged), as in the fixed-n verdict: the scenarios, drawn in a random
order, are a sample from the benchmark's population, and the sequence covers that population's mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TRUNCATION = 0.5


@dataclass
class _LowerBound:
    """One side of the sequence: a running lower bound of the mean of values in [0, 1]."""

    alpha: float
    t: int = 0
    total: float = 0.0  # sum of x
    squares: float = 0.0  # sum of (x_i - regularised mean_i)^2
    bets: float = 0.0  # sum of lambda
    weighted: float = 0.0  # sum of lambda x
    penalty: float = 0.0  # sum of v psi(lambda)
    best: float = 0.0  # the running intersection

    def add(self, x: float) -> float:
        t = self.t + 1
        variance = (0.25 + self.squares) / t  # sigma2_{t-1}: prior 1/4 as one fake value
        bet = math.sqrt(2 * math.log(1 / self.alpha) / (t * math.log(1 + t) * variance)) if variance > 0 else 0.0
        bet = min(TRUNCATION, bet)
        previous = self.total / self.t if self.t else 0.0  # mean_{t-1}, 0 before any value
        self.bets += bet
        self.weighted += bet * x
        self.penalty += (x - previous) ** 2 * (-math.log1p(-bet) - bet)
        self.total += x
        self.t = t
        regularised = min((0.5 + self.total) / (t + 1), 1.0)
        self.squares += (x - regularised) ** 2
        if self.bets > 0:
            bound = self.weighted / self.bets - (math.log(1 / self.alpha) + self.penalty) / self.bets
            self.best = max(self.best, bound, 0.0)
        return self.best


@dataclass
class ConfidenceSequence:
    """A two-sided confidence sequence for the mean of values in [``low``, ``high``], at level ``alpha``."""

    alpha: float
    low: float = 0.0
    high: float = 1.0
    _lower: _LowerBound = field(init=False)
    _upper: _LowerBound = field(init=False)

    def __post_init__(self) -> None:
        self._lower, self._upper = _LowerBound(self.alpha / 2), _LowerBound(self.alpha / 2)

    @property
    def n(self) -> int:
        return self._lower.t

    def add(self, value: float) -> tuple[float, float]:
        """Take one value; the sequence's interval now."""
        x = min(max((value - self.low) / (self.high - self.low), 0.0), 1.0)
        self._lower.add(x)
        self._upper.add(1.0 - x)
        return self.interval()

    def interval(self) -> tuple[float, float]:
        span = self.high - self.low
        return self.low + span * self._lower.best, self.low + span * (1.0 - self._upper.best)


@dataclass
class SequentialTest:
    """One gated test as the run goes: the metric's values (or paired differences) against a bar."""

    name: str
    #: green once the sequence lies at or above it (the bar less the margin: non-inferiority shown)
    bar: float
    sequence: ConfidenceSequence
    #: "green", "red" or "undecided"
    decision: str = "undecided"
    #: red once the sequence lies below it (the bar less the judge's drift); None: ``bar``
    red_bar: float | None = None
    #: whether the run's green waits for this test's (False: it can only decide the run red)
    required: bool = True

    def add(self, value: float) -> str:
        low, high = self.sequence.add(value)
        if self.decision == "undecided":
            if low >= self.bar:
                self.decision = "green"
            elif high < (self.bar if self.red_bar is None else self.red_bar):
                self.decision = "red"
        return self.decision

    def describe(self) -> str:
        low, high = self.sequence.interval()
        bars = f"{self.bar:g}" if self.red_bar is None else f"green at {self.bar:g}, red below {self.red_bar:g}"
        return f"{self.name}: {self.decision} after {self.sequence.n} (range [{low:.3f}, {high:.3f}] vs {bars})"


def run_decision(tests: list[SequentialTest]) -> str:
    """``red`` when a test is red, ``green`` when every required test is green, else ``undecided``."""
    if any(t.decision == "red" for t in tests):
        return "red"
    required = [t for t in tests if t.required]
    return "green" if required and all(t.decision == "green" for t in required) else "undecided"
