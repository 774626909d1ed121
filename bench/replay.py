"""Cassette size and replay speed: bytes per scenario, and the time to replay N scenarios next to
the time of N bare pytest cases that only read and decompress the same cassette files.

    python bench/replay.py                          # the shipped recording (cassettes/reference)
    python bench/replay.py --synthesise 4096        # record 4,096 sample scenarios against a loopback
                                                    # server first, then replay those
    options: [--workers 0,2] [--repeat 3] [--cassette-dir DIR --assistant NAME]
             [--synth-dir DIR]: keep the synthesised cassettes there (and reuse them next time)
             [--memory]: instead of the times, the controlling process's peak memory replaying an eighth and
             all of the cassettes with -n 2 (or each --workers count), its growth per case, and that growth
             carried to 122,133 cases

Both runs are fresh pytest processes started from this process, alternating, so the noisy
machine hits both alike; the ratio (replay / bare) is the figure, the target is <= 3.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_NAME = "results.jsonl.xz"  # results/recorded.py: the rows a recording keeps beside its cassettes
SAMPLE = 4096  # scenarios of the 50-profile sample (3,283 single-domain + 813 multi-domain)
#: as a user runs pytest: with bytecode caching (a PYTHONDONTWRITEBYTECODE=1 shell would make every
#: process compile every module, and pytest rewrite every plugin module, again)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
FAKE_SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge",
              "--assistant-model", "openai:fake-bot"]

BARE_TEST = '''
import json, lzma, os, pathlib
import pytest

FILES = sorted(pathlib.Path({folder!r}).glob("*.json.xz"))
FILES = FILES[:len(FILES) // int(os.environ.get("BARE_SHARE", "1"))]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_read(path):
    data = json.loads(lzma.decompress(path.read_bytes()))
    assert data["interactions"]
'''


#: the CPU of the last :func:`run_pytest`'s processes, the xdist workers included: (user, system) seconds
LAST_CPU: list[float] = [0.0, 0.0]


def run_pytest(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # a child's waited-for descendants count as its own
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=cwd, capture_output=True, text=True, env=env or ENV)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[:] = [after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime]
    return wall, done.stdout + done.stderr


def passed(output: str) -> int:
    match = re.search(r"(\d+) passed", output)
    return int(match.group(1)) if match else 0


def synthesise(count: int, cassette_dir: Path, results: Path, url: str) -> int:
    """Record ``count`` sample scenarios (a deterministic slice) against the loopback server."""
    shard = [] if count >= 4096 else ["--shard", f"1/{4096 // count}"]
    wall, out = run_pytest(["suites/", *FAKE_SPECS, *shard, "--record-mode", "all", "-n", "2",
                            "--cassette-dir", str(cassette_dir), "--results-dir", str(results)],
                           ROOT, {**ENV, "OPENAI_BASE_URL": url})
    recorded = passed(out)
    print(f"synthesised {recorded} cassettes against a loopback server in {wall:.0f} s")
    return recorded


def bare_cases(folder: Path, tmp: Path) -> Path:
    """A folder of its own holding the bare cases (:data:`BARE_TEST`) for the cassettes in ``folder``."""
    bare_dir = tmp / "bare"
    bare_dir.mkdir()
    (bare_dir / "test_bare.py").write_text(BARE_TEST.format(folder=str(folder)))
    # truly bare: pytest and xdist without the testkit's plugin (issue 48: with it loaded, 1.12x of a run without)
    (bare_dir / "pytest.ini").write_text("[pytest]\naddopts = -p no:deepeval -p no:personalens\n")
    return bare_dir


def measure(folder: Path, replay_args: list[str], workers: str, repeat: int, env: dict[str, str]) -> list[float]:
    files = sorted(folder.glob("*.json.xz"))
    xdist = ["-n", workers] if workers != "0" else []
    ratios, user_ratios, kernel = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        bare_dir = bare_cases(folder, Path(tmp))
        print(f"{'run':8} {'replay s':>9} {'bare s':>8} {'ratio':>6}   CPU s, user + system: replay, bare"
              f"  (N = {len(files)} scenarios, workers {workers})")
        for attempt in range(1, repeat + 1):
            replay_s, out = run_pytest([*replay_args, "--results-dir", str(Path(tmp) / "results"), *xdist], ROOT, env)
            replay_cpu = tuple(LAST_CPU)
            if passed(out) + len(re.findall(r" failed", out)) == 0:
                raise SystemExit(f"the replay ran nothing:\n{out[-2000:]}")
            bare_s, bare_out = run_pytest([*xdist, "test_bare.py"], bare_dir)
            bare_cpu = tuple(LAST_CPU)
            if passed(bare_out) != len(files):
                raise SystemExit(f"the bare run failed:\n{bare_out[-2000:]}")
            ratios.append(replay_s / bare_s)
            user_ratios.append(replay_cpu[0] / max(bare_cpu[0], 1e-9))
            kernel.append(replay_cpu[1] - bare_cpu[1])
            print(f"{attempt:<8} {replay_s:>9.2f} {bare_s:>8.2f} {replay_s / bare_s:>6.2f}   "
                  f"{replay_cpu[0]:.2f} + {replay_cpu[1]:.2f}, {bare_cpu[0]:.2f} + {bare_cpu[1]:.2f}")
    print(f"median ratio replay / bare at workers {workers}: {statistics.median(ratios):.2f} (target <= 3; issue 22: <= 1.8)")
    # The system time is mostly the file system's: a replay creates a transcript file a case, which costs this
    # machine's file system 20 us to 1.2 ms of kernel time a file from one minute to the next.
    print(f"user CPU replay / bare at workers {workers}: median {statistics.median(user_ratios):.2f}; "
          f"system CPU of the replay beyond the bare run's: median {statistics.median(kernel):.2f} s "
          f"({1000 * statistics.median(kernel) / max(len(files), 1):.2f} ms a case)")
    return ratios


HEAP_PROBE = '''
import gc, os, sys, tracemalloc
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput") and tracemalloc.is_tracing():
        gc.collect()
        with open(os.environ["HEAP_PROBE_OUT"], "w") as out:
            out.write(str(tracemalloc.get_traced_memory()[0]))
'''


def memory(folder: Path, replay_args: list[str], env: dict[str, str], workers: str = "2") -> None:
    """The xdist controller's peak RSS replaying an eighth of the cassettes and all of them (-n ``workers``): the
    memory it holds per case, and what that comes to at the full upstream dataset's 122,133 scenarios. Beside it,
    from runs of their own, the Python heap the controller holds when the cases are done, before the end of the
    run builds the report (tracemalloc in the controller only): the growth a case without the allocator's noise.
    And the floor: the controller of a bare pytest run (the bare cases of :func:`measure`, as many, as many
    workers), which holds what pytest and xdist keep a case with no plugin of ours."""
    sys.path.insert(0, str(ROOT / "bench"))
    from rss import run_sampled  # the same sampling as bench/rss.py

    found: dict[str, list[tuple[int, float]]] = {"rss": [], "heap": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "probe").mkdir()
        (Path(tmp) / "probe" / "heap_probe.py").write_text(HEAP_PROBE)
        traced = {**env, "HEAP_PROBE_OUT": str(Path(tmp) / "heap.txt"),
                  "PYTHONPATH": os.pathsep.join(p for p in (str(Path(tmp) / "probe"), env.get("PYTHONPATH")) if p)}
        for kind, share in (("rss", "1/8"), ("rss", None), ("heap", "1/8"), ("heap", None)):
            shard = ["--shard", share] if share else []
            heap = ["-X", "tracemalloc=1"] if kind == "heap" else []
            probe = ["-p", "heap_probe"] if kind == "heap" else []
            command = [sys.executable, *heap, "-m", "pytest", *probe, "-p", "no:cacheprovider", "-q", *replay_args,
                       *shard, "--results-dir", str(Path(tmp) / "results"), "-n", workers]
            status, output, wall, peaks = run_sampled(command, cwd=ROOT, env=traced if heap else env)
            cases = passed(output)
            if status != 0 or not cases:
                raise SystemExit(f"the replay failed:\n{output[-2000:]}")
            if kind == "rss":
                found[kind].append((cases, peaks[next(iter(peaks))][1] / 1024))
                print(f"replay of {cases:,} cases (-n {workers}): controller peak RSS {found[kind][-1][1]:.0f} MB, "
                      f"{wall:.1f} s")
            else:
                found[kind].append((cases, int((Path(tmp) / "heap.txt").read_text()) / 2**20))
                print(f"replay of {cases:,} cases (-n {workers}): controller's Python heap when the cases are done "
                      f"{found[kind][-1][1]:.1f} MB")
        bare_dir = bare_cases(folder, Path(tmp))
        for share in ("8", "1"):  # pytest and xdist alone: the bare cases, the same number, the same workers
            command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_bare.py", "-n", workers]
            status, output, wall, peaks = run_sampled(command, cwd=bare_dir, env={**ENV, "BARE_SHARE": share})
            if status != 0 or not passed(output):
                raise SystemExit(f"the bare run failed:\n{output[-2000:]}")
            found["bare"].append((passed(output), peaks[next(iter(peaks))][1] / 1024))
            print(f"bare run of {found['bare'][-1][0]:,} cases (-n {workers}): controller peak RSS "
                  f"{found['bare'][-1][1]:.0f} MB, {wall:.1f} s")
    for kind, what in (("rss", "peak RSS"), ("heap", "heap when the cases are done"), ("bare", "bare pytest, peak RSS")):
        (few, low), (many, high) = found[kind]
        per_case = (high - low) * 1024 / (many - few)
        print(f"controller ({what}, -n {workers}): {per_case:.2f} KB more a case; at 122,133 cases: "
              f"{low + per_case * (122_133 - few) / 1024:.0f} MB" + (" (goal: <= 150 MB, flat)" if kind == "rss" else ""))


def memory_workers(option: str) -> list[str]:
    """The worker counts --memory measures: those of --workers, at least 2 (the controller of an xdist run)."""
    return list(dict.fromkeys(str(max(2, int(count))) for count in option.split(",")))


def sizes(folder: Path) -> None:
    files = sorted(folder.glob("*.json.xz"))
    if not files:
        raise SystemExit(f"no cassettes in {folder}")
    size = [p.stat().st_size for p in files]
    raw = [lzma.decompress(p.read_bytes()) for p in files]
    calls = [len(json.loads(r)["interactions"]) for r in raw]
    print(f"cassettes: {len(files)} in {folder}")
    print(f"bytes per scenario (xz): mean {statistics.mean(size):,.0f}, min {min(size):,}, max {max(size):,}; "
          f"total {sum(size):,}")
    print(f"bytes per scenario (JSON before xz): mean {statistics.mean(len(r) for r in raw):,.0f} "
          f"(xz keeps {sum(size) / sum(len(r) for r in raw):.1%}); calls per scenario: mean {statistics.mean(calls):.1f}")
    results = folder / RESULTS_NAME
    per_row = results.stat().st_size / max(1, len(lzma.decompress(results.read_bytes()).splitlines())) \
        if results.is_file() else 0.0
    if per_row:
        print(f"recorded results ({RESULTS_NAME}, slim rows): {results.stat().st_size:,} bytes, {per_row:,.0f} a scenario")
    whole = SAMPLE * (statistics.mean(size) + per_row)
    print(f"the whole sample's recording ({SAMPLE:,} scenarios) at this size: cassettes {SAMPLE * statistics.mean(size) / 1e6:.1f} MB"
          f" + results {SAMPLE * per_row / 1e6:.1f} MB = {whole / 1e6:.1f} MB (target < 50 MB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cassette-dir", default=str(ROOT / "cassettes"))
    parser.add_argument("--assistant", default="reference")
    parser.add_argument("--synthesise", type=int, default=0, metavar="N",
                        help="first record N sample scenarios against a loopback server, and replay those")
    parser.add_argument("--synth-dir", default="", metavar="DIR",
                        help="record the synthesised cassettes into DIR and keep them; reuse them if DIR has them")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="0", help="comma-separated xdist worker counts (0: no xdist)")
    parser.add_argument("--memory", action="store_true", help="the controller's memory instead of the times")
    args = parser.parse_args()

    if not args.synthesise:
        folder = Path(args.cassette_dir).resolve() / args.assistant
        sizes(folder)
        replay = ["suites/", "-p", "no:deepeval", "--cassette-dir", str(Path(args.cassette_dir).resolve()),
                  "--assistant", args.assistant]
        if args.memory:
            for workers in memory_workers(args.workers):
                memory(folder, replay, ENV, workers)
            return 0
        for workers in args.workers.split(","):
            measure(folder, replay, workers, args.repeat, ENV)
        return 0

    sys.path.insert(0, str(ROOT))
    from tests.support.fake_llm import FakeLLM, Script  # the tests' loopback server

    with tempfile.TemporaryDirectory() as tmp, FakeLLM(Script(terminate_after=2)) as fake:
        cassettes = Path(args.synth_dir).resolve() if args.synth_dir else Path(tmp) / "cassettes"
        folder = cassettes / "reference"
        if len(list(folder.glob("*.json.xz"))) < args.synthesise:
            synthesise(args.synthesise, cassettes, Path(tmp) / "recording", fake.url)
        sizes(folder)
        replay = ["suites/", "-p", "no:deepeval", *FAKE_SPECS, "--cassette-dir", str(cassettes)]
        dead = {**ENV, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # a replay must not need the server
        if args.memory:
            for workers in memory_workers(args.workers):
                memory(folder, replay, dead, workers)
            return 0
        for workers in args.workers.split(","):
            measure(folder, replay, workers, args.repeat, dead)
    return 0


if __name__ == "__main__":
    sys.exit(main())
