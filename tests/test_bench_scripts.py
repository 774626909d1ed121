"""The bench/ scripts at a small size, so they never rot: each runs end to end and prints its
figures. (The figures themselves are measured by hand and kept in bench/README.md.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def bench(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_replay_bench_small():
    out = bench("bench/replay.py", "--synthesise", "8", "--repeat", "1")
    assert "bytes per scenario (xz): mean" in out and "median ratio replay / bare at workers 0:" in out


def test_live_concurrency_bench_small():
    out = bench("bench/live_concurrency.py", "--scenarios", "4", "--workers", "2", "--delay", "0.01")
    assert "efficiency" in out and "speed-up" in out


def test_collection_bench_small(tmp_path):
    bench("bench/synth_data.py", str(tmp_path / "data"), "--profiles", "60")
    out = bench("bench/collection.py", "--repeat", "1", "--personalens-data", str(tmp_path / "data"))
    assert "bundled sample (--sample 50)" in out and "full data (--sample all)" in out


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py")))
def test_every_bench_script_has_usage(script):
    assert "usage" in bench(f"bench/{script}", "--help").lower()
