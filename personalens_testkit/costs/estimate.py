"""What a run will cost, before it starts: calls, tokens and US dollars per role, with a range, and no model
called (``personalens estimate``, and a live run's header).

Each case is counted one of two ways:

- **measured**: the recording of this suite holds the case (its recorded results keep each role's calls and
  tokens): the run repeats them. A bot whose replies changed talks for longer or shorter; the range of a
  ``new_episodes`` run says so.
- **shaped**: no recording of it: the protocol's shape (:mod:`.shape`) for a sample of the selection's
  scenarios of each kind - short, typical and long dialogues - scaled to the cases of that kind.

Which calls are live follows the record mode: ``none`` replays (nothing is spent; ``--rejudge`` spends the
judge's calls), ``once`` spends on the cases without a cassette, ``all`` on every case, ``new_episodes`` on
anything from nothing (the bot unchanged) to every case (every reply changed). Money is the price table's
(:mod:`.prices`); a role whose model has no price, or a bot under test (its own calls are its business), is
"cost unknown" - never a guess.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from pydantic import BaseModel

from ..assistants.base import ContextSwitches
from ..callsite import JUDGING_ROLES, OPTIONAL_ROLES, ROLES
from ..data.loader import Dataset
from ..data.models import Scenario, case_id
from ..results.rows import ResultRow
from .prices import BATCH_SHARE, PriceTable, batch_price
from .spend import call_cost, format_cost

#: scenarios of each kind (single-, multi-domain) whose shape is worked out; the rest take their kind's mean
SAMPLE_PER_KIND = 24
SEED = 23

Range = tuple[float, float, float]

#: the preflight's one call per model: its message (characters / 4) and the request around it
PING_TOKENS = 40


class RoleEstimate(BaseModel):
    role: str
    model: Optional[str]
    #: low, point, high
    calls: Range
    prompt_tokens: Range
    completion_tokens: Range
    cost: Optional[Range]
    #: why there is no cost (no price for the model, a bot's own calls)
    unknown: str = ""


class RunEstimate(BaseModel):
    cases: int
    #: the cases whose calls this record mode makes live (low and high)
    live_cases: tuple[int, int]
    #: cases counted from the recording's measured tokens; the rest from the protocol's shape
    measured: int
    roles: list[RoleEstimate]
    #: None when a role with live calls has no cost
    total_cost: Optional[Range]
    #: the sum of the roles whose cost is known
    known_cost: Range
    basis: list[str]


@dataclass
class Options:
    """What decides a case's calls: the run's settings as the estimate needs them."""

    record_mode: str = "none"
    rejudge: bool = False
    bot: bool = False
    max_turns: Optional[int] = None
    turn_level: bool = False
    turn_method: str = "chain"
    leak_check: bool = False
    review_user: bool = False
    retest_share: float = 0.0
    #: the judging roles' calls answered by the provider's batch engine (``--judge-batch``): at its price
    judge_batch: bool = False
    context: ContextSwitches = field(default_factory=ContextSwitches)
    variant: str = "claude"
    #: each role's model spec (the assistant's None for a bot)
    models: Mapping[str, Optional[str]] = field(default_factory=dict)


def _zero() -> list[list[float]]:
    """[low, point, high] x [calls, prompt, completion, cache read, cache write]."""
    return [[0.0] * 5 for _ in range(3)]


def shape_by_kind(dataset: Dataset, scenarios: Sequence[Scenario], options: Options) -> dict[str, dict[str, list[list[float]]]]:
    """Per task kind and role: the mean [calls, prompt, completion, 0, 0] of a scenario at each length."""
    from .shape import LENGTHS, calls_of  # the real agents and prompts: loaded only when a shape is worked out

    by_kind: dict[str, list[Scenario]] = defaultdict(list)
    for scenario in scenarios:
        by_kind[scenario.kind.value].append(scenario)
    found: dict[str, dict[str, list[list[float]]]] = {}
    for kind, members in by_kind.items():
        sample = random.Random(SEED).sample(members, min(SAMPLE_PER_KIND, len(members)))
        means: dict[str, list[list[float]]] = defaultdict(_zero)
        for scenario in sample:
            for i, length in enumerate(LENGTHS):
                for role, (calls, prompt, completion) in calls_of(
                        dataset, scenario, length, bot=options.bot, max_turns=options.max_turns,
                        turn_level=options.turn_level, turn_method=options.turn_method, leak_check=options.leak_check,
                        review_user=options.review_user,
                        retest_share=options.retest_share, context=options.context, variant=options.variant).items():
                    entry = means[role][i]
                    for j, value in enumerate((calls, prompt, completion)):
                        entry[j] += value / len(sample)
        found[kind] = dict(means)
    return found


def estimate(dataset: Dataset, cases: Sequence[tuple[Scenario, int]], options: Options, prices: PriceTable, *,
             recorded: Mapping[str, ResultRow] | None = None, has_cassette: Any = None) -> RunEstimate:
    """``recorded``: the recording's rows by case id; ``has_cassette(case id)``: whether a cassette holds the case."""
    recorded = recorded or {}
    has_cassette = has_cassette or (lambda _case: False)
    totals: dict[str, list[list[float]]] = {role: _zero() for role in ROLES}
    unmeasured: list[tuple[Scenario, int]] = []
    measured = 0
    live_low = live_high = 0
    live_cases: list[tuple[Scenario, int, bool, bool]] = []  # scenario, try, live at low, live at high
    for scenario, repeat in cases:
        low, high = _live(options, has_cassette(case_id(scenario.scenario_id, repeat)))
        live_low += low
        live_high += high
        live_cases.append((scenario, repeat, low, high))
    shapes: dict[str, dict[str, list[list[float]]]] | None = None
    for scenario, repeat, low, high in live_cases:
        if not (low or high):
            continue
        row = recorded.get(case_id(scenario.scenario_id, repeat)) or recorded.get(scenario.scenario_id)
        usage = row.usage_by_role() if row is not None else {}
        if usage:
            measured += 1
            per = {role: [[float(v) for v in figures.figures()]] * 3 for role, figures in usage.items()}
        else:
            if shapes is None:
                shapes = shape_by_kind(dataset, [sc for sc, *_ in live_cases], options)
            per = shapes[scenario.kind.value]
            unmeasured.append((scenario, repeat))
        for role, levels in per.items():
            if options.rejudge and options.record_mode == "none" and role not in JUDGING_ROLES:
                continue  # a rejudged replay: only the judge (and the review) is called
            for i, (level, live) in enumerate(zip(levels, (low, True if low or high else False, high))):
                if live:
                    for j, value in enumerate(level):
                        totals.setdefault(role, _zero())[i][j] += value
    if live_high:  # the preflight: one minimal call to each model a live case calls (billed; in the run's cost)
        for role, spec in options.models.items():
            if spec and totals.get(role, _zero())[2][0] > 0:
                for i, live in enumerate((live_low > 0, True, True)):
                    if live:
                        level = totals[role][i]
                        level[0], level[1], level[2] = level[0] + 1, level[1] + PING_TOKENS, level[2] + 1
    roles = [_role(role, totals.get(role, _zero()), options, prices) for role in ROLES  # an optional role: if it calls
             if role not in OPTIONAL_ROLES or options.models.get(role) or totals.get(role, _zero())[2][0] > 0]
    known = tuple(sum((r.cost or (0.0, 0.0, 0.0))[i] for r in roles) for i in range(3))
    # a bot's own calls are its business: never counted, so never what makes the total unknown
    unknown = any(r.cost is None and r.calls[2] > 0 for r in roles if not (r.role == "assistant" and options.bot))
    basis = _basis(len(cases), measured, len(unmeasured), options, live_low, live_high, charged=unknown or known[2] > 0)
    return RunEstimate(cases=len(cases), live_cases=(live_low, live_high), measured=measured, roles=roles,
                       total_cost=None if unknown else known, known_cost=known, basis=basis)  # type: ignore[arg-type]


