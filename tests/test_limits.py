"""--max-concurrency across processes (llm/limits.py): never more calls in flight than slots, whatever the processes
and threads; a freed slot goes to the caller at the head of the queue, never to one that came later; the head is
woken by the release itself (no sleeping between tries); a killed holder frees its slot; a wait ends at its
deadline. Counts and deadlines only: no assert on how fast anything ran."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.llm import limits
from personalens_testkit.llm.limits import Limits, SharedLimiter, Slots, _open
from personalens_testkit.timebox import TimeLimit, deadline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = r'''
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from personalens_testkit.llm.limits import Limits, SharedLimiter
folder, slots, threads, calls = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
limiter = SharedLimiter(folder, "http://x", Limits(max_concurrency=slots))
marks, lock = [], threading.Lock()
def run():
    for _ in range(calls):
        with limiter.slot():
            with lock:
                marks.append((time.time_ns(), 1))
            time.sleep(0.002)
            with lock:
                marks.append((time.time_ns(), -1))
pool = [threading.Thread(target=run) for _ in range(threads)]
for t in pool: t.start()
for t in pool: t.join()
print(json.dumps(marks))
'''


@settings(max_examples=6, deadline=None)
@given(processes=st.integers(1, 3), threads=st.integers(1, 4), slots=st.integers(1, 3))
def test_never_more_calls_in_flight_than_slots_and_every_call_is_made(tmp_path_factory, processes, threads, slots):
    folder = tmp_path_factory.mktemp("limits")
    children = [subprocess.Popen([sys.executable, "-c", WORKER, ROOT, str(folder), str(slots), str(threads), "8"],
                                 stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    found = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    marks = sorted((at, step) for marks in found for at, step in marks)  # a leave before an enter at one instant
    now = most = 0
    for _, step in marks:
        now += step
        most = max(most, now)
    assert most <= slots and now == 0
    assert len(marks) == 2 * processes * threads * 8  # every call made, each entered and left once


def test_a_freed_slot_goes_to_the_queue_not_to_a_caller_that_came_later(tmp_path):
    """While a caller waits at the head of the queue, a newcomer does not take the slot that is free: it queues."""
    slots = Slots(tmp_path, 1)
    head = _open(tmp_path / "queue")
    fcntl.flock(head, fcntl.LOCK_EX)  # another process's caller, waiting at the head
    try:
        with deadline(0.3, "timeout_s"), pytest.raises(TimeLimit):
            slots.acquire()
    finally:
        fcntl.flock(head, fcntl.LOCK_UN)
        os.close(head)
    taken = slots.acquire()  # nobody queued: the free slot is taken at once
    slots.release(taken)
    slots.close()


def test_the_head_of_the_queue_is_woken_by_the_release_and_looks_no_more_than_that(tmp_path, monkeypatch):
    """The head waits on the bell, not on a clock: with the fallback re-scan put out of reach, it gets the slot
    when the holder frees it, having looked at the slots only as often as it was woken."""
    monkeypatch.setattr(limits, "RESCAN_S", 600.0)
    holder, waiter = SharedLimiter(tmp_path, "http://x", Limits(max_concurrency=1)), None
    waiter = SharedLimiter(tmp_path, "http://x", Limits(max_concurrency=1))
    looks, take = [], Slots._take

    def counted(self, files, *, queue_free):
        looks.append(queue_free)
        return take(self, files, queue_free=queue_free)

    monkeypatch.setattr(Slots, "_take", counted)
    got = threading.Event()

    def wait() -> None:
        with deadline(300.0, "timeout_s"), waiter.slot():
            got.set()

    with holder.slot():
        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        assert not got.wait(0.5)  # the only slot is held
    assert got.wait(60)  # woken by the release (its re-scan and its deadline are minutes away)
    thread.join(60)
    assert looks.count(False) <= 3  # at the head: once on arriving, once per ring (here one release)
    holder.close()
    waiter.close()


def test_a_killed_holder_frees_its_slot(tmp_path):
    holding = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from personalens_testkit.llm.limits import Limits, SharedLimiter; "
        "limiter = SharedLimiter(Path(sys.argv[2]), 'http://x', Limits(max_concurrency=1)); "
        "slot = limiter.slot(); slot.__enter__(); print('held', flush=True); time.sleep(600)"), ROOT, str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    assert holding.stdout.readline().strip() == "held"
    limiter = SharedLimiter(tmp_path, "http://x", Limits(max_concurrency=1))
    with deadline(0.3, "timeout_s"), pytest.raises(TimeLimit):  # held by the other process
        limiter._slots.acquire()
    holding.send_signal(signal.SIGKILL)
    holding.wait(30)
    with deadline(30.0, "timeout_s"), limiter.slot():
        pass
    limiter.close()


def test_a_wait_given_up_at_its_deadline_leaves_the_queue_to_the_next(tmp_path):
    """A caller that gave up at its deadline while queued takes nothing with it: the next caller, after the holder
    is done, gets the slot."""
    holder = SharedLimiter(tmp_path, "http://x", Limits(max_concurrency=1))
    other = SharedLimiter(tmp_path, "http://x", Limits(max_concurrency=1))
    with holder.slot():
        for _ in range(3):
            with deadline(0.2, "timeout_s"), pytest.raises(TimeLimit):
                with other.slot():
                    pass
    with deadline(30.0, "timeout_s"), other.slot():
        pass
    holder.close()
    other.close()


def test_the_rate_is_shared_and_closing_frees_the_files(tmp_path):
    limiter = SharedLimiter(tmp_path, "http://x", Limits(max_rps=1000.0, max_concurrency=2))
    with limiter.slot():
        pass
    opened = len(os.listdir(f"/proc/{os.getpid()}/fd"))
    limiter.close()
    assert len(os.listdir(f"/proc/{os.getpid()}/fd")) < opened
    assert {p.name for p in limiter.folder.iterdir()} >= {"rate", "queue", "bell", "slot-0", "slot-1"}
