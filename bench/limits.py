"""What ``--max-concurrency`` costs a call, and how it shares slots among processes when they are scarce.

    python bench/limits.py [--calls 20000] [--repeat 5] [--processes 4] [--threads 4] [--slots 4] [--hold-ms 20]
                           [--seconds 3]

- uncontended: CPU (``time.thread_time``) of entering and leaving ``SharedLimiter.slot()`` with 4 slots, one
  thread, ``--calls`` times, against a ``threading.BoundedSemaphore`` doing the same; medians of ``--repeat``
  runs, alternating (the goal: under 20 us a call);
- two processes at once, each entering and leaving ``--calls`` times on the same limiter folder (slots enough for
  both: no waiting, only the shared files): CPU a call in each;
- contended: ``--processes`` processes of ``--threads`` threads each, every call holding its slot ``--hold-ms``, for
  ``--seconds``: the most calls ever in flight (it must be ``--slots``), how full the slots were (calls x hold /
  (slots x seconds)), each process's share of the calls (fair: about 1 / processes each; min / max printed) and
  the wait for a slot (median, 99th percentile, most).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from personalens_testkit.llm.limits import Limits, SharedLimiter  # noqa: E402


def uncontended(folder: Path, calls: int) -> float:
    """CPU-us a call of the limiter, one thread."""
    limiter = SharedLimiter(folder, "http://bench", Limits(max_concurrency=4))
    with limiter.slot():  # the files opened once, as in a run
        pass
    started = time.thread_time()
    for _ in range(calls):
        with limiter.slot():
            pass
    spent = time.thread_time() - started
    getattr(limiter, "close", lambda: None)()  # a limiter before issue 48 had no close (the baseline)
    return spent / calls * 1e6


def semaphore(calls: int) -> float:
    lock = threading.BoundedSemaphore(4)
    started = time.thread_time()
    for _ in range(calls):
        with lock:
            pass
    return (time.thread_time() - started) / calls * 1e6


WORKER = r'''
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from personalens_testkit.llm.limits import Limits, SharedLimiter
folder, mode, slots, threads, hold, seconds, calls, start = (Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
    int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9]))
limiter = SharedLimiter(folder, "http://bench", Limits(max_concurrency=slots))
with limiter.slot():
    pass
while time.time() < start:
    time.sleep(0.001)
if mode == "cpu":
    began = time.thread_time()
    for _ in range(calls):
        with limiter.slot():
            pass
    print(json.dumps({"cpu_us": (time.thread_time() - began) / calls * 1e6}))
    sys.exit(0)
waits, spans, lock, end = [], [], threading.Lock(), start + seconds
def run():
    while time.time() < end:
        asked = time.monotonic()
        with limiter.slot():
            got = time.time()
            time.sleep(hold)
            left = time.time()
        with lock:
            waits.append(time.monotonic() - asked - (left - got))
            spans.append((got, left))
pool = [threading.Thread(target=run) for _ in range(threads)]
for t in pool: t.start()
for t in pool: t.join()
print(json.dumps({"waits": waits, "spans": spans}))
'''


def processes(folder: Path, mode: str, count: int, *, slots: int, threads: int = 1, hold_s: float = 0.0,
              seconds: float = 0.0, calls: int = 0) -> list[dict]:
    start = time.time() + 1.0
    children = [subprocess.Popen([sys.executable, "-c", WORKER, str(ROOT), str(folder), mode, str(slots), str(threads),
                                  str(hold_s), str(seconds), str(calls), str(start)], stdout=subprocess.PIPE, text=True)
                for _ in range(count)]
    return [json.loads(child.communicate()[0]) for child in children]


def in_flight(spans: list[tuple[float, float]]) -> int:
    events = sorted([(got, 1) for got, _ in spans] + [(left, -1) for _, left in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--hold-ms", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours, bare = [], []
        for run in range(args.repeat):
            ours.append(uncontended(Path(tmp) / f"u{run}", args.calls))
            bare.append(semaphore(args.calls))
        print(f"uncontended, one thread, {args.calls} calls x {args.repeat}: limiter {statistics.median(ours):.2f} us "
              f"a call (min {min(ours):.2f}, max {max(ours):.2f}); a semaphore {statistics.median(bare):.2f} us; "
              f"ratio {statistics.median(o / b for o, b in zip(ours, bare)):.1f}x (goal: under 20 us)")
        two = [row["cpu_us"] for run in range(args.repeat)
               for row in processes(Path(tmp) / f"two{run}", "cpu", 2, slots=4, calls=args.calls)]
        print(f"two processes at once, slots enough for both: {statistics.median(two):.2f} us a call "
              f"(min {min(two):.2f}, max {max(two):.2f})")
        found = processes(Path(tmp) / "contended", "contended", args.processes, slots=args.slots,
                          threads=args.threads, hold_s=args.hold_ms / 1000, seconds=args.seconds)
    spans = [tuple(span) for row in found for span in row["spans"]]
    waits = sorted(wait for row in found for wait in row["waits"])
    shares = [len(row["spans"]) / len(spans) for row in found]
    first, last = min(got for got, _ in spans), max(left for _, left in spans)
    full = sum(left - got for got, left in spans) / (args.slots * (last - first))
    print(f"contended: {args.processes} processes x {args.threads} threads on {args.slots} slots, each call holding "
          f"{args.hold_ms:g} ms, {args.seconds:g} s: {len(spans)} calls; most in flight {in_flight(spans)} "
          f"(limit {args.slots}); slots {full:.1%} full; each process's share of the calls "
          f"min {min(shares):.3f}, max {max(shares):.3f} (even: {1 / args.processes:.3f}); wait for a slot: median "
          f"{statistics.median(waits) * 1000:.1f} ms, 99th percentile {waits[int(len(waits) * 0.99)] * 1000:.1f} ms, "
          f"most {waits[-1] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
