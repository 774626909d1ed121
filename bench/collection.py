"""Collection speed and memory: ``pytest suites/ --collect-only`` on the bundled sample (4,096 cases)
and, given ``--personalens-data DIR`` (an upstream checkout), on the full benchmark (122,133 cases).

    python bench/collection.py [--personalens-data DIR] [--repeat 3]

Each measurement is a fresh pytest process (as a user runs it); prints pytest's own
collection time, the wall time of the whole process, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: as a user runs pytest: with bytecode caching (a PYTHONDONTWRITEBYTECODE=1 shell would make every
#: process compile every module, and pytest rewrite every plugin module, again)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def collect(extra: list[str]) -> tuple[int, float, float, float]:
    """(cases, pytest's collection seconds, process wall seconds, process peak RSS in MB)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "suites/", "--collect-only", "-q", "-p", "no:deepeval", "--record-mode", "all", *extra],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True, env=ENV,
        )
        _, _, usage = os.wait4(process.pid, 0)
        process.returncode = 0
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    match = re.search(r"(\d+) tests collected in ([\d.]+)s", text)
    if not match:
        raise SystemExit(f"collection failed:\n{text[-2000:]}")
    return int(match.group(1)), float(match.group(2)), wall, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personalens-data", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = [("bundled sample (--sample 50)", [])]
    if args.personalens_data:
        runs.append(("full data (--sample all)", ["--personalens-data", args.personalens_data, "--sample", "all"]))
    print(f"{'selection':32} {'cases':>7} {'collect s':>10} {'process s':>10} {'peak RSS MB':>12}")
    for label, extra in runs:
        for _ in range(args.repeat):
            cases, collect_s, wall, peak = collect(extra)
            print(f"{label:32} {cases:>7} {collect_s:>10.2f} {wall:>10.2f} {peak:>12.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
