"""An interrupted run is "interrupted" everywhere - report.json, summary.md, JUnit, the verdict line, the gate's
manifest - with how many of its selected cases ran, never "passed"; whatever a bot raises (a BaseException of any
kind included) is an error row of the bot, never the run's end. Rows written == cases run under each."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from personalens_testkit.agents.judge import Judge
from personalens_testkit.agents.user_agent import UserAgent
from personalens_testkit.assistants.reference import ReferenceAssistant
from personalens_testkit.data import open_dataset
from personalens_testkit.evaluation import Evaluator
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
from personalens_testkit.gating.verdict import NotRun, run_verdict
from personalens_testkit.report.markdown import render_markdown
from personalens_testkit.report.model import build_report

from .support.fake_llm import FakeLLM, Script
from .support.scripted import ScriptedModel
from .test_reliability import ALARM, LIVE, assert_rows_are_cases, project, python_entry, run_bot
from .support.project import with_runs

SLOW = "import time\ndef reply(request):\n    time.sleep(0.4)\n    return 'Done, the way you like it.'\n"


def _rows(path: Path) -> list[dict]:
    return with_runs([json.loads(line) for line in path.read_text().splitlines() if line.strip()]) if path.is_file() else []


@pytest.mark.parametrize(("sent", "narrowed", "selected"), [
    (signal.SIGINT, [], 4), (signal.SIGTERM, [], 4),
    # pytest's own selection (-k, node ids) narrows the settings' four to three: counted against those three
    (signal.SIGINT, ["-k", "not task-4"], 3),
], ids=["ctrl-c", "sigterm", "ctrl-c-of-a-narrowed-selection"])
def test_ctrl_c_after_two_cases_is_interrupted_in_every_output_never_passed(pytester, tmp_path, sent, narrowed,
                                                                           selected):
    """Ctrl-C, and SIGTERM (a cancelled CI job, `timeout`): the run ends interrupted, keeping what finished."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, python_entry("slow", SLOW, tmp_path))
        process = subprocess.Popen([sys.executable, "-m", "pytest", "--assistant", "slow", *ALARM, *LIVE, *narrowed,
                                    "-p", "no:cacheprovider"], cwd=pytester.path,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        results = None
        while time.monotonic() < deadline:
            found = list(pytester.path.glob("personalens-results/*/results.jsonl"))
            if found and len(_rows(found[0])) >= 2:
                results = found[0]
                break
            time.sleep(0.05)
        assert results is not None, "no two rows within 120 s"
        process.send_signal(sent)
        try:
            output, _ = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode == 2, output[-3000:]
    rows = _rows(results)
    assert 2 <= len(rows) < selected  # the case under way when Ctrl-C came is not a row: it did not run to its end
    folder = results.parent
    report = json.loads((folder / "report.json").read_text())
    assert report["verdict"]["outcome"] == "interrupted"
    assert report["verdict"]["headline"].startswith(f"interrupted - {len(rows)} of the {selected} selected case(s) ran")
    summary = (folder / "summary.md").read_text().splitlines()
    assert summary[0].startswith(f"## PersonaLens: interrupted - {len(rows)} of the {selected} selected")
    assert "passed" not in summary[2]
    checks = {case.get("name"): case for case in ET.parse(folder / "junit.xml").getroot().iter("testcase")}
    assert checks["interrupted"].find("failure") is not None
    assert "personalens: verdict: INTERRUPTED, fails the run" in output


def test_a_run_that_is_not_interrupted_is_never_called_interrupted(pytester, tmp_path):
    result, rows = run_bot(pytester, "slow", python_entry("slow", SLOW.replace("0.4", "0"), tmp_path))
    assert_rows_are_cases(result, rows)
    assert "INTERRUPTED" not in result.stdout.str() and result.ret == 0


@pytest.mark.parametrize("raises", [
    "raise KeyboardInterrupt()",
    "raise SystemExit(0)",
    "raise GeneratorExit()",
    "class Mine(BaseException):\n        pass\n    raise Mine('down')",
    "import pytest\n    pytest.skip('not today')",
    "import pytest\n    pytest.exit('bye')",
])
def test_whatever_a_python_bot_raises_is_an_error_row_of_the_bot(pytester, tmp_path, raises):
    source = f"def reply(request):\n    {raises}\n"
    result, rows = run_bot(pytester, "raiser", python_entry("raiser", source, tmp_path))
    assert_rows_are_cases(result, rows)
    assert len(rows) == 4 and result.ret == 1, result.stdout.str()[-2000:]
    for row in rows:
        assert row["status"] == "error" and row["error"]["source"] == "assistant", row["error"]


def test_an_async_bot_cancelled_is_an_error_row_of_the_bot(pytester, tmp_path):
    source = "import asyncio\nasync def reply(request):\n    raise asyncio.CancelledError()\n"
    result, rows = run_bot(pytester, "cancelled", python_entry("cancelled", source, tmp_path))
    assert_rows_are_cases(result, rows)
    assert len(rows) == 4 and all(row["error"]["source"] == "assistant" for row in rows)
    assert "CancelledError" in rows[0]["error"]["message"]


def test_the_verdict_of_an_interrupted_run_is_interrupted_whatever_its_cases_showed():
    thresholds = load_thresholds(default_thresholds_path())
    stopped = NotRun(6, "2 of the 8 selected case(s) ran", interrupted=True)
    verdict = run_verdict([], [], thresholds.aggregate, not_run=stopped)
    assert verdict.outcome == "interrupted" and not verdict.passed
    assert verdict.headline == "interrupted - 2 of the 8 selected case(s) ran"
    assert [c.name for c in verdict.checks if c.outcome == "failed"] == ["interrupted"]
    report = build_report([], thresholds, not_run=stopped)
    assert report.counts["not_run"] == 6
    assert render_markdown(report).startswith("## PersonaLens: interrupted - 2 of the 8")
    assert run_verdict([], [], thresholds.aggregate, not_run=stopped._replace(interrupted=False)).outcome != "interrupted"


class _Raising:
    """A chat model that raises ``exc`` on its first call (a backend failing in a way nobody foresaw)."""

    spec = "raising"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def complete(self, request):
        raise self.exc

    def close(self) -> None:
        pass


@pytest.mark.parametrize("exc", [asyncio.CancelledError(), GeneratorExit(), SystemExit(3), type("Odd", (BaseException,), {})()])
def test_an_evaluation_records_any_base_exception_as_the_cases_error(exc):
    dataset = open_dataset()
    scenario = dataset.scenarios_for(7)[0]
    evaluator = Evaluator(dataset=dataset, user_agent=UserAgent(_Raising(exc)),
                          assistant=ReferenceAssistant(ScriptedModel(["ok"])), judge=Judge(ScriptedModel()))
    evaluation = evaluator.evaluate(scenario)
    assert evaluation.error is not None and evaluation.error.kind == type(exc).__name__


def test_ctrl_c_inside_an_evaluation_ends_the_run():
    dataset = open_dataset()
    evaluator = Evaluator(dataset=dataset, user_agent=UserAgent(_Raising(KeyboardInterrupt())),
                          assistant=ReferenceAssistant(ScriptedModel(["ok"])), judge=Judge(ScriptedModel()))
    with pytest.raises(KeyboardInterrupt):
        evaluator.evaluate(dataset.scenarios_for(7)[0])
