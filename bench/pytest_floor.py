"""What pytest and xdist alone cost a run of N cases: a bare pytest process (the same interpreter and installed
plugins, none of ours) running N parametrized empty tests named as the suites' cases are, spread over xdist
workers - the controller's and the workers' peak RSS and the wall time. The floor under any plugin's figures
at that size: pytest keeps every case's report, and xdist every worker's collected node ids.

    python bench/pytest_floor.py [--cases 122133] [--workers 2]

Compare with ``bench/full_replay.py`` (the same size replayed through the suites) and ``bench/replay.py
--memory`` (the same at 512 and 4,096 cases, with the bare cases of its own beside them).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rss import describe, run_sampled  # noqa: E402  (bench/rss.py)

#: as a user runs pytest: with bytecode caching
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TEST = '''
import os
import pytest

DOMAINS = ["Alarm", "Books", "Buses", "Calendar", "Events", "Finance", "Flights", "Games", "Hotels", "Media",
           "Messaging", "Movies", "Music", "Rental Cars", "Restaurants", "Services", "Shopping", "Sports", "Train",
           "Travel"]
IDS = [f"user{i // 80}-SD-{DOMAINS[i % 20]}-task-{i // 20 % 4 + 1}" for i in range(int(os.environ["FLOOR_CASES"]))]


@pytest.mark.parametrize("scenario", IDS)
def test_single_domain_scenario(scenario):
    assert scenario
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=122_133, help="how many empty cases (default: the upstream "
                        "dataset's 122,133 scenarios)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "test_floor.py").write_text(TEST)
        (Path(tmp) / "pytest.ini").write_text("[pytest]\naddopts = -p no:deepeval\n")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_floor.py",
                   "-n", str(args.workers)]
        status, output, wall, peaks = run_sampled(command, cwd=Path(tmp),
                                                  env={**ENV, "FLOOR_CASES": str(args.cases)})
    found = re.search(r"(\d+) passed", output)
    if status != 0 or not found:
        raise SystemExit(f"the bare run failed:\n{output[-2000:]}")
    print(f"bare pytest, {int(found.group(1)):,} empty cases, -n {args.workers}: {wall:.0f} s")
    print("peak RSS: " + "; ".join(describe(peaks, next(iter(peaks)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
