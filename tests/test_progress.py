"""Progress of a live run: done/total with the time left as cases finish (with -n too), the turn each
running case has reached, and nothing at all in a pure replay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from personalens_testkit.callsite import CURRENT_CASE, ON_PROGRESS, step
from personalens_testkit.run.header import workers_line
from personalens_testkit.run.progress import INTERVAL_ENV, Progress, Running, TurnChannel, interval_s

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_due_by_interval_and_estimate_the_time_left():
    clock = Clock()
    progress = Progress(10, interval_s=30, clock=clock)
    clock.now = 20
    progress.running.on_turn("user7-SD-Alarm-task-2", 3, 20)
    assert progress.finished("user7-SD-Alarm-task-1", "pass") is None  # within the interval: quiet
    assert progress.tick() is None
    clock.now = 60
    assert progress.tick() == ("personalens: 1/10 cases done (1 pass) in 60 s, about 9 min left; running: "
                               "user7-SD-Alarm-task-2 turn 3 of 20")
    clock.now = 120
    assert progress.finished("user7-SD-Alarm-task-2", "regression") == (
        "personalens: 2/10 cases done (1 pass, 1 regression) in 2 min, about 8 min left")
    assert progress.cases_running() == []
    for n in range(3, 11):
        line = progress.finished(f"user7-SD-Alarm-task-{n}", "pass")
    assert line == "personalens: 10/10 cases done (9 pass, 1 regression) in 2 min"  # the last case always has a line


@pytest.mark.parametrize("spread", [[], ["-n", "2"]])
def test_a_live_run_shows_its_progress_and_a_replay_does_not(pytester, spread):
    suite_project(pytester)
    with FakeLLM(Script(terminate_after=1)) as fake:
        pytester._monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # noqa: SLF001
        live = pytester.runpytest_subprocess(*SPECS, "--profiles", "7", "--domains", "Alarm", "--record-mode", "all",
                                             *spread)
        replay = pytester.runpytest_subprocess(*SPECS, "--profiles", "7", "--domains", "Alarm", *spread)
    live.stdout.fnmatch_lines(["personalens: 4/4 cases done (4 pass) in * s"])
    assert replay.parseoutcomes()["passed"] == 4 and "cases done" not in replay.stdout.str()


def test_the_running_cases_are_shown_oldest_first_with_the_workers_and_without_those_finished(tmp_path):
    clock = Clock()
    progress = Progress(8, interval_s=5, clock=clock)
    progress.running.on_turn("user7-SD-Alarm-task-4", 1, 20)  # this process's, started at 0
    worker = Running(clock)
    for now, sid in ((1, "user7-SD-Alarm-task-2"), (2, "user7-SD-Alarm-task-3"), (3, "user7-MD-task-1"),
                     (4, "user7-SD-Alarm-task-1")):
        clock.now = now
        worker.on_turn(sid, 0, 20)
    worker.on_turn("user7-SD-Alarm-task-2", 5, 20)
    channel = TurnChannel(tmp_path)
    channel.publish("gw0", worker.snapshot())
    progress.remote = channel.read()
    clock.now = 5
    assert progress.tick() == ("personalens: 0/8 cases done in 5 s; running: user7-SD-Alarm-task-4 turn 1 of 20; "
                               "user7-SD-Alarm-task-2 turn 5 of 20; user7-SD-Alarm-task-3 turn 0 of 20 and 2 more")
    clock.now = 6
    progress.finished("test_single_domain[user7-SD-Alarm-task-2]", "pass")  # the worker's snapshot still has it
    assert [sid for sid, _ in progress.cases_running()] == [
        "user7-SD-Alarm-task-4", "user7-SD-Alarm-task-3", "user7-MD-task-1", "user7-SD-Alarm-task-1"]


def test_the_interval_is_5_s_on_a_terminal_30_s_off_one_and_an_environment_variable_overrides_both():
    assert (interval_s(True, {}), interval_s(False, {})) == (5.0, 30.0)
    assert interval_s(False, {INTERVAL_ENV: "0.5"}) == interval_s(True, {INTERVAL_ENV: "0.5"}) == 0.5
    assert interval_s(False, {INTERVAL_ENV: "soon"}) == interval_s(False, {INTERVAL_ENV: "0"}) == 30.0


def test_more_xdist_workers_than_cores_get_a_line_with_what_to_use_instead():
    assert workers_line(2, 1, embedded=False, cores=2) is None
    assert workers_line(16, 1, embedded=False, cores=2) == (
        "-n 16 on 2 cores: each xdist worker is a whole pytest process (about 115 MB, seconds of CPU to start); "
        "for a model-bound run use -n 2 --concurrency 8 (8 scenarios at once in threads of each worker), or "
        "--concurrency auto without -n")
    assert workers_line(3, 2, embedded=False, cores=2).endswith("use -n 2 --concurrency 3 (3 scenarios at once in "
                                                                "threads of each worker), or --concurrency auto without -n")
    assert workers_line(4, 1, embedded=True, cores=2) == (
        "-n 4 on 2 cores: each xdist worker is a whole pytest process (about 115 MB, seconds of CPU to start), and "
        "the embedded model serves one scenario at a time: run without -n")


def test_a_line_says_what_each_case_waits_on_and_for_how_long_and_what_the_run_waits_on_before_any_case(tmp_path):
    clock = Clock()
    progress = Progress(4, interval_s=30, clock=clock)
    listening = ON_PROGRESS.set(progress.running)
    try:
        with step("the embedded model of the judge to start (up to 120 s)"):  # the run's own, before any case
            clock.now = 40
            assert progress.tick() == ("personalens: 0/4 cases done in 40 s; running: waiting 40 s for the embedded "
                                       "model of the judge to start (up to 120 s)")
        assert progress.cases_running() == []  # the run's own step is gone once over
        case = CURRENT_CASE.set("user7-SD-Alarm-task-1")
        try:
            with step("the embedded model of the user agent to start (up to 120 s)"):
                clock.now = 75
                assert progress.tick() == (
                    "personalens: 0/4 cases done in 75 s; running: user7-SD-Alarm-task-1 starting, waiting 35 s for "
                    "the embedded model of the user agent to start (up to 120 s)")
            progress.running.on_turn("user7-SD-Alarm-task-1", 14, 20)
            with step("the assistant (reply, turn 15)"):
                clock.now = 300
                assert progress.tick() == ("personalens: 0/4 cases done in 5 min; running: user7-SD-Alarm-task-1 "
                                           "turn 14 of 20, waiting 4 min for the assistant (reply, turn 15)")
                running = progress.running  # parallel calls end in any order: the latest still under way shows
                running.step_started("user7-SD-Alarm-task-1", "the judge (task completion)")
                clock.now = 310
                running.step_started("user7-SD-Alarm-task-1", "the judge (personalization)")
                clock.now = 350
                running.step_ended("user7-SD-Alarm-task-1", "the judge (task completion)")
                assert progress.tick().endswith("turn 14 of 20, waiting 40 s for the judge (personalization)")
                running.step_ended("user7-SD-Alarm-task-1", "the judge (personalization)")
                clock.now = 430
                assert progress.tick().endswith("turn 14 of 20, waiting 6 min for the assistant (reply, turn 15)")
        finally:
            CURRENT_CASE.reset(case)
    finally:
        ON_PROGRESS.reset(listening)
    clock.now = 500
    assert progress.tick() == "personalens: 0/4 cases done in 8 min; running: user7-SD-Alarm-task-1 turn 14 of 20"
    channel = TurnChannel(tmp_path)  # a worker's steps reach the controller whole
    channel.publish("gw0", progress.running.snapshot())
    assert channel.read() == {"gw0": progress.running.snapshot()}


def test_a_live_run_says_while_the_models_start_and_while_a_call_takes_long(pytester):
    suite_project(pytester)
    pytester._monkeypatch.setenv(INTERVAL_ENV, "0.5")  # noqa: SLF001
    starting = pytester.runpytest_subprocess("-p", "no:deepeval", "--local-url", "http://127.0.0.1:9/v1", "--profiles",
                                             "7", "--domains", "Alarm", "--stop-after-errors", "1", "--record-mode", "all")
    starting.stdout.fnmatch_lines(["personalens: 0/4 cases done in * s; running: user7-SD-Alarm-task-1 starting, "
                                   "waiting * s for the embedded model of the assistant to start (up to 10 s)"])
    with FakeLLM(Script(terminate_after=1, delay_s=1.5)) as fake:
        pytester._monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # noqa: SLF001
        slow = pytester.runpytest_subprocess(*SPECS, "--profiles", "7", "--domains", "Alarm", "-k", "task-1",
                                             "--record-mode", "all", "-n", "2")  # a worker's steps, published
    slow.stdout.fnmatch_lines(["personalens: 0/1 cases done in * s; running: user7-SD-Alarm-task-1 *, waiting 1 s "
                               "for the * (*)"])


def test_a_run_on_fewer_cores_than_its_workers_says_so_in_its_header(tmp_path):
    """The header's line, from a real run held to one core (its CPU affinity, as a container would)."""
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/", "-n", "2", "-p", "no:cacheprovider", "--profiles",
                           "7", "--domains", "Alarm", "--results-dir", str(tmp_path)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    assert done.returncode == 0, done.stdout[-3000:]
    assert ("personalens: -n 2 on 1 core: each xdist worker is a whole pytest process (about 115 MB, seconds of CPU "
            "to start); for a model-bound run use --concurrency 2 (scenarios at once in threads of one process), or "
            "--concurrency auto without -n") in done.stdout.splitlines()
