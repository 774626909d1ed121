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
