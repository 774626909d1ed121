"""The full upstream dataset's size end to end in replay: about 122,000 scenarios on this machine, with the
controlling process's and the workers' peak memory.

    python bench/full_replay.py [--profiles 1500] [--dir /tmp/full] [--workers 2] [--sample-scenarios 4096]

1. A full-size dataset (bench/synth_data.py: 1,500 profiles, 122,808 scenarios; each profile beyond the
   sample's 50 is a copy of a sample user's files under its own user id).
2. Its cassettes, from the bundled sample's recording against a loopback server (bench/replay.py
   --synthesise 4096, kept in DIR/sample): a copied user's scenario sends what its sample user's sends except for
   its own user id, which the judge's prompt shows; so its cassette is the sample user's with that id written
   in (a string replacement in the recorded request bodies, checked to occur). Two processes, xz preset 0.
3. The replay of all of them, ``pytest suites/ -n WORKERS`` against a dead model address, sampled by
   bench/rss.py: wall time, cases passed, rows written, each process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from replay import ENV, FAKE_SPECS, passed  # noqa: E402 - the bench's own helpers
from rss import describe, run_sampled  # noqa: E402
from synth_data import synthesise  # noqa: E402


def _clone(job: tuple[str, str, str, str]) -> int:
    """Write the cassettes of one user from its sample user's; returns how many were written."""
    source, target, template, user = Path(job[0]), Path(job[1]), job[2], job[3]
    old, new = f"user_id: {template}\\\\n".encode(), f"user_id: {user}\\\\n".encode()
    made = 0
    for path in source.glob(f"{template}-*.json.xz"):
        name = target / path.name.replace(f"{template}-", f"{user}-", 1)
        if name.exists():
            continue
        raw = lzma.decompress(path.read_bytes())
        if user != template:
            if raw.count(old) != 1:
                raise SystemExit(f"{path}: '{old.decode()}' found {raw.count(old)} times, not once")
            raw = raw.replace(old, new)
            # the scenario the cassette names (metadata.scenario) is the copied user's
            raw = raw.replace(f'"scenario":"{template}-'.encode(), f'"scenario":"{user}-'.encode())
        name.write_bytes(lzma.compress(raw, preset=0))
        made += 1
    return made


def cassettes(data: Path, sample: Path, out: Path) -> int:
    """Every user's cassettes: a sample user's own, a copied user's from its sample user's (synth_data's rule:
    user N copies the N mod 50-th sample user, in the order of their numbers)."""
    from personalens_testkit.data.loader import bundled_root

    own = sorted((p.name for p in (bundled_root() / "data" / "profile").iterdir()), key=lambda n: int(n[4:]))
    users = sorted((p.name for p in (data / "data" / "profile").iterdir()), key=lambda n: int(n[4:]))
    jobs = [(str(sample), str(out), user if user in own else own[int(user[4:]) % len(own)], user) for user in users]
    out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return sum(pool.map(_clone, jobs, chunksize=8))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=1500)
    parser.add_argument("--dir", default="/tmp/personalens-full", help="where the data and cassettes are kept")
    parser.add_argument("--workers", default="2")
    parser.add_argument("--sample-scenarios", type=int, default=4096,
                        help="record this many of the sample's scenarios (a smaller run replays only their copies)")
    args = parser.parse_args()
    base = Path(args.dir)
    data, sample, cassette_dir = base / "data", base / "sample", base / "cassettes"
    if not (sample / "reference").is_dir():
        done = subprocess.run([sys.executable, "bench/replay.py", "--synthesise", str(args.sample_scenarios),
                               "--synth-dir", str(sample),
                               "--repeat", "1", "--workers", args.workers], cwd=ROOT, env=ENV)
        if done.returncode:
            return done.returncode
    if not data.is_dir():
        synthesise(data, args.profiles)
    started = time.perf_counter()
    made = cassettes(data, sample / "reference", cassette_dir / "reference")
    print(f"cassettes: {made:,} written in {time.perf_counter() - started:.0f} s "
          f"({len(list((cassette_dir / 'reference').glob('*.json.xz'))):,} in {cassette_dir / 'reference'})")
    results = base / "results"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "suites/", "-p", "no:deepeval",
               *FAKE_SPECS, "--personalens-data", str(data), "--sample", "all", "--cassette-dir", str(cassette_dir),
               "--results-dir", str(results), "-n", args.workers]
    status, output, wall, peaks = run_sampled(command, cwd=ROOT, env={**ENV, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    print(output[-1500:])
    newest = max(results.glob("*/results.jsonl"), key=lambda p: p.stat().st_mtime)
    rows = sum(1 for line in newest.open(encoding="utf-8") if line.strip() and "scenario_id" in json.loads(line))
    print(f"replay of the full-size dataset: exit status {status}, {passed(output):,} passed, {rows:,} rows in "
          f"{newest}, {wall:.0f} s")
    for line in describe(peaks, next(iter(peaks))):
        print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
