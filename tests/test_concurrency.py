"""--concurrency K: scenarios evaluated K at a time in threads of one process. Each scenario's
calls land in its own cassette (vcrpy's patches are routed per thread), rows come out complete
and in case order, and a replay of what was recorded concurrently reproduces it."""

from __future__ import annotations

import json
import lzma
import time

from .support.fake_llm import FakeLLM, Script, task_of
from .support.project import latest_results, suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
SELECTION = ["--profiles", "7,53", "--domains", "Alarm,Books", "--max-turns", "2"]


def rows(pytester) -> list[dict]:
    latest = latest_results(pytester.path)
    return [json.loads(line) for line in latest.read_text().splitlines()]


def test_concurrent_scenarios_record_their_own_cassettes_and_replay(pytester, monkeypatch):
    suite_project(pytester)
    with FakeLLM(Script(terminate_after=2, echo_task=True, delay_s=0.2)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        started = time.perf_counter()
        recording = pytester.runpytest(*SPECS, *SELECTION, "--record-mode", "all", "--concurrency", "8")
        wall = time.perf_counter() - started
    outcomes = recording.parseoutcomes()
    cases = outcomes["passed"]
    assert cases >= 12 and set(outcomes) <= {"passed", "deselected"}
    assert fake.max_in_flight >= 4  # really concurrent
    assert wall < len(fake.requests) * 0.2 / 3  # far below one call after the other
    recorded = rows(pytester)
    assert len({r["scenario_id"] for r in recorded}) == len(recorded) == cases  # every case, once
    # every cassette holds its own scenario's calls only (the user agent quotes its task in each message)
    for row in recorded:
        cassette = pytester.path / row["cassette"]
        stored = json.loads(lzma.decompress(cassette.read_bytes()))
        intents = {task_of(json.loads(i["request"]["body"])["messages"][-1]["content"])
                   for i in stored["interactions"] if "playing the part" in i["request"]["body"]}
        assert len(intents) == 1, (row["scenario_id"], intents)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    replay = pytester.runpytest(*SPECS, *SELECTION, "--concurrency", "8")
    assert replay.parseoutcomes()["passed"] == cases
    assert [(r["scenario_id"], r["scores"], r["transcript"]) for r in rows(pytester)] == \
        [(r["scenario_id"], r["scores"], r["transcript"]) for r in recorded]


def _judge_once(parallel: int, script: Script):
    from personalens_testkit.agents.calls import CallLog
    from personalens_testkit.agents.judge import Judge
    from personalens_testkit.data import open_dataset
    from personalens_testkit.data.context import build_context
    from personalens_testkit.llm.base import Message
    from personalens_testkit.llm.openai_compat import OpenAICompatibleChat

    dataset = open_dataset()
    ctx = build_context(dataset, next(s for s in dataset.scenarios_for(7) if s.task.task_id == "SD-Alarm-task-1"))
    dialogue = [Message("user", "Can you set my alarm?"), Message("assistant", "Sure, for when?")]
    log = CallLog()
    with FakeLLM(script) as fake:
        model = OpenAICompatibleChat(spec="openai:fake-judge", base_url=fake.url, model="fake-judge")
        started = time.perf_counter()
        try:
            verdict = Judge(model, parallel=parallel).judge(ctx, dialogue, log)
        finally:
            model.close()
        return verdict, log, time.perf_counter() - started, fake.max_in_flight


def test_a_remote_judge_makes_its_six_calls_at_once_and_logs_them_in_order():
    from personalens_testkit.agents.judge import JUDGED_ORDER

    verdict, log, wall, in_flight = _judge_once(6, Script(delay_s=0.3))
    sequential, sequential_log, sequential_wall, _ = _judge_once(1, Script(delay_s=0.3))
    assert in_flight == 6 and wall < 2 * 0.3 < 6 * 0.3 <= sequential_wall
    assert verdict == sequential
    assert [r.label for r in log.records] == [r.label for r in sequential_log.records] == list(JUDGED_ORDER)


def test_a_failed_judge_call_among_parallel_ones_is_reported_as_the_first_in_order():
    import pytest

    from personalens_testkit.errors import ModelError

    with pytest.raises(ModelError, match=r"judge \(task_completion\).*HTTP 400"):
        _judge_once(6, Script(status=400))
