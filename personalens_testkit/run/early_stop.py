"""``--stop-when-decided``: the cases in a stratified random order, and the run stops starting cases once its
verdict is decided (gating/sequential.py: a confidence sequence per gated test, valid at every look).

**The order.** Cases are grouped by task kind and, for single-domain tasks, by domain; each group is shuffled
with the seed (``--order-seed``, printed in the header), and the groups are interleaved in proportion (the j-th
of a group of n sits at (j + u) / n of the run, u drawn with the seed), so every prefix of the run covers the
groups as the whole selection does. A scenario's tries stay together.

**The tests.** The enforced aggregate gates (``each_domain`` expanded to the selection's domains) and, with
``--baseline``, the gated differences (each headline metric overall, single- and multi-domain) against
``-margin`` (the stated ``--baseline-margin``; the judge's measured drift is known only at the end, so a
run that stops early tolerates no drift it has not been told of). Each is decided by the scenarios whose every
try has arrived.

**The stop.** When one test is red, or every test is green, the controller raises the run's stop signal: no
process starts another case, the cases under way finish and keep their rows, and the cases never started are
reported as not needed (never as passed). The verdict is the run's own, on the rows it has; the decision that
stopped it is one of the verdict's checks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..data.models import Scenario
from ..gating.aggregate import scenario_values
from ..gating.compare import GATED_GROUPS, REQUIRED_GROUPS
from ..gating.sequential import ConfidenceSequence, SequentialTest, run_decision
from ..gating.thresholds import AggregateGates
from ..results.rows import ResultRow
from ..scales import HEADLINE, METRIC_BY_NAME
from .stop import Decision


def stratum(scenario: Scenario) -> str:
    return f"sd:{scenario.domains[0]}" if scenario.kind.value == "sd" and scenario.domains else scenario.kind.value


def stratified_order(scenarios: Sequence[Scenario], seed: int) -> dict[str, float]:
    """Each scenario's place in the run (sort by it): groups shuffled and interleaved in proportion."""
    rng = random.Random(seed)
    groups: dict[str, list[Scenario]] = {}
    for scenario in sorted(scenarios, key=lambda s: s.scenario_id):
        groups.setdefault(stratum(scenario), []).append(scenario)
    place: dict[str, float] = {}
    for name in sorted(groups):
        members = groups[name]
        rng.shuffle(members)
        for j, scenario in enumerate(members):
            place[scenario.scenario_id] = (j + rng.random()) / len(members)
    return place


def order_key(cases: Sequence[tuple[Scenario, int]], seed: int,
              case_of: Callable[[Any], tuple[Scenario, int] | None]) -> Callable[[Any], tuple[int, float, int]]:
    """A sort key for pytest's items: the cases in the stratified order (a scenario's tries together), any other
    item after them in its own order."""
    place = stratified_order(list({scenario.scenario_id: scenario for scenario, _ in cases}.values()), seed)

    def key(item: Any) -> tuple[int, float, int]:
        case = case_of(item)
        return (0, place[case[0].scenario_id], case[1]) if case else (1, 0.0, 0)

    return key


def _groups_of(row: ResultRow) -> list[str]:
    groups = ["overall", row.task_kind]
    if row.task_kind == "sd" and row.domains:
        groups.append(f"domain:{row.domains[0]}")
    return groups


@dataclass
class _Test:
    test: SequentialTest
    metric: str
    group: str
    #: the base's value per scenario (a difference from the baseline); None: the metric's own value (a gate)
    base: Mapping[str, float] | None = None


def _bounds(metric: str) -> tuple[float, float]:
    scale = METRIC_BY_NAME[metric]
    return (0.0, 1.0) if scale.kind == "bool" else (float(scale.low), float(scale.high))


@dataclass
class EarlyStop:
    tests: list[_Test]
    repeat: int = 1
    #: how an unreadable completion verdict counts (``--completion-counting``)
    counting: str = "ours"
    #: rows of scenarios whose tries have not all arrived
    _pending: dict[str, list[ResultRow]] = field(default_factory=dict)
    scenarios: int = 0
    decided: str | None = None
    #: the verdict it decided (set with ``decided``)
    decision: Decision = None

    @classmethod
    def build(cls, rules: AggregateGates, domains: Sequence[str], *, enforced: bool, repeat: int,
              base_rows: Sequence[ResultRow] | None, margin: float | None, counting: str = "ours") -> EarlyStop:
        """``margin``: the one stated for every metric (``--baseline-margin``); None: thresholds.yaml's per metric;
        ``counting``: how an unreadable completion verdict counts (``--completion-counting``), as the report's."""
        specs: list[tuple[str, str, str, float, float, Mapping[str, float] | None, tuple[float, float]]] = []
        for gate in rules.gates if enforced else ():
            scopes = [f"domain:{d}" for d in domains] if gate.scope == "each_domain" else [gate.scope]
            green = gate.min - rules.margin[gate.metric] if gate.statistic == "mean" else gate.min
            for scope in scopes:
                specs.append((f"gate {gate.metric} {scope} >= {green:g}", gate.metric, scope, green,
                              gate.min - rules.drift[gate.metric], None, _bounds(gate.metric)))
        if base_rows is not None:
            kinds = {row.scenario_id: row.task_kind for row in base_rows}
            for metric in HEADLINE:
                low, high = _bounds(metric)
                base = scenario_values(base_rows, metric, counting=counting)
                tolerated = rules.margin[metric] if margin is None else margin
                drift = min(tolerated, rules.drift[metric])
                for group in GATED_GROUPS:
                    if group == "overall" or group in kinds.values():
                        specs.append((f"baseline {metric} {group} >= -{tolerated:g}", metric, group, -tolerated,
                                      -drift, base, (low - high, high - low)))
        alpha = (1.0 - rules.confidence) / max(1, len(specs))
        tests = [_Test(SequentialTest(name, bar, ConfidenceSequence(alpha, low, high), red_bar=red,
                                      required=base is None or group in REQUIRED_GROUPS), metric, group, base)
                 for name, metric, group, bar, red, base, (low, high) in specs]
        return cls(tests=tests, repeat=repeat, counting=counting)

    def observe(self, row: ResultRow) -> str | None:
        """Take one case's row; the reason to stop starting cases, once the verdict is decided."""
        if self.decided is not None or not self.tests:
            return None
        tries = self._pending.setdefault(row.scenario_id, [])
        tries.append(row)
        if len(tries) < self.repeat:
            return None
        del self._pending[row.scenario_id]
        self.scenarios += 1
        groups = _groups_of(row)
        for entry in self.tests:
            if entry.group not in groups:
                continue
            value = scenario_values(tries, entry.metric, counting=self.counting).get(row.scenario_id)
            if value is None:
                continue
            if entry.base is not None:
                if row.scenario_id not in entry.base:
                    continue
                value -= entry.base[row.scenario_id]
            entry.test.add(value)
        decision = run_decision([entry.test for entry in self.tests])
        if decision == "undecided":
            return None
        deciding = next((e.test for e in self.tests if e.test.decision == "red"), None) if decision == "red" else None
        self.decision = decision
        self.decided = (f"decided {decision} after {self.scenarios} scenario(s): "
                        + (deciding.describe() if deciding else "every gated test green that green needs: "
                           + "; ".join(e.test.describe() for e in self.tests if e.test.required)))
        return self.decided

    def summary(self) -> list[str]:
        return [entry.test.describe() for entry in self.tests]
