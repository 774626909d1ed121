"""Live concurrency against a loopback OpenAI-compatible server that answers after a fixed delay
(200 ms by default): wall time of ``pytest suites/ --concurrency W`` (threads in one process) or
``-n W`` (xdist worker processes) next to the ideal (calls x delay / W), and next to a sequential
loop over the same scenarios in one process, one call after another (the upstream benchmark's way).

    python bench/live_concurrency.py [--scenarios 96] [--workers 16] [--delay 0.2] [--mode threads|xdist|both]
        [--bare-runs 3]
    (both: -n 2 processes, each with --concurrency workers/2)

Either way the run is also given ``--max-concurrency W``: a remote judge makes a dialogue's
six calls at once, and the cap keeps at most W calls in flight, so W lanes stay the comparison.

Prints calls, ideal seconds, parallel seconds, parallel efficiency (ideal / parallel; target
>= 0.8), where the time went (start-up, calls, finish), pytest's own share (:func:`pytest_share`: this
run's calls plus a bare pytest process's start-up and finish), sequential seconds and the
speed-up (sequential / parallel; target >= 12). The scenarios are a deterministic slice of the
sample (``--shard``), the dialogues capped at one turn, every call recorded to a throwaway
cassette folder as in a real run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: as a user runs pytest: with bytecode caching (a PYTHONDONTWRITEBYTECODE=1 shell would make every
#: process compile every module, and pytest rewrite every plugin module, again)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
sys.path.insert(0, str(ROOT))

from rss import describe, run_sampled  # noqa: E402  (bench/rss.py)
from tests.support.fake_llm import FakeLLM, Script  # noqa: E402  (the tests' loopback server)

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]


def options(shard: str, tmp: Path) -> list[str]:
    return [*SPECS, "--shard", shard, "--max-turns", "1", "--record-mode", "all", "--task-kind", "sd",
            "--cassette-dir", str(tmp / "cassettes"), "--results-dir", str(tmp / "results")]


def spread(mode: str, workers: int) -> list[str]:
    """W scenarios at once, and never more than W calls in flight (a judge's six calls go out together), so
    the ideal of W lanes is the fair comparison."""
    if mode == "both":
        return ["-n", "2", "--concurrency", str(workers // 2), "--max-concurrency", str(workers)]
    return ["-n" if mode == "xdist" else "--concurrency", str(workers), "--max-concurrency", str(workers)]


def parallel(shard: str, workers: int, url: str, tmp: Path, mode: str) -> tuple[float, int, float]:
    env = {**ENV, "OPENAI_BASE_URL": url}
    began = time.time()
    status, output, wall, peaks = run_sampled(
        [sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", "-q", *spread(mode, workers),
         *options(shard, tmp)],
        cwd=ROOT, env=env)
    match = re.search(r"(\d+) passed", output)
    if status != 0 or not match:
        raise SystemExit(f"the parallel run failed:\n{output[-4000:]}")
    cases = int(match.group(1))
    results = next((tmp / "results").glob("*/results.jsonl"), None)
    size = results.stat().st_size if results else 0
    print("peak RSS: " + "; ".join(describe(peaks, next(iter(peaks)))))
    print(f"results file: {size / max(cases, 1):,.0f} bytes per scenario")
    return wall, cases, began


def phases(began: float, wall: float, arrivals: list[float], pings: int, delay: float, workers: int) -> str:
    """Where a run's wall time went: before the first call of a case reached the server (the preflight's
    pings, answered at once, come first and are left out), while calls flowed (and how full the lanes were
    then), after the last answer until the process ended."""
    arrivals = sorted(arrivals)[pings:]
    first, last = arrivals[0], arrivals[-1] + delay
    flowing = last - first
    busy = len(arrivals) * delay / (flowing * workers)
    return (f"phases: start-up {first - began:.1f} s, calls {flowing:.1f} s (lanes {busy:.0%} full), "
            f"finish {began + wall - last:.1f} s")


def bare_process(arguments: list[str], runs: int) -> float:
    """Wall seconds of a bare pytest process (the same interpreter and installed plugins, none of ours) that
    runs one empty test spread as the run was (``-n``), the median of ``runs``: the start-up and finish any
    pytest run pays, with no dataset, no model and no call."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "test_empty.py").write_text("def test_empty():\n    pass\n")
        (Path(tmp) / "pytest.ini").write_text("[pytest]\naddopts = -p no:deepeval\n")
        xdist = arguments[:2] if arguments[0] == "-n" else []
        walls = []
        for _ in range(runs):
            status, output, wall, _peaks = run_sampled(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *xdist, "test_empty.py"],
                cwd=Path(tmp), env=ENV)
            if status != 0:
                raise SystemExit(f"the bare run failed:\n{output[-2000:]}")
            walls.append(wall)
    return statistics.median(walls)


