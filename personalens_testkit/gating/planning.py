"""How many scenarios a gate needs: the run size at which an unchanged bot is shown green and a drop of the margin
is shown red, with the powers a team can rely on.

For a metric with margin ``m`` (a drop that does not matter) and drift ``d`` (what the judge alone explains),
a comparison on ``n`` scenarios whose paired differences spread ``sd`` is

- **red on a drop of the margin** with power ``power_red`` when ``(z(1 - alpha_red) + z(power_red)) * sd /
  sqrt(n) <= m - d``, where ``alpha_red`` is Holm's first and strictest step over every gated test of the run
  (the verdict's own: gating/decision.py);
- **green with no change** (the judge drifting by ``d``) with power ``power_green`` when
  ``(z((1 + confidence) / 2) + z(power_green)) * sd / sqrt(n) <= m - d``.

``n`` is the larger of the two. Without a run to measure ``sd`` from, a difference's spread is taken as
``sqrt(2)`` times the spread of one run's scores (the spread of a difference of two independent draws - an
upper bound, as the same bot's two runs of a scenario go together), the scores spread as the paper's
assistants' do (:data:`PAPER_SPREAD`). A planned size is a floor: the verdict still decides on the run's own
intervals, so a run at it is decided in most runs, not all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, pstdev
from typing import Iterable, Mapping

from ..scales import HEADLINE
from .aggregate import scenario_values
from .thresholds import AggregateGates

#: the spread of one run's per-scenario scores, as the paper's assistants score: personalization P(1..4) =
#: (0.25, 0.49, 0.22, 0.04); a completion rate near 0.87 (89 % single-domain, 78 % multi-domain, judged);
#: naturalness and coherence P(2..5) = (0.02, 0.18, 0.55, 0.25)
PAPER_SPREAD: dict[str, float] = {
    "task_completion": math.sqrt(0.87 * 0.13),
    "personalization": math.sqrt(sum(q * (v - 2.05) ** 2 for v, q in zip((1, 2, 3, 4), (0.25, 0.49, 0.22, 0.04)))),
    "naturalness_assistant": math.sqrt(sum(q * (v - 4.03) ** 2 for v, q in zip((2, 3, 4, 5), (0.02, 0.18, 0.55, 0.25)))),
    "coherence_assistant": math.sqrt(sum(q * (v - 4.03) ** 2 for v, q in zip((2, 3, 4, 5), (0.02, 0.18, 0.55, 0.25)))),
}
#: the powers a planned run aims at: a drop of the margin shown red, an unchanged bot shown green
POWER_RED, POWER_GREEN = 0.9, 0.8


@dataclass(frozen=True)
class MetricPlan:
    metric: str
    margin: float
    drift: float
    #: the spread of a paired difference, and where it comes from
    spread: float
    #: scenarios for the red power, the green power, and the larger (None: margin == drift, no size suffices)
    for_red: int | None
    for_green: int | None

    @property
    def needed(self) -> int | None:
        if self.for_red is None or self.for_green is None:
            return None
        return max(self.for_red, self.for_green)


@dataclass(frozen=True)
class Plan:
    metrics: list[MetricPlan]
    #: the gated tests of a run (Holm's family) the red power accounts for
    tests: int
    spread_basis: str

    @property
    def needed(self) -> int | None:
        """The scenarios a run needs for every metric (None: some margin equals its drift)."""
        found = [m.needed for m in self.metrics]
        return None if any(n is None for n in found) else max(found)  # type: ignore[type-var]

    def lines(self, available: int | None = None) -> list[str]:
        out = [f"scenarios a gate needs (a drop of the margin red in {POWER_RED:.0%} of runs, an unchanged bot green "
               f"in {POWER_GREEN:.0%}; Holm over {self.tests} gated tests; spread {self.spread_basis}):"]
        for m in self.metrics:
            need = "no size: its margin equals its drift" if m.needed is None else f"{m.needed:,}"
            out.append(f"  {m.metric:<22} margin {m.margin:g}, drift {m.drift:g}, difference sd {m.spread:.3f}: "
                       f"{need}")
        total = self.needed
        line = f"recommended: {total:,} scenarios" if total is not None else "recommended: none (see above)"
        if total is not None and available is not None and total > available:
            line += f" - more than the {available:,} selectable: widen a margin, or run --repeat to steady each score"
        return out + [line]


def scenarios_for(spread: float, margin: float, drift: float, *, alpha_red: float, confidence: float,
                  power_red: float = POWER_RED, power_green: float = POWER_GREEN) -> tuple[int | None, int | None]:
    """The scenarios for the red power and for the green power of one paired difference (None: margin <= drift)."""
    gap = margin - drift
    if gap <= 0:
        return None, None
    z = NormalDist().inv_cdf
    red = ((z(1.0 - alpha_red) + z(power_red)) * spread / gap) ** 2
    green = ((z(0.5 + confidence / 2.0) + z(power_green)) * spread / gap) ** 2
    return max(2, math.ceil(red)), max(2, math.ceil(green))


def gated_tests(rules: AggregateGates, groups: int = 3) -> int:
    """The size of a run's Holm family with ``--baseline``: its gates and each headline metric's gated groups."""
    return len(rules.gates) + len(HEADLINE) * groups


def plan(rules: AggregateGates, *, base_rows: Iterable | None = None, margin: float | None = None,
         spread: Mapping[str, float] | None = None) -> Plan:
    """The plan for ``rules``' margins and drifts (``margin``: one stated for every metric). The spreads: ``spread``
    given, else measured from ``base_rows`` (one run's scores), else the paper's."""
    tests = gated_tests(rules)
    alpha = (1.0 - rules.confidence) / tests
    rows = list(base_rows) if base_rows is not None else []
    basis = "given" if spread else f"sqrt(2) x the spread of {len(rows)} scenario(s)' scores" if rows else \
        "sqrt(2) x the paper's assistants' score spread"
    metrics = []
    for metric in HEADLINE:
        tolerated = rules.margin[metric] if margin is None else margin
        drift = min(tolerated, rules.drift[metric])
        if spread:
            sd = spread[metric]
        else:
            values = list(scenario_values(rows, metric).values()) if rows else []
            sd = math.sqrt(2) * (pstdev(values) if len(values) > 1 else PAPER_SPREAD[metric])
        sd = max(sd, 1e-6)
        red, green = scenarios_for(sd, tolerated, drift, alpha_red=alpha, confidence=rules.confidence)
        metrics.append(MetricPlan(metric, tolerated, drift, sd, red, green))
    return Plan(metrics, tests, basis)
