"""--max-cost's ledger (issue 44, item 5): every process reserves a case's expected spend before it starts and settles
its actual cost when it ends, under one lock - so no process starts a case the budget cannot pay for, however many
threads and workers start cases at once, and the spend is counted when cases run, not when pytest reaches their rows."""

from __future__ import annotations

import fcntl
import multiprocessing
import queue as queue_module
import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from personalens_testkit.agents.calls import CallRecord
from personalens_testkit.costs.prices import load_prices
from personalens_testkit.run.budget import Budget

PRICES = load_prices({"fake-judge": {"input": 1000.0, "output": 0.0}})  # $0.001 a prompt token
SPECS = {"judge": "openai:fake-judge"}


def _budget(path: Path, limit: float, expected: float = 0.1) -> Budget:
    return Budget(limit=limit, prices=PRICES, specs=SPECS, path=path, expected=lambda: expected)


def _calls(cost: float) -> list[CallRecord]:
    """Live judge calls that cost ``cost`` (whole thousandths), and a replayed one that costs nothing now."""
    return [CallRecord(role="judge", label="x", turn=0, seconds=0.0, prompt_tokens=round(cost * 1000),
                       completion_tokens=0),
            CallRecord(role="judge", label="x", turn=0, seconds=0.0, prompt_tokens=99_999, replayed=True)]


def _reserve_many(path: str, worker: int, tries: int, start: "multiprocessing.synchronize.Barrier",
                  queue: "multiprocessing.Queue[int]") -> None:
    budget = _budget(Path(path), 1.0, expected=0.01)
    start.wait()
    queue.put(sum(budget.reserve(f"w{worker}-case{i}") is None for i in range(tries)))


def test_processes_racing_for_the_budget_never_reserve_more_than_it_pays_for(tmp_path):
    """Eight processes start cases as fast as they can, all at once: the ledger admits exactly the hundred the
    budget pays for (without its lock, two processes read the same ledger and both start a case)."""
    path = str(tmp_path / ".budget")
    queue: multiprocessing.Queue[int] = multiprocessing.Queue()
    start = multiprocessing.Barrier(8)
    workers = [multiprocessing.Process(target=_reserve_many, args=(path, w, 40, start, queue)) for w in range(8)]
    for worker in workers:
        worker.start()
    admitted = sum(queue.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    assert admitted == 100
    assert _budget(Path(path), 1.0).read().open == 100


def _reserve_once(path: str, started: "multiprocessing.synchronize.Event", queue: "multiprocessing.Queue[str]") -> None:
    budget = _budget(Path(path), 1.0)
    started.set()
    queue.put(repr(budget.reserve("late")))


def test_a_reservation_waits_while_another_process_holds_the_ledger(tmp_path):
    """The read and the write of a reservation are one step: while another process holds the ledger's lock, a
    reservation does not happen (it would decide on a ledger about to change)."""
    path = tmp_path / ".budget"
    queue: multiprocessing.Queue[str] = multiprocessing.Queue()
    started = multiprocessing.Event()
    with open(path, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        child = multiprocessing.Process(target=_reserve_once, args=(str(path), started, queue))
        child.start()
        assert started.wait(timeout=60)
        with pytest.raises(queue_module.Empty):
            queue.get(timeout=0.5)  # held: the child's reservation cannot go through
        fcntl.flock(held, fcntl.LOCK_UN)
    assert queue.get(timeout=60) == "None"
    child.join(timeout=60)


def test_the_spend_is_what_the_cases_settle_and_a_settled_case_frees_its_reservation(tmp_path):
    budget = _budget(tmp_path / ".budget", 1.0, expected=0.3)
    assert [budget.reserve(f"c{i}") for i in range(3)] == [None, None, None]
    assert budget.reserve("c3") is not None and "another case would likely pass it ($0.30 a case)" in budget.tripped
    budget.tripped = None  # (a fresh process: the ledger alone decides)
    assert budget.settle("c0", _calls(0.05)) == 0.05
    ledger = budget.read()
    assert (ledger.spent, ledger.spending, ledger.open) == (0.05, 1, 2)
    # the mean of what the cases spent now prices a case: 0.05 + (2 + 1) x 0.05 is within the budget
    assert budget.reserve("c3") is None
    assert budget.spend_outside(_calls(0.2)) == 0.2  # the preflight: spent, never a case's mean
    assert budget.read().spent == 0.25 and budget.read().per_case(0.3) == 0.05


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=0.4), min_size=1, max_size=40), st.integers(1, 6),
       st.floats(min_value=0.05, max_value=0.5), st.integers(0, 2 ** 32 - 1))
def test_lanes_starting_and_ending_cases_in_any_order_spend_at_most_the_budget_plus_the_cases_under_way(
        tmp_path_factory, costs, lanes, expected, seed):
    """Cases of any costs, ``lanes`` under way at once, ending in any order: at every start, what was spent plus
    every case under way at the running mean stays within the budget; in the end the spend is the budget plus at most
    what the cases under way when it stopped spent beyond it."""
    rng = random.Random(seed)
    budget = _budget(tmp_path_factory.mktemp("ledger") / ".budget", 1.0, expected=expected)
    running: list[tuple[str, float]] = []
    pending = list(enumerate(costs))
    spent = 0.0
    while pending or running:
        if pending and len(running) < lanes:
            i, cost = pending.pop(0)
            if budget.reserve(f"case{i}") is None:
                ledger = budget.read()
                assert ledger.spent + ledger.open * ledger.per_case(expected) <= 1.0 + 1e-9
                running.append((f"case{i}", round(cost, 3)))
                continue
            pending.clear()  # the stop: no case starts after it
        if running:
            case, cost = running.pop(rng.randrange(len(running)))
            spent += budget.settle(case, _calls(cost))
    assert budget.read().spent == spent <= 1.0 + lanes * 0.4 + 1e-9