def _live(options: Options, recorded: bool) -> tuple[bool, bool]:
    """Whether a case's calls are live (at the low and at the high end) under the record mode."""
    mode = options.record_mode
    if mode == "all":
        return True, True
    if mode == "once":
        return not recorded, not recorded
    if mode == "new_episodes":
        return not recorded, True
    return (recorded and options.rejudge), (recorded and options.rejudge)  # none: a replay (run only if recorded)


def _role(role: str, levels: list[list[float]], options: Options, prices: PriceTable) -> RoleEstimate:
    spec = options.models.get(role)
    calls = tuple(round(levels[i][0]) for i in range(3))
    prompt = tuple(round(levels[i][1]) for i in range(3))
    completion = tuple(round(levels[i][2]) for i in range(3))
    cost: Range | None = None
    unknown = ""
    if role == "assistant" and options.bot:
        unknown = "the bot under test: its own model calls are its business, not counted"
    elif spec is None:
        unknown = "no model"
    else:
        price = prices.lookup(spec)
        if price is not None and options.judge_batch and role in JUDGING_ROLES:
            price = batch_price(price)
        if price is None:
            unknown = f'no price for {spec} (add [tool.personalens.prices."{spec.split(":", 1)[-1]}"])'
        else:
            cost = tuple(call_cost(price, spec, prompt_tokens=levels[i][1], completion_tokens=levels[i][2],
                                   cache_read_tokens=levels[i][3], cache_write_tokens=levels[i][4])
                         for i in range(3))  # type: ignore[assignment]
    if not calls[2]:
        cost, unknown = (0.0, 0.0, 0.0), ""
    return RoleEstimate(role=role, model=spec, calls=calls, prompt_tokens=prompt, completion_tokens=completion,  # type: ignore[arg-type]
                        cost=cost, unknown=unknown)


