"""End to end through the real embedded model: a suite case runs a dialogue on llama.cpp and is
judged, recorded in a cassette, then replayed offline with no model server at all.

About a minute on two cores. It asserts the machinery (a real dialogue, six parsed judge
scores on the benchmark's scales, a full result row, servers gone afterwards, a replay that
reproduces the scores), never the quality of the 135M model's verdicts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .support.project import latest_results
SUITES = Path(__file__).resolve().parent.parent / "suites"
ARGS = ("-p", "no:deepeval", "--profiles", "7", "--domains", "Alarm", "-k", "task-1", "--max-turns", "1",
        "-W", "ignore::pytest.PytestAssertRewriteWarning", "-o", "asyncio_default_fixture_loop_scope=function")


def _servers_running() -> set[str]:
    out = subprocess.run(["pgrep", "-f", "llama_cpp.server"], capture_output=True, text=True).stdout
    return set(out.split())


@pytest.mark.live
def test_a_scenario_runs_live_on_the_embedded_model(pytester: pytest.Pytester):
    shutil.copy(SUITES / "test_single_domain.py", pytester.path)
    before = _servers_running()
    result = pytester.runpytest_subprocess(
        *ARGS, "--record-mode", "once", timeout=900,
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, result.stdout.str()[-3000:]
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert row["scenario_id"] == "user7-SD-Alarm-task-1" and row["status"] in ("passed", "failed")
    assert (row["user_model"], row["judge_model"], row["assistant_model"]) == ("local", "local", "local")
    scores = row["scores"]
    assert isinstance(scores["task_completion"], bool) and 1 <= scores["personalization"] <= 4
    assert all(1 <= scores[k] <= 5 for k in ("naturalness_user", "naturalness_assistant", "coherence_user", "coherence_assistant"))
    assert row["turns"] == 1 and [m["role"] for m in row["transcript"]][:2] == ["user", "assistant"]
    assert all(m["content"].strip() for m in row["transcript"])
    judge_calls = [c for c in row["calls"] if c["role"] == "judge"]
    assert len(judge_calls) == 6 and all(c["prompt_tokens"] > 100 and c["completion_tokens"] > 0 for c in judge_calls)
    assert all(c["prompt_tokens"] > 0 for c in row["calls"])
    logs = sorted(p.name for p in results.parent.glob("embedded-server-*.log"))
    assert [name.rsplit("-", 1)[1] for name in logs] == ["assistant.log", "judge.log", "user_agent.log"]
    assert _servers_running() <= before, "an embedded server was left running"

    # the recording replays offline: no server is started, and the scores are reproduced
    assert (pytester.path / "cassettes" / "reference" / "user7-SD-Alarm-task-1.json.xz").is_file()
    replay = pytester.runpytest_subprocess(*ARGS, timeout=300)
    replay.stdout.fnmatch_lines(["personalens: replaying 1 of 4 selected scenarios offline from *"])
    assert replay.parseoutcomes().get("passed") == 1, replay.stdout.str()[-3000:]
    latest = latest_results(pytester.path)
    (again,) = [json.loads(line) for line in latest.read_text().splitlines()]
    assert again["scores"] == row["scores"] and again["transcript"] == row["transcript"]
    assert not list(latest.parent.glob("embedded-server-*.log")), "a replay started a model server"
