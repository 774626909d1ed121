"""--max-cost's ledger (issue 44, item 5): every process reserves a case's expected spend before it starts and settles
its actual cost when it ends, under one lock - so no process starts a case the budget cannot pay for, however many
threads and workers start cases at once, and the spend is counted when cases run, not when pytest reaches their rows."""

from __future__ import annotations

import fcntl
import multiprocessing
import queue as queue_module
import random
from pathlib import Path
from types import SimpleNamespace

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
    assert budget.read().spent == pytest.approx(spent, abs=1e-12) and spent <= 1.0 + lanes * 0.4 + 1e-9


def test_a_line_a_full_disk_cut_short_is_mended_and_the_rest_still_counts(tmp_path):
    """A reservation cut short without its line's end (a full disk) must not swallow the next line: the ledger mends
    it before appending, and a process that read it half-written reads the rest once it is whole."""
    path = tmp_path / ".budget"
    budget = _budget(path, 1.0)
    assert budget.reserve("c0") is None
    with open(path, "ab") as handle:
        handle.write(b"S\tc0\t")  # cut short before its cost, and its line's end
    assert budget.settle("c1", _calls(0.25)) == 0.25
    fresh = _budget(path, 1.0)
    ledger = fresh.read()
    assert ledger.spent == 0.25 and ledger.open == 1  # c0's cut line: not a settlement; c1's whole one counts
    budget.settle("c0", _calls(0.5))
    assert fresh.read().spent == 0.75 and budget.read().spent == 0.75  # each process reads on from where it was


def test_a_case_id_with_any_line_break_is_one_ledger_line(tmp_path):
    budget = _budget(tmp_path / ".budget", 1.0)
    for name in ("a\tb", "c\rd", "e\u2028f", "g\x0bh\ni"):
        assert budget.reserve(name) is None
        budget.settle(name, _calls(0.01))
    ledger = budget.read()
    assert ledger.open == 0 and ledger.spending == 4 and ledger.spent == pytest.approx(0.04)


class _Runner:
    """A case runner whose budget refuses a case that a thread starts ahead at that very moment (the race)."""

    def __init__(self) -> None:
        self.ahead: set[str] = set()

    def started(self, nodeid: str) -> bool:
        return nodeid in self.ahead

    def reserve(self, scenario: object, repeat: int) -> str:
        self.ahead.add("case")  # started ahead between the hook's look and its reservation
        return "the budget: another case would likely pass it"

    def waiting_ahead(self) -> bool:
        return True


def test_a_case_started_ahead_while_its_turn_was_refused_still_runs_to_its_row():
    """The protocol hook asks whether the case was started ahead, then reserves it; a thread may start it in between
    and spend. The hook must then let it run to its row (rows == cases run), not skip it as not run."""
    from personalens_testkit.data.loader import open_dataset
    from personalens_testkit.data.selection import Selection, select_scenarios
    from personalens_testkit.plugin.cases import STATE, pytest_runtest_protocol

    scenario = select_scenarios(open_dataset(None), Selection(profiles=(7,)))[0]
    run = SimpleNamespace(stop_signal=SimpleNamespace(reason=lambda: None), runner=_Runner())
    stash = pytest.Stash()
    stash[STATE] = run  # type: ignore[assignment]
    item = SimpleNamespace(config=SimpleNamespace(stash=stash), nodeid="case", get_closest_marker=lambda name: True,
                           callspec=SimpleNamespace(params={"scenario": scenario, "personalens_repeat": 1}),
                           session=SimpleNamespace(shouldstop=False))
    assert pytest_runtest_protocol(item, None) is None  # run: its evaluation is under way
    run.runner.reserve = lambda scenario, repeat: "the budget: refused"  # refused, not started ahead: not run
    item.nodeid = "another"
    assert pytest_runtest_protocol(item, None) is True
