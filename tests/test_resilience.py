"""Nothing lost: a run killed with SIGKILL leaves every finished row readable and no cassette
half-written, and ``--resume`` finishes it; ``--shard I/N`` splits a run deterministically and
``personalens merge`` joins the shards into one report with the same gates."""

from __future__ import annotations

import json
import lzma
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from personalens_testkit.cli import main as cli

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_results as latest_results_of, read_rows, suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
SELECTION = ["--profiles", "7", "--domains", "Alarm,Books", "--max-turns", "1"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return suite_project(pytester)


def latest_results(project: pytest.Pytester) -> Path:
    return latest_results_of(project.path)


def test_kill_minus_nine_loses_no_finished_row_and_resume_finishes_the_run(project):
    with FakeLLM(Script(terminate_after=1, delay_s=0.05)) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.url}
        command = [sys.executable, "-m", "pytest", *SPECS, *SELECTION, "--record-mode", "once", "-p", "no:cacheprovider"]
        process = subprocess.Popen(command, cwd=project.path, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = list(project.path.glob("personalens-results/*/results.jsonl"))
            if found and len(read_rows(found[0])) >= 3:
                break
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        results = latest_results(project)
        finished = read_rows(results)  # every complete line parses; a torn last line is skipped
        assert len(finished) >= 3
        for cassette in (project.path / "cassettes" / "reference").glob("*.json.xz"):
            assert json.loads(lzma.decompress(cassette.read_bytes()))["interactions"]  # none half-written

        project._monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # noqa: SLF001
        resumed = project.runpytest(*SPECS, *SELECTION, "--record-mode", "once", "--resume", str(results))
    header = next(line for line in resumed.stdout.lines if line.startswith("personalens: resuming"))
    assert header.startswith(f"personalens: resuming {results}: {len(finished)} scored cases kept, ")
    to_run = int(header.split(", ")[-1].split()[0])
    total = len(finished) + to_run
    assert total == 9 and to_run > 0  # user7 has 9 Alarm and Books tasks
    resumed.assert_outcomes(passed=to_run, deselected=1 + len(finished))  # the kept rows' cases: found, not run
    rows = read_rows(latest_results(project))
    assert sorted(r["scenario_id"] for r in rows) == sorted({r["scenario_id"] for r in rows}) and len(rows) == total
    report = json.loads((latest_results(project).parent / "report.json").read_text())
    assert report["counts"]["cases"] == total


def test_shards_split_deterministically_and_merge_into_the_same_report(project, tmp_path, capsys):
    with FakeLLM(Script(terminate_after=1)) as fake:
        project._monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # noqa: SLF001
        whole = project.runpytest(*SPECS, *SELECTION, "--record-mode", "all")
        whole_rows = read_rows(latest_results(project))
        whole_report = json.loads((latest_results(project).parent / "report.json").read_text())
        shards = []
        for i in (1, 2, 3):
            run = project.runpytest(*SPECS, *SELECTION, "--record-mode", "all", "--shard", f"{i}/3")
            run.stdout.fnmatch_lines([f"personalens: shard {i}/3: * cases of this slice*"])
            shards.append(latest_results(project))
    whole.assert_outcomes(passed=9, deselected=1)
    ids = [sorted(r["scenario_id"] for r in read_rows(p)) for p in shards]
    assert sorted(sum(ids, [])) == sorted(r["scenario_id"] for r in whole_rows)  # together: every case, once
    assert all(ids) and not set(ids[0]) & set(ids[1])
    merged = tmp_path / "merged.jsonl"
    assert cli(["merge", *map(str, shards), "--output", str(merged), "--json", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert f"merged 9 cases from 3 files -> {merged}" in out and "single-domain        9       0     0" in out
    merged_report = json.loads((tmp_path / "m.json").read_text())
    assert [g["passed"] for g in merged_report["gates"]] == [g["passed"] for g in whole_report["gates"]]
    assert merged_report["aggregates"]["sd"]["metrics"] == whole_report["aggregates"]["sd"]["metrics"]


@pytest.mark.parametrize("value, message", [("3/2", "I must be from 1 to N"), ("1-2", "expected I/N")])
def test_bad_shards_are_one_line_errors(project, value, message):
    result = project.runpytest(*SPECS, "--shard", value, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --shard: {message}*"])
