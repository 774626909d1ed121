"""``--max-cost``: a run stops starting cases before its spend would pass the budget.

The controlling process prices each row's live calls as the row arrives (the price table; replayed calls cost
nothing now). After each row it asks whether one more case may start: the spend so far, plus the expected spend
of the cases still under way in the other lanes, plus the next case's, must stay within the budget. A case's
expected spend is the mean of the cases that spent so far (before any, the estimate's). When it may not, the
run's stop signal is raised: no process starts another case (cases already under way finish and keep their
rows), the cases not started are reported as not run because of the budget - never passed - and ``--resume``
continues the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..costs.prices import PriceTable
from ..costs.spend import call_cost, format_cost


@dataclass
class Budget:
    limit: float
    prices: PriceTable
    #: each role's priced spec (the assistant's None for a bot: its own cost is not counted)
    specs: Mapping[str, str | None]
    #: cases under way at once: xdist workers x --concurrency
    lanes: int
    #: a case's expected spend before any case has spent (the estimate's point per live case)
    expected_per_case: float
    spent: float = 0.0
    spending_cases: int = 0
    tripped: str | None = field(default=None)

    def row_cost(self, row: Mapping[str, Any]) -> float:
        """What a row's live calls cost (calls of a role without a price, or without token counts: 0 - a budget
        run refuses to start with an unpriced role, see :func:`unpriced_roles`)."""
        total = 0.0
        for call in row.get("calls") or ():
            if not isinstance(call, Mapping) or call.get("replayed"):
                continue
            spec = self.specs.get(str(call.get("role")))
            price = self.prices.lookup(spec) if spec else None
            if price is None:
                continue
            total += call_cost(price, spec, prompt_tokens=_count(call.get("prompt_tokens")),  # type: ignore[arg-type]
                               completion_tokens=_count(call.get("completion_tokens")),
                               cache_read_tokens=_count(call.get("cache_read_tokens")),
                               cache_write_tokens=_count(call.get("cache_write_tokens")))
        return total

    def observe(self, line: str) -> str | None:
        """Count one row (its JSON line); the reason to stop starting cases, or None."""
        try:
            row = json.loads(line)
        except ValueError:
            return None
        cost = self.row_cost(row) if isinstance(row, Mapping) else 0.0
        self.spent += cost
        self.spending_cases += cost > 0
        if self.tripped is not None:
            return None
        per_case = self.spent / self.spending_cases if self.spending_cases else self.expected_per_case
        if self.spent + self.lanes * per_case > self.limit:  # the lanes still busy, and the next case
            self.tripped = (f"the budget: spent {format_cost(self.spent)} of --max-cost {format_cost(self.limit)}; "
                            f"another case would likely pass it ({format_cost(per_case)} a case, {self.lanes} under "
                            "way at once); the cases not started are not run because of the budget")
            return self.tripped
        return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
