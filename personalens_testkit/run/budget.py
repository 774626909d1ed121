"""``--max-cost``: a run never starts a case its budget cannot pay for.

Every process that starts cases - pytest's own loop, the threads that evaluate ahead (``--concurrency``), each
xdist worker - shares one ledger, a file in the run folder, under an exclusive lock (``fcntl.flock``). Before a
case starts, its process **reserves** it: the spend of the cases that ended, plus every case still under way
at its expected spend, plus this one, must stay within the budget. When a case ends, its process **settles** it
with what its live calls cost (the price table; replayed calls cost nothing now). A case's expected spend is the
mean of the settled cases that spent (before any, the estimate's point per live case).

So the spend is counted when cases start and end, wherever they run, not when pytest reaches their rows (a case
evaluated ahead has spent long before): the run spends at most the budget plus what the cases under way spend
beyond their expected share. When a case may not start, the run's stop signal is raised: no process starts
another case (cases already under way finish and keep their rows), the cases not started are reported as not
run because of the budget - never passed - and ``--resume`` continues the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from ..costs.prices import PriceTable
from ..costs.spend import call_cost, format_cost

if TYPE_CHECKING:
    from ..costs.estimate import RunEstimate
    from ..settings import RunSettings


@dataclass(frozen=True)
class Ledger:
    """What the ledger holds: the settled spend, the cases that spent, and the cases reserved and not settled."""

    spent: float
    spending: int
    open: int
    expected: float | None
    #: the settled cases' part of ``spent`` (the rest: calls outside any case, the preflight's)
    in_cases: float = 0.0

    def per_case(self, fallback: float) -> float:
        return self.in_cases / self.spending if self.spending else (self.expected if self.expected is not None
                                                                    else fallback)


@dataclass
class Budget:
    limit: float
    prices: PriceTable
    #: each role's priced spec (the assistant's None for a bot: its own cost is not counted)
    specs: Mapping[str, str | None]
    #: the ledger file every process of the run shares
    path: Path
    #: a case's expected spend before any case settled (the estimate's point per live case), worked out once, by
    #: the first process to reserve, and kept in the ledger for the others
    expected: Callable[[], float] = field(default=lambda: 0.0)
    tripped: str | None = field(default=None)
    _tally: _Tally = field(default_factory=lambda: _Tally(), repr=False)

    def cost_of(self, calls: Iterable[Any]) -> float:
        """What these calls (a row's call dicts, or a call log's records) cost live: a replayed call, a role without a
        price, or a call without token counts costs 0 (a budget run refuses to start with an unpriced role)."""
        total = 0.0
        for call in calls:
            call = call.as_dict() if hasattr(call, "as_dict") else call
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

    def reserve(self, case: str, *, trips: bool = True) -> str | None:
        """Before ``case`` starts: reserve its expected spend; the reason it may not start when the spend, the cases
        under way and this one would pass the budget. ``trips``: a refusal stops the run (a case's does; a second
        dialogue's, ``--rerun-user-faults``, is only not run)."""
        if self.tripped is not None:
            return self.tripped
        with self._locked() as handle:
            ledger = self._tally.read(handle)
            expected = ledger.expected
            if expected is None:
                expected = max(0.0, float(self.expected()))
                _append(handle, f"E\t{expected!r}")
            per_case = ledger.per_case(expected)
            if ledger.spent + (ledger.open + 1) * per_case > self.limit * (1 + 1e-9):
                why = (f"the budget: spent {format_cost(ledger.spent)} of --max-cost {format_cost(self.limit)}, "
                       f"{ledger.open} case(s) under way; another case would likely pass it ({format_cost(per_case)} "
                       "a case)")
                if not trips:
                    return why
                self.tripped = why + "; the cases not started are not run because of the budget"
                return self.tripped
            _append(handle, f"R\t{_key(case)}")
        return None

    def settle(self, case: str, calls: Iterable[Any]) -> float:
        """When ``case`` ends: its live calls' cost replaces its reservation; returns the cost."""
        cost = self.cost_of(calls)
        with self._locked() as handle:
            _append(handle, f"S\t{_key(case)}\t{cost!r}")
        return cost

    def spend_outside(self, calls: Iterable[Any]) -> float:
        """Calls outside a case's reservation (the preflight's, a live floor miss's new judgements): in the spend, not
        in a case's mean; returns the cost."""
        cost = self.cost_of(calls)
        with self._locked() as handle:
            _append(handle, f"X\t{cost!r}")
        return cost

    def read(self) -> Ledger:
        with self._locked() as handle:
            return self._tally.read(handle)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Any]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class _Tally:
    """A process's running reading of the ledger: only what other processes appended since its last look is read
    (a reservation reads a few lines, not the whole run's)."""

    offset: int = 0
    reserved: set[str] = field(default_factory=set)
    settled: dict[str, float] = field(default_factory=dict)
    outside: float = 0.0
    expected: float | None = None

    def read(self, handle: Any) -> Ledger:
        handle.seek(self.offset)
        data = handle.read()
        end = data.rfind(b"\n") + 1  # a last line without its end (cut short by a full disk) is read once mended
        for line in data[:end].decode("utf-8", "replace").split("\n"):
            self._take(line)
        self.offset += end
        in_cases = math.fsum(self.settled.values())
        return Ledger(in_cases + self.outside, sum(1 for cost in self.settled.values() if cost > 0),
                      len(self.reserved - self.settled.keys()), self.expected, in_cases)

    def _take(self, line: str) -> None:
        kind, _, rest = line.partition("\t")
        try:
            if kind == "R":
                self.reserved.add(rest)
            elif kind == "S":
                case, _, cost = rest.rpartition("\t")
                self.settled[case] = self.settled.get(case, 0.0) + _finite(cost)
            elif kind == "E":
                self.expected = _finite(rest)
            elif kind == "X":
                self.outside += _finite(rest)
        except ValueError:
            pass  # a line a full disk cut short: the rest still counts


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value


def _append(handle: Any, line: str) -> None:
    """One line at the ledger's end, after mending a last line a full disk left without its end."""
    handle.seek(0, os.SEEK_END)
    if handle.tell():
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.write(b"\n")
    handle.write(line.encode("utf-8") + b"\n")


def _key(case: str) -> str:
    return " ".join(case.split())  # one line, one field: no tab or line break of any kind


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def run_budget(settings: RunSettings, run_dir: Path, *, bot: bool, estimate: Callable[[], RunEstimate]) -> Budget:
    """A run's budget (--max-cost): its ledger in the run folder, shared by every process; a case's expected spend
    from the run's estimate, worked out by the first process that reserves a case."""
    from ..costs.prices import load_prices

    def expected() -> float:
        figures = estimate()
        return figures.known_cost[1] / max(1, figures.live_cases[1])

    specs = {role: (None if role == "assistant" and bot else model.spec) for role, model in settings.role_models.items()}
    return Budget(limit=float(settings.max_cost or 0), prices=load_prices(settings.prices), specs=specs,
                  path=run_dir / ".budget", expected=expected)
