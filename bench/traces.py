"""--otel-endpoint's cost (issue 51): the shipped recording's 25 dialogues replayed as a team's CI replays them, with no
traces, with each case's trace sent to a live OTLP/HTTP receiver on loopback (the protocol decoded: what a collector
gets), and to a collector that is down (nothing listens: every span dropped, one line) - whole processes, medians.

    python bench/traces.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.otlp_receiver import OTLPReceiver  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _replay(args: list[str], cassettes: Path, results: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:deepeval",
                           "suites/", "--cassette-dir", str(cassettes), "--results-dir", str(results), *args],
                          cwd=ROOT, capture_output=True, text=True, env=ENV)
    return time.perf_counter() - started, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        cassettes = Path(tmp) / "cassettes"
        shutil.copytree(ROOT / "cassettes", cassettes)
        times: dict[str, list[float]] = {"off": [], "live collector": [], "collector down": []}
        received = lines = ""
        for n in range(args.repeat):
            for mode in times:
                with OTLPReceiver() as receiver:
                    endpoint = {"off": [], "live collector": ["--otel-endpoint", receiver.url],
                                "collector down": ["--otel-endpoint", dead]}[mode]
                    wall, out = _replay(endpoint, cassettes, Path(tmp) / f"results-{n}")
                    times[mode].append(wall)
                    if mode == "live collector":
                        traces = len({s["trace_id"] for s in receiver.spans})
                        received = f"{traces} traces, {len(receiver.spans)} spans, {len(receiver.events)} evaluation events"
                    found = re.search(r"traces: .*", out)
                    if mode == "collector down" and found:
                        lines = found.group(0)
        base = statistics.median(times["off"])
        print(f"the shipped recording replayed (25 cases), medians of {args.repeat}, whole processes:")
        for mode, walls in times.items():
            print(f"  {mode:<15} {statistics.median(walls):.2f} s ({statistics.median(walls) / base:.2f}x off)")
        print(f"  the live collector received {received}")
        print(f"  with the collector down, the run said: {lines}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
