"""Judging on a provider's batch engine against judging online (issue 50): for the whole 50-profile sample, the judge's
calls and their estimated cost each way (the estimate, no call made); and, timed, the testkit's own work each way on
loopback fakes - the shipped recording's dialogues re-judged online (one call at a time, as a run makes them) against
submitted as a batch job and collected (the provider's own queue - minutes to 24 hours - is not in these figures), for
an OpenAI-compatible judge (the Batch API) and for a Bedrock judge (batch inference through S3, boto3's own clients
against a loopback fake of S3 and Bedrock).

    python bench/batch_judging.py [--model openai:gpt-4o-mini] [--bedrock-model bedrock:anthropic...] [--repeat 3]

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
from tests.support.fake_bedrock_batch import FakeBedrockBatch  # noqa: E402
from tests.support.fake_llm import FakeLLM, Script, _chat_from_converse, _converse_answer  # noqa: E402

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


def _pytest(args: list[str], cwd: Path, url: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:deepeval",
                           "suites/", *args], cwd=cwd, capture_output=True, text=True,
                          env={**ENV, "OPENAI_BASE_URL": url, **(env or {})})
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


BEDROCK_JUDGE = "meta.llama3-70b-instruct-v1:0"
AWS = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
       "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


def timed_bedrock(repeat: int) -> None:
    """The same on a Bedrock judge (a [models] entry with json_mode "none" and the batch role and S3 location): online
    its Converse calls to a loopback server, in batch a job through S3 - boto3's own clients, a loopback fake of both."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        shutil.copytree(ROOT / "cassettes", project / "cassettes")
        shutil.copytree(ROOT / "suites", project / "suites", ignore=shutil.ignore_patterns("__pycache__"))
        (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:deepeval\n")
        common = ["--judge-model", "bench-judge", "--cassette-dir", str(project / "cassettes")]
        judge = FakeLLM(Script())

        def answer(model_input: dict) -> dict:
            chat = _chat_from_converse(model_input)
            return _converse_answer(chat, judge.answer(chat))

        online, submit, collect, calls, jobs = [], [], [], 0, 0
        for _ in range(repeat):
            with FakeLLM(Script()) as runtime, FakeBedrockBatch(answer, polls=1) as batch:
                (project / "personalens.toml").write_text(
                    f'[models.bench-judge]\nkind = "bedrock"\nmodel = "{BEDROCK_JUDGE}"\nregion = "us-east-1"\n'
                    f'json_mode = "none"\nendpoint_url = "{runtime.url.removesuffix("/v1")}"\n'
                    'batch_role_arn = "arn:aws:iam::123456789012:role/bench"\nbatch_s3 = "s3://bench-bucket/runs/"\n')
                env = {**AWS, "AWS_ENDPOINT_URL_S3": batch.url, "AWS_ENDPOINT_URL_BEDROCK": batch.url}
                wall, out = _pytest([*common, "--rejudge", "--record-mode", "all"], project, runtime.url, env)
                online.append(wall)
                calls = len(runtime.requests)
                wall, out = _pytest([*common, "--rejudge", "--judge-batch", "submit"], project, runtime.url, env)
                submit.append(wall)
                jobs = len(batch.jobs)
                wall, out = _pytest([*common, "--judge-batch", "collect", "--batch-wait", "--batch-poll-s", "0.05"],
                                    project, runtime.url, env)
                collect.append(wall)
                scored = re.search(r"(\d+) passed", out)
        print(f"the same on a Bedrock judge ({BEDROCK_JUDGE}, free text; {calls} Converse calls online, {jobs} "
              f"batch inference job(s) through S3; {scored.group(1) if scored else 0} cases scored from the batch; "
              f"medians of {repeat}):")
        print(f"  online: {statistics.median(online):.1f} s; batch: submit {statistics.median(submit):.1f} s + collect "
              f"{statistics.median(collect):.1f} s (the provider's queue not counted)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai:gpt-4o-mini")
    parser.add_argument("--bedrock-model", default="bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    estimates(args.model)
    estimates(args.bedrock_model)
    timed(args.repeat)
    timed_bedrock(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
