"""What a run's model calls cost, per role (user agent, assistant, judge) and in total, from the calls
its result rows log.

A call is priced by its role's model (the row's spec) and its own token counts, in the provider's
meaning of them:

- **OpenAI-compatible** servers (``openai:``, ``local``) count cached tokens *inside* ``prompt_tokens``
  (``prompt_tokens_details.cached_tokens`` says how many): the uncached part at ``input``, the cached
  part at ``cached_input``; nothing is charged for writing the cache;
- **Bedrock** Converse counts them *apart*: ``inputTokens`` excludes ``cacheReadInputTokens`` and
  ``cacheWriteInputTokens``, so each count is priced whole, reads at ``cached_input`` and writes at
  ``cache_write`` (``input`` where the table has none).

Live calls are what the run spent; replayed ones (answered by a cassette) cost nothing now and are
shown apart, as what they would have cost live. A number is either whole or None: a role whose model
has no price, or one of whose live calls came without token counts, has no ``spent`` (``known_spent``
keeps the part that is known, a lower bound), and then neither has the run's total. A failed attempt
that was retried is not in the log: the tokens counted are those of the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from pydantic import BaseModel

from ..callsite import OPTIONAL_ROLES, ROLES
# call_cost and format_cost live beside the prices (the estimate uses them too); they are named here as well
from .prices import Price, PriceTable, call_cost, config_key, format_cost, provider_counts_cached_in_prompt, reported_spec

__all__ = ["CostLedger", "RoleCost", "call_cost", "cost_ledger", "format_cost", "provider_counts_cached_in_prompt"]

BOT = "the bot under test reports no model; its own cost is not counted"


class RoleCost(BaseModel):
    """What one role's calls cost; ``reason`` says why a number is None (empty when none is)."""

    #: the role's model as its spec (several, comma-separated, when the rows disagree; None: a bot's)
    model: Optional[str] = None
    #: whether the table prices every model the role ran on
    priced: bool = False
    #: what the live calls cost (None: not known whole)
    spent: Optional[float] = None
    #: what the live calls that could be priced cost: ``spent`` when it is known, else a lower bound
    known_spent: float = 0.0
    #: what the replayed calls would have cost live (None: not known whole)
    replayed_value: Optional[float] = None
    live_calls: int = 0
    replayed_calls: int = 0
    #: live calls without token counts
    unpriced_calls: int = 0
    price_read_on: Optional[str] = None
    reason: str = ""


class CostLedger(BaseModel):
    """What a run's calls cost, per role and in total (US dollars)."""

    roles: dict[str, RoleCost]
    #: what the live calls cost (None: some role's is not known)
    total_spent: Optional[float] = None
    #: the sum of the parts that are known (a lower bound of the total when that is None)
    known_spent: float = 0.0
    total_replayed_value: Optional[float] = None
    currency: str = "USD"


#: a spec's price (None: none), and whether that price is free
Priced = tuple[Optional[Price], bool]
_UNPRICED: Priced = (None, False)


