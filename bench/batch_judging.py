"""Judging on a provider's batch engine against judging online (issue 50): for the whole 50-profile sample, the judge's
calls and their estimated cost each way (the estimate, no call made); and, timed, the testkit's own work each way on
loopback fakes - the shipped recording's dialogues re-judged online (one call at a time, as a run makes them) against
submitted as a batch job and collected (the provider's own queue - minutes to 24 hours - is not in these figures).

    python bench/batch_judging.py [--model openai:gpt-4o-mini] [--repeat 3]

``--model``: the model every role is priced as in the estimate (a spec the price table knows).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from personalens_testkit.costs.prices import format_cost  # noqa: E402
from personalens_testkit.data import open_dataset  # noqa: E402
from personalens_testkit.run.cost_estimate import run_estimate  # noqa: E402
from personalens_testkit.settings.resolve import resolve_settings  # noqa: E402
from tests.support.fake_batch import FakeBatchAPI  # noqa: E402
from tests.support.fake_llm import FakeLLM, Script  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def estimates(model: str) -> None:
    dataset = open_dataset()
    cases = [(s, 1) for n in dataset.user_numbers() for s in dataset.scenarios_for(n)]
    print(f"the whole sample ({len(cases):,} scenarios), every role priced as {model}, recorded live (--record-mode all):")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("off", "submit"):
            settings = resolve_settings({"judge_model": model, "user_model": model, "assistant_model": model,
                                         "record_mode": "all", "judge_batch": mode}, Path(tmp), {})
            found = run_estimate(settings, dataset, cases)
            judge = next(r for r in found.roles if r.role == "judge")
            total = found.total_cost[1] if found.total_cost else float("nan")
            print(f"  judge {'online' if mode == 'off' else 'on the batch engine':<24} {round(judge.calls[1]):,} calls, "
                  f"{format_cost(judge.cost[1])} ({format_cost(judge.cost[0])} - {format_cost(judge.cost[2])}); "
                  f"the run's total {format_cost(total)}")


def _pytest(args: list[str], cwd: Path, url: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:deepeval",
                           "suites/", *args], cwd=cwd, capture_output=True, text=True,
                          env={**ENV, "OPENAI_BASE_URL": url})
    return time.perf_counter() - started, done.stdout + done.stderr


def timed(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cassettes = Path(tmp) / "cassettes"
        shutil.copytree(ROOT / "cassettes", cassettes)
        common = ["--judge-model", "openai:fake-judge", "--cassette-dir", str(cassettes), "--results-dir",
                  str(Path(tmp) / "results")]
        online, submit, collect, calls = [], [], [], 0
        for _ in range(repeat):
            with FakeLLM(Script()) as judge:
                wall, out = _pytest([*common, "--rejudge", "--record-mode", "all"], ROOT, judge.url)
                online.append(wall)
                calls = len([r for r in judge.requests if "response_format" in r])
            with FakeBatchAPI(answer=FakeLLM(Script()).answer, polls=1) as batch:
                wall, out = _pytest([*common, "--rejudge", "--judge-batch", "submit"], ROOT, batch.url)
                submit.append(wall)
                records = sum(len(u["lines"]) for u in batch.uploads)
                wall, out = _pytest([*common, "--judge-batch", "collect", "--batch-wait", "--batch-poll-s", "0.05"],
                                    ROOT, batch.url)
                collect.append(wall)
                scored = re.search(r"(\d+) passed", out)
        print(f"the shipped recording re-judged ({calls} judge calls online, {records} records in the batch job; "
              f"{scored.group(1) if scored else 0} cases scored from the batch; medians of {repeat}, whole processes):")
        print(f"  online: {statistics.median(online):.1f} s; batch: submit {statistics.median(submit):.1f} s + collect "
              f"{statistics.median(collect):.1f} s (the provider's queue not counted)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai:gpt-4o-mini")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    estimates(args.model)
    timed(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
