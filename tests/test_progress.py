"""Progress of a live run: done/total with the time left as cases finish (with -n too), the turn each
running case has reached, and nothing at all in a pure replay."""

from __future__ import annotations

import pytest

from personalens_testkit.run.progress import Progress

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
    progress.on_turn("user7-SD-Alarm-task-2", 3, 20)
    assert progress.finished("user7-SD-Alarm-task-1", "pass") is None  # within the interval: quiet
    assert progress.tick() is None
    clock.now = 60
    assert progress.tick() == ("personalens: 1/10 cases done (1 pass) in 60 s, about 9 min left; running: "
                               "user7-SD-Alarm-task-2 turn 3 of 20")
    clock.now = 120
    assert progress.finished("user7-SD-Alarm-task-2", "regression") == (
        "personalens: 2/10 cases done (1 pass, 1 regression) in 2 min, about 8 min left")
    assert progress.running == {}
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