def _basis(cases: int, measured: int, shaped: int, options: Options, low: int, high: int, *, charged: bool
           ) -> list[str]:
    lines = [f"{cases} case(s); record mode {options.record_mode}: "
             + (f"{low} live" if low == high else f"{low} to {high} live")]
    if measured:
        lines.append(f"{measured} live case(s) from the recording's measured tokens")
    if options.judge_batch:
        lines.append(f"the judge's calls on the provider's batch engine, at {BATCH_SHARE:.0%} of the on-demand price")
    if shaped:
        lines.append(f"{shaped} live case(s) from the protocol's shape (low: one turn, short messages; point: 88 % of the "
                     "turn limit; high: the turn limit, long messages; tokens = characters / 4)")
    if charged:
        lines.append("prompt caching, where a provider applies it, lowers the live cost")
    elif high:
        lines.append("every live model is priced at $0 (the embedded model runs on this machine: it costs time, "
                     "not money)")
    return lines


def format_estimate(result: RunEstimate) -> list[str]:
    """The estimate as the terminal shows it."""
    def span(values: Sequence[float], money: bool = False) -> str:
        show = format_cost if money else (lambda v: f"{round(v):,}")
        low, point, high = values
        return show(point) if low == high else f"{show(point)} ({show(low)} - {show(high)})"

    lines = [f"estimate: {line}" for line in result.basis]
    for role in result.roles:
        cost = span(role.cost, money=True) if role.cost is not None else f"cost unknown: {role.unknown}"
        lines.append(f"  {role.role.replace('_', ' '):<11} {span(role.calls)} calls, {span(role.prompt_tokens)} prompt + "
                     f"{span(role.completion_tokens)} completion tokens: {cost}")
    total = (span(result.total_cost, money=True) if result.total_cost is not None
             else f"cost unknown (known part: {span(result.known_cost, money=True)})")
    lines.append(f"  total       {total}")
    return lines
