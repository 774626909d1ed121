"""The end of a run at full size: the controlling process's memory and time to build the report of N cases
from their results file, and to write report.json, JUnit, the HTML and the job summary.

    python bench/report_memory.py [--cases 122133] [--turns 20] [--dir DIR]

Writes N result rows shaped as a replayed run writes them (a dialogue of --turns turns, 2 calls a turn and 6
judge calls, scores drawn like the paper's) with the run's own writer, then runs the end of a run in a fresh
process - the same code `pytest suites/` runs at session finish (results/source.py, report/model.py
`tally_rows` and `build_report`, report/outputs.py) - and prints its peak RSS, and beside it the same with the
rows read whole (the way before issue 22) when --whole is given. The rows are synthetic; the figures are the
report code's own.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOMAINS = ["Alarm", "Books", "Calendar", "Events", "Finance", "Flights", "Games", "Hotels", "Media", "Messaging",
           "Movies", "Music", "Restaurants", "Services", "Shopping", "Sports", "Train", "Travel", "Weather", "RentalCars"]


def write_rows(path: Path, cases: int, turns: int) -> int:
    sys.path.insert(0, str(ROOT))
    from personalens_testkit.results.files import ResultsWriter
    from personalens_testkit.results.rows import ResultRow

    rng = random.Random(22)
    writer = ResultsWriter(path)
    line = "I would like the usual, please - somewhere quiet, not too far from the station. " * 2
    transcript = [{"role": "user" if n % 2 == 0 else "assistant", "content": line} for n in range(2 * turns)]
    calls = [{"role": role, "label": role, "turn": n, "seconds": 0.01, "prompt_tokens": 900 + 40 * n,
              "completion_tokens": 60, "replayed": True} for n in range(turns) for role in ("user_agent", "assistant")]
    calls += [{"role": "judge", "label": "judge", "turn": turns, "seconds": 0.02, "prompt_tokens": 4500,
               "completion_tokens": 90, "replayed": True} for _ in range(6)]
    for n in range(cases):
        kind = "md" if n % 5 == 0 else "sd"
        scores = {"task_completion": rng.random() < 0.9, "personalization": rng.choice([1, 2, 2, 2, 3, 3, 4]),
                  "naturalness_user": rng.randint(3, 5), "coherence_user": rng.randint(3, 5),
                  "naturalness_assistant": rng.randint(3, 5), "coherence_assistant": rng.randint(3, 5)}
        row = ResultRow.model_validate({
            "run_id": "bench", "scenario_id": f"user{n // 80}-{kind.upper()}-task-{n}", "task_kind": kind,
            "domains": rng.sample(DOMAINS, 3 if kind == "md" else 1), "status": "passed", "scores": scores,
            "reasons": {m: "The assistant asked what the user wanted and used it." for m in scores},
            "assistant": "reference", "user_model": "openai:gpt-4o-mini", "judge_model": "openai:gpt-4o",
            "assistant_model": "openai:gpt-4.1-mini", "turns": turns, "max_turns": 20, "termination": "terminate",
            "transcript": transcript, "calls": calls, "cassette": f"cassettes/reference/case-{n}.json.xz",
            "seconds": 1.0, "finished_at": "2026-11-26T10:00:00+00:00"})
        writer.write(row)
    writer.close()
    return path.stat().st_size


FINISH = '''
import resource, sys, time
from pathlib import Path
from personalens_testkit.costs.prices import load_prices
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
from personalens_testkit.report.model import build_report, tally_rows
from personalens_testkit.report.outputs import in_folder, write_report_files
from personalens_testkit.results.files import line_digest, read_rows
from personalens_testkit.results.source import RowSource

path, out, whole = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "whole"
with open(path, "rb") as lines:  # what the run's writer knows of the lines it wrote, as a run's end is given it
    written = {line_digest(line) for line in lines}
started = time.perf_counter()
prices, thresholds = load_prices(), load_thresholds(default_thresholds_path())
if whole:
    report = build_report(read_rows(path, written=written), thresholds, prices=prices)
else:
    source = RowSource(path, written=written)
    rows, tallied = tally_rows(source, prices)
    report = build_report(rows, thresholds, prices=prices, source=source, tallied=tallied)
write_report_files(report, in_folder(out))
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
'''


def finish(path: Path, out: Path, whole: bool) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", FINISH, str(path), str(out), "whole" if whole else "digests"],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    seconds, kb = done.stdout.split()
    return float(seconds), int(kb) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=122_133)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--dir", default="", help="keep the results file there (and reuse it next time)")
    parser.add_argument("--whole", action="store_true", help="also build the report from whole rows, as before")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir) if args.dir else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"results-{args.cases}-{args.turns}.jsonl"
        if not path.is_file():
            started = time.perf_counter()
            size = write_rows(path, args.cases, args.turns)
            print(f"wrote {args.cases:,} rows ({size / 1e6:,.0f} MB, {size / args.cases:,.0f} B a row) in "
                  f"{time.perf_counter() - started:.0f} s")
        for whole in ((False, True) if args.whole else (False,)):
            seconds, mb = finish(path, Path(tmp) / ("whole" if whole else "digests"), whole)
            how = "whole rows in memory (before)" if whole else "digests, whole rows read again one at a time"
            print(f"end of a run, {args.cases:,} cases, {how}: peak RSS {mb:,.0f} MB, {seconds:.1f} s "
                  f"({mb * 1024 / args.cases:.2f} KB a case)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
