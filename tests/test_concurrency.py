"""--concurrency K: scenarios evaluated K at a time in threads of one process. Each scenario's
calls land in its own cassette (the cassette active in its own thread answers it), rows come out complete
and in case order, and a replay of what was recorded concurrently reproduces it."""

from __future__ import annotations

import json
import lzma
import time
from datetime import datetime
from pathlib import Path

from personalens_testkit.transcript_file import read_transcript

from .support.fake_llm import FakeLLM, Script, task_of
from .support.project import latest_results, suite_project, with_runs

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
SELECTION = ["--profiles", "7,53", "--domains", "Alarm,Books", "--max-turns", "2"]


def max_under_way(recorded: list[dict]) -> int:
    """The most scenarios under way at once, from the rows' start and end times (an end before a start at a tie)."""
    spans = sorted([(datetime.fromisoformat(r["started_at"]), 1) for r in recorded]
                   + [(datetime.fromisoformat(r["finished_at"]), -1) for r in recorded], key=lambda e: (e[0], e[1]))
    under_way = [sum(step for _, step in spans[:i + 1]) for i in range(len(spans))]
    return max(under_way)


def rows(pytester) -> list[dict]:
    latest = latest_results(pytester.path)
    return with_runs([json.loads(line) for line in latest.read_text().splitlines()])