def pytest_share(arrivals: list[float], pings: int, delay: float, ideal: float, bare: float) -> str:
    """This run's calls (from the first call of a case to the last answer) plus a bare pytest process's
    start-up and finish: the efficiency of a run whose plugin cost nothing beyond pytest's own start and end -
    a ceiling where the calls cannot start before the process is up (``--concurrency``, ``-n 2``), a reference
    where later workers start while the first ones call (``-n 16`` on 2 cores) - and what an efficiency goal
    of 0.90 / 0.85 leaves for start-up and finish together after these calls."""
    arrivals = sorted(arrivals)[pings:]
    flowing = arrivals[-1] + delay - arrivals[0]
    room = ", ".join(f"{goal:.2f}: {ideal / goal - flowing:.1f} s" for goal in (0.90, 0.85))
    return (f"pytest's own share: the calls {flowing:.1f} s (efficiency {ideal / flowing:.2f} with no start-up or "
            f"finish) + a bare pytest process spread the same way, one empty test, {bare:.1f} s = efficiency "
            f"{ideal / (flowing + bare):.2f}; an efficiency goal leaves start-up and finish together ({room})")


def sequential(shard: str, url: str, tmp: Path) -> tuple[float, int]:
    """The same scenarios in a plain loop, one after the other, in this process."""
    from personalens_testkit.data.models import TaskKind
    from personalens_testkit.run.state import Run
    from personalens_testkit.settings import resolve_settings

    os.environ["OPENAI_BASE_URL"] = url
    names = ["user_model", "judge_model", "assistant_model", "shard", "max_turns", "record_mode", "task_kind",
             "cassette_dir", "results_dir"]
    values = ["openai:fake-user", "openai:fake-judge", "openai:fake-bot", shard, 1, "all", "sd",
              str(tmp / "cassettes-seq"), str(tmp / "results-seq")]
    settings = resolve_settings(dict(zip(names, values)), ROOT, os.environ)
    state = Run(settings, run_id="sequential", is_controller=True)
    state.runner.evaluator.judge.parallel = 1  # the upstream way: every call after the one before
    cases = state.cases_of(TaskKind.SD)
    started = time.perf_counter()
    for scenario, repeat in cases:
        evaluation = state.runner.evaluate(scenario, repeat=repeat)
        assert evaluation.error is None, evaluation.error
    wall = time.perf_counter() - started
    state.close()
    return wall, len(cases)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=96, help="about this many single-domain scenarios")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2, help="the server's answer delay in seconds")
    parser.add_argument("--mode", choices=("threads", "xdist", "both"), default="threads",
                        help="threads: --concurrency W in one process; xdist: -n W worker processes; "
                             "both: -n 2 processes with --concurrency W/2 each")
    parser.add_argument("--skip-sequential", action="store_true")
    parser.add_argument("--bare-runs", type=int, default=3, help="runs of the bare pytest process (their median)")
    args = parser.parse_args()
    shard = f"1/{max(1, 3283 // args.scenarios)}"
    with tempfile.TemporaryDirectory() as tmp, FakeLLM(Script(terminate_after=1, delay_s=args.delay)) as fake:
        wall, cases, began = parallel(shard, args.workers, fake.url, Path(tmp), args.mode)
        calls = len(fake.requests)
        ideal = calls * args.delay / args.workers
        print(f"scenarios {cases}, calls {calls}, delay {args.delay:.3f} s, workers {args.workers}, "
              f"at most {fake.max_in_flight} calls in flight")
        how = {"xdist": f"-n {args.workers}", "both": f"-n 2 --concurrency {args.workers // 2}"}.get(
            args.mode, f"--concurrency {args.workers}")
        print(f"parallel ({how}): {wall:.1f} s; ideal {ideal:.1f} s; efficiency {ideal / wall:.2f} (target >= 0.8)")
        print(phases(began, wall, fake.arrivals, len(fake.pings), args.delay, args.workers))
        bare = bare_process(spread(args.mode, args.workers), args.bare_runs)
        print(pytest_share(fake.arrivals, len(fake.pings), args.delay, ideal, bare))
        if not args.skip_sequential:
            before = len(fake.requests)
            seq_wall, seq_cases = sequential(shard, fake.url, Path(tmp))
            print(f"sequential loop: {seq_wall:.1f} s for {seq_cases} scenarios ({len(fake.requests) - before} calls); "
                  f"speed-up {seq_wall / wall:.1f}x (target >= 12)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
