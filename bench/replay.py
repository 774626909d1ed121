"""Cassette size and replay speed: bytes per scenario, and the time to replay N scenarios next to
the time of N bare pytest cases that only read and decompress the same cassette files.

    python bench/replay.py [--cassette-dir cassettes] [--assistant reference] [--repeat 3] [-n 1]

Both runs are fresh pytest processes started from this process, alternating, so the noisy
machine hits both alike; the ratio (replay / bare) is the figure, the target is <= 3.
"""

from __future__ import annotations

import argparse
import os
import json
import lzma
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: as a user runs pytest: with bytecode caching (a PYTHONDONTWRITEBYTECODE=1 shell would make every
#: process compile every module, and pytest rewrite every plugin module, again)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

BARE_TEST = '''
import json, lzma, pathlib
import pytest

FILES = sorted(pathlib.Path({folder!r}).glob("*.json.xz"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_read(path):
    data = json.loads(lzma.decompress(path.read_bytes()))
    assert data["interactions"]
'''


def run_pytest(args: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=cwd, capture_output=True, text=True, env=ENV)
    return time.perf_counter() - started, done.stdout + done.stderr


def passed(output: str) -> int:
    match = re.search(r"(\d+) passed", output)
    return int(match.group(1)) if match else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cassette-dir", default=str(ROOT / "cassettes"))
    parser.add_argument("--assistant", default="reference")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-n", dest="workers", default="0", help="xdist workers for both runs (0: none)")
    args = parser.parse_args()

    folder = Path(args.cassette_dir).resolve() / args.assistant
    files = sorted(folder.glob("*.json.xz"))
    if not files:
        raise SystemExit(f"no cassettes in {folder}")
    sizes = [p.stat().st_size for p in files]
    raw = [len(lzma.decompress(p.read_bytes())) for p in files]
    calls = [len(json.loads(lzma.decompress(p.read_bytes()))["interactions"]) for p in files]
    print(f"cassettes: {len(files)} in {folder}")
    print(f"bytes per scenario (xz): mean {statistics.mean(sizes):,.0f}, min {min(sizes):,}, max {max(sizes):,}; "
          f"total {sum(sizes):,}")
    print(f"bytes per scenario (JSON before xz): mean {statistics.mean(raw):,.0f} "
          f"(xz keeps {sum(sizes) / sum(raw):.1%}); calls per scenario: mean {statistics.mean(calls):.1f}")

    xdist = ["-n", args.workers] if args.workers != "0" else []
    with tempfile.TemporaryDirectory() as tmp:
        bare_dir = Path(tmp) / "bare"
        bare_dir.mkdir()
        (bare_dir / "test_bare.py").write_text(BARE_TEST.format(folder=str(folder)))
        (bare_dir / "pytest.ini").write_text("[pytest]\naddopts = -p no:deepeval\n")
        replay_args = ["suites/", "-p", "no:deepeval", "--cassette-dir", str(Path(args.cassette_dir).resolve()),
                       "--assistant", args.assistant, "--results-dir", str(Path(tmp) / "results"), *xdist]
        print(f"{'run':8} {'replay s':>9} {'bare s':>8} {'ratio':>6}  (N = {len(files)} scenarios, workers {args.workers})")
        ratios = []
        for attempt in range(1, args.repeat + 1):
            replay_s, out = run_pytest(replay_args, ROOT)
            if passed(out) + len(re.findall(r" failed", out)) == 0:
                raise SystemExit(f"the replay ran nothing:\n{out[-2000:]}")
            bare_s, bare_out = run_pytest([*xdist, "test_bare.py"], bare_dir)
            if passed(bare_out) != len(files):
                raise SystemExit(f"the bare run failed:\n{bare_out[-2000:]}")
            ratios.append(replay_s / bare_s)
            print(f"{attempt:<8} {replay_s:>9.2f} {bare_s:>8.2f} {replay_s / bare_s:>6.2f}")
        print(f"median ratio replay / bare: {statistics.median(ratios):.2f} (target <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