def test_concurrent_scenarios_record_their_own_cassettes_and_replay(pytester, monkeypatch):
    suite_project(pytester)
    with FakeLLM(Script(terminate_after=2, echo_task=True, delay_s=0.2)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        recording = pytester.runpytest(*SPECS, *SELECTION, "--record-mode", "all", "--concurrency", "8")
    outcomes = recording.parseoutcomes()
    cases = outcomes["passed"]
    assert cases >= 12 and set(outcomes) <= {"passed", "deselected"}
    recorded = rows(pytester)
    # really concurrent: scenarios under way at once, from the rows' own spans, not a stopwatch (a busy machine is
    # slower) nor the calls in flight (one judge alone puts six in flight)
    assert max_under_way(recorded) >= 4
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
        try:
            verdict = Judge(model, parallel=parallel).judge(ctx, dialogue, log)
        finally:
            model.close()
        return verdict, log, fake.max_in_flight


def test_a_remote_judge_makes_its_six_calls_at_once_and_logs_them_in_order():
    from personalens_testkit.agents.judge import JUDGED_ORDER

    verdict, log, in_flight = _judge_once(6, Script(delay_s=0.3))
    sequential, sequential_log, one_at_a_time = _judge_once(1, Script(delay_s=0.3))
    assert (in_flight, one_at_a_time) == (6, 1)  # the server held all six at once (one at a time with parallel 1)
    assert verdict == sequential
    assert [r.label for r in log.records] == [r.label for r in sequential_log.records] == list(JUDGED_ORDER)


def test_a_failed_judge_call_among_parallel_ones_is_reported_as_the_first_in_order():
    import pytest

    from personalens_testkit.errors import ModelError

    with pytest.raises(ModelError, match=r"judge \(task_completion\).*HTTP 400"):
        _judge_once(6, Script(status=400))


def test_xdist_workers_each_evaluate_their_own_queue_concurrently(pytester, monkeypatch):
    """-n 2 --concurrency 4: each worker keeps four scenarios of its own queue under way (xdist's scheduler would
    leave a worker of long cases one or two), and every case is run, and written, exactly once."""
    suite_project(pytester)
    with FakeLLM(Script(terminate_after=2, echo_task=True, delay_s=0.2)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        result = pytester.runpytest_subprocess(*SPECS, *SELECTION, "--record-mode", "all", "-n", "2",
                                               "--concurrency", "4", "-p", "no:cacheprovider", "-v")
    result.stdout.fnmatch_lines(["scheduling tests via LanesScheduling"])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 12 and set(outcomes) <= {"passed", "deselected"}, result.stdout.str()[-2000:]
    recorded = rows(pytester)
    # scenarios under way at once (a judge alone puts six calls in flight: calls cannot tell): more than one worker's
    # four lanes, so both workers evaluated ahead (without, each has one case under way: two at most)
    assert max_under_way(recorded) > 4
    assert sorted(r["scenario_id"] for r in recorded) == sorted({r["scenario_id"] for r in recorded})
    assert len(recorded) == outcomes["passed"]
    # each worker appended its cases' transcripts to its own file from four lanes: each row finds its own, whole
    assert {Path(r["transcript_path"].rpartition(":")[0]).name for r in recorded} == {"gw0.txt", "gw1.txt"}
    for row in recorded:
        text = read_transcript(pytester.path / row["transcript_path"])
        assert text.startswith(f"# {row['scenario_id']}\n") and text.endswith("\n")
        assert [line.split(": ", 1)[0] for line in text.split("\n") if line.startswith(("USER: ", "ASSISTANT: "))] \
            == [turn["role"].upper() for turn in row["transcript"]]


def test_a_work_stealing_run_evaluates_no_case_ahead_and_writes_each_once(pytester, monkeypatch):
    """--dist worksteal takes queued cases back from a worker: the worker's queue is not read
    (plugin/xdist_queue.worker_queue gives None), each case is evaluated when pytest runs it, a row each."""
    suite_project(pytester)
    with FakeLLM(Script(terminate_after=2, echo_task=True)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        result = pytester.runpytest_subprocess(*SPECS, *SELECTION, "--record-mode", "all", "-n", "2", "--dist",
                                               "worksteal", "--concurrency", "4", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 12 and set(outcomes) <= {"passed", "deselected"}, result.stdout.str()[-2000:]
    recorded = rows(pytester)
    assert sorted(r["scenario_id"] for r in recorded) == sorted({r["scenario_id"] for r in recorded})
    assert len(recorded) == outcomes["passed"]


class _Worker:
    """What an xdist scheduler sees of a worker."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices) -> None:
        self.sent += list(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_lanes_scheduler_keeps_each_workers_queue_as_deep_as_its_lanes(pytester):
    from xdist.scheduler import LoadScheduling

    from personalens_testkit.plugin.xdist_queue import LanesScheduling

    config = pytester.parseconfig("--tx", "2*popen")

    def started(scheduler):
        workers = [_Worker("gw0"), _Worker("gw1")]
        for worker in workers:
            scheduler.add_node(worker)
        for worker in workers:
            scheduler.add_node_collection(worker, [f"case{i}" for i in range(100)])
        scheduler.schedule()
        return workers

    xdist = LoadScheduling(config)
    worker, _ = started(xdist)
    xdist.mark_test_complete(worker, worker.sent[0], duration=30.0)  # a live case takes long
    assert len(xdist.node2pending[worker]) == 11  # xdist waits until fewer than two are left

    lanes = LanesScheduling(config, lanes=8, folder=pytester.path / "queues")
    workers = started(lanes)
    assert [len(lanes.node2pending[w]) for w in workers] == [16, 16]
    assert workers[0].sent == list(range(0, 32, 2)) and workers[1].sent == list(range(1, 32, 2))  # dealt in turn
    lanes.mark_test_complete(workers[0], workers[0].sent[0], duration=30.0)
    assert len(lanes.node2pending[workers[0]]) == 16  # topped up at once
    while any(lanes.node2pending.values()):  # run everything: each case sent once, then every worker shut down
        for worker in workers:
            if lanes.node2pending[worker]:
                lanes.mark_test_complete(worker, lanes.node2pending[worker][0], duration=30.0)
    assert sorted(workers[0].sent + workers[1].sent) == list(range(100))
    assert all(w.shutting_down for w in workers) and lanes.tests_finished
    for worker in workers:  # each worker's queue file: what was sent to it, in order
        queue = (pytester.path / "queues" / worker.gateway.id).read_text().splitlines()
        assert queue == [f"case{i}" for i in worker.sent]


def test_a_workers_queue_is_what_was_sent_to_it_after_the_case_pytest_runs_now(tmp_path):
    from personalens_testkit.plugin.xdist_queue import _WorkerQueue

    path = tmp_path / "gw0"
    queue = _WorkerQueue(path)
    assert queue.upcoming() == []  # nothing sent yet (no file)
    path.write_text("a\nb\nc")  # "c" is being written: read once its line is whole
    assert queue.upcoming() == ["a", "b"]
    queue.pytest_runtest_logstart("a", None)
    assert queue.upcoming() == ["b"]
    with open(path, "a") as more:
        more.write("\nd\n")
    queue.pytest_runtest_logstart("b", None)
    assert queue.upcoming() == ["c", "d"]
    queue.pytest_runtest_logstart("d", None)
    assert queue.upcoming() == []


def test_every_lane_runs_in_the_callers_context_also_those_started_when_a_case_ends():
    """A case started from a finished case's callback runs on a pool thread: it still sees the caller's context
    (the progress hook's turn reporter lives there), not that thread's empty one."""
    import contextvars

    from personalens_testkit.run.concurrency import EvaluateAhead

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="lost")
    seen: dict[str, str] = {}

    def evaluate(scenario, rerecord, repeat):
        time.sleep(0.05)
        seen[scenario] = marker.get()
        return scenario

    marker.set("the caller's")
    cases = [(f"case-{i}", f"case-{i}", 1, "") for i in range(6)]
    ahead = EvaluateAhead(cases, evaluate, workers=2)
    try:
        assert [ahead.result(key) for key, *_ in cases] == [key for key, *_ in cases]
    finally:
        ahead.close()
    assert seen == {key: "the caller's" for key, *_ in cases}