@dataclass
class _Tally:
    """One role's calls as they are read: the sums that are known, and what keeps the rest unknown."""

    specs: dict[Optional[str], None] = field(default_factory=dict)
    read_on: dict[str, None] = field(default_factory=dict)
    no_price: dict[str, None] = field(default_factory=dict)
    #: by live (True) and replayed (False): calls, their known cost, calls without a price, without counts
    calls: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    known: dict[bool, float] = field(default_factory=lambda: {True: 0.0, False: 0.0})
    unpriced: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    uncounted: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    #: calls of rows that name no model for the role (a bot's)
    nameless: int = 0

    def note(self, spec: Optional[str], prices: PriceTable) -> None:
        """A model the role ran on, and the date of its price."""
        if spec not in self.specs:
            self.specs[spec] = None
            price = prices.lookup(spec) if spec else None
            if price is not None:
                self.read_on[price.read_on] = None

    def add(self, call: Any, spec: Optional[str], priced: Priced) -> None:
        live = not call.replayed
        self.calls[live] += 1
        price, free = priced
        if spec is None or price is None:
            self.unpriced[live] += 1
            if spec is None:
                self.nameless += 1
            else:
                self.no_price[spec] = None
            return
        if free:
            return
        if call.prompt_tokens is None or call.completion_tokens is None:
            self.uncounted[live] += 1
            return
        self.known[live] += call_cost(price, spec, prompt_tokens=call.prompt_tokens,
                                      completion_tokens=call.completion_tokens, cache_read_tokens=call.cache_read_tokens,
                                      cache_write_tokens=call.cache_write_tokens)

    def whole(self, live: bool) -> Optional[float]:
        return self.known[live] if not (self.unpriced[live] or self.uncounted[live]) else None

    def reason(self, role: str) -> str:
        reasons = []
        if self.nameless:
            reasons.append(BOT if role == "assistant" else "the results name no model for this role")
        reasons += [f'no price for {spec} (add [tool.personalens.prices."{config_key(spec)}"])' for spec in self.no_price]
        for live, kind in ((True, "live"), (False, "replayed")):
            if self.uncounted[live]:
                reasons.append(f"{self.uncounted[live]} {kind} call(s) without token counts")
        return "; ".join(reasons)

    def result(self, role: str, prices: PriceTable) -> RoleCost:
        named = [spec for spec in self.specs if spec]
        return RoleCost(
            model=", ".join(named) or None,
            priced=bool(named) and None not in self.specs and all(spec in prices for spec in named),
            spent=self.whole(True), known_spent=self.known[True], replayed_value=self.whole(False),
            live_calls=self.calls[True], replayed_calls=self.calls[False], unpriced_calls=self.uncounted[True],
            price_read_on=", ".join(self.read_on) or None, reason=self.reason(role),
        )


class CostTally:
    """The cost of result rows' calls, added up one row at a time (nothing kept of the rows): each call priced by
    its own row's model for its role."""

    def __init__(self, prices: PriceTable) -> None:
        self.prices = prices
        self.tallies = {role: _Tally() for role in ROLES}
        self._priced: dict[Optional[str], Priced] = {None: _UNPRICED}

    def add(self, row: Any) -> None:
        prices, tallies = self.prices, self.tallies
        # a spec that is empty (an older row) names no model, as a bot's None does
        specs = {"user_agent": row.user_model or None, "assistant": row.assistant_model or None,
                 "judge": row.judge_model or None, "reviewer": row.reviewer_model or None}
        specs = {role: reported_spec(spec) if spec else None for role, spec in specs.items()}
        for role, spec in specs.items():
            tallies[role].note(spec, prices)
        for call in row.calls:
            if call.role not in specs:  # not a role of ours: counted under its own name, never priced
                tallies.setdefault(call.role, _Tally()).note(None, prices)
            spec = specs.get(call.role)
            tallies[call.role].add(call, spec, self._priced.get(spec) or self._price(spec))

    def _price(self, spec: str) -> Priced:
        """A spec's price and whether it is free: looked up once a spec."""
        price = self.prices.lookup(spec)
        found = self._priced[spec] = (price, price is not None and price.free)
        return found

    def result(self) -> CostLedger:
        roles = {role: tally.result(role, self.prices) for role, tally in self.tallies.items()
                 if role not in OPTIONAL_ROLES or tally.calls[True] + tally.calls[False]}
        spent = [cost.spent for cost in roles.values()]
        replayed = [cost.replayed_value for cost in roles.values()]
        return CostLedger(
            roles=roles, total_spent=None if None in spent else sum(spent),  # type: ignore[arg-type]
            known_spent=sum(cost.known_spent for cost in roles.values()),
            total_replayed_value=None if None in replayed else sum(replayed),  # type: ignore[arg-type]
        )


def cost_ledger(rows: Iterable[Any], prices: PriceTable) -> CostLedger:
    """The cost of the calls of result rows (:class:`~personalens_testkit.results.rows.ResultRow`): :class:`CostTally`."""
    tally = CostTally(prices)
    for row in rows:
        tally.add(row)
    return tally.result()
