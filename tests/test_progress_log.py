"""Progress reaches a piped log while a case runs (a CI log): the line naming the running case's turn comes
before the case finishes, without -n (pytest's capture of the running case cannot hold it back) and with -n
(the worker publishes its turns for the controller). And a run given more xdist workers than usable cores says
so at its start."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
#: one single-domain case of 4 turns, each two model calls of 0.3 s: about 3 s
CASE = ["--profiles", "7", "--domains", "Alarm", "--task-kind", "sd", "-k", "user7-SD-Alarm-task-1", "--max-turns", "4",
        "--record-mode", "all"]
RUNNING = re.compile(r"^personalens: 0/1 cases done in \d+ s; running: user7-SD-Alarm-task-1 turn \d of 4"
                     r"(, waiting \d+ s for the (user agent|assistant|judge) \(.+\))?$")
DONE = re.compile(r"^personalens: 1/1 cases done \(1 pass\) in \d+ s$")


def _lines(proc: subprocess.Popen[str]) -> list[tuple[float, str]]:
    """The subprocess's output lines as they arrive on the pipe, each with the time it was read."""
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=120)
    finally:
        proc.kill()
    reader.join(timeout=10)
    return lines


@pytest.mark.parametrize("spread", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_the_running_cases_turn_reaches_a_piped_log_before_the_case_ends(pytester, spread):
    suite_project(pytester)
    with FakeLLM(Script(terminate_after=None, delay_s=0.3)) as fake:
        # a block-buffered stdout, as in a CI log (PYTHONUNBUFFERED set to nothing does not apply), and a line due
        # every half second
        env = dict(os.environ, OPENAI_BASE_URL=fake.url, PERSONALENS_PROGRESS_INTERVAL_S="0.5", PYTHONUNBUFFERED="")
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *SPECS, *CASE, *spread], cwd=pytester.path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = _lines(proc)
    output = "\n".join(text for _, text in lines)
    assert proc.returncode == 0, output
    running = [i for i, (_, text) in enumerate(lines) if RUNNING.match(text)]
    done = [i for i, (_, text) in enumerate(lines) if DONE.match(text)]
    assert running and done, output
    assert running[0] < done[0], output  # on the pipe while the case ran, not held back to its end
    assert lines[done[0]][0] - lines[running[0]][0] > 0.3, output  # and read as it came, well before the case ended


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_more_workers_than_cores_says_so_at_the_start(pytester):
    suite_project(pytester)
    env = dict(os.environ, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    first = min(os.sched_getaffinity(0))
    command = [sys.executable, "-m", "pytest", *SPECS, "--profiles", "7", "--domains", "Alarm", "-n", "2",
               "--record-mode", "all", "--collect-only"]  # xdist starts no worker to collect only: a cheap run
    proc = subprocess.run(command, cwd=pytester.path, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: os.sched_setaffinity(0, {first}))  # one usable core
    lines = proc.stdout.splitlines()
    expected = ("personalens: -n 2 on 1 core: each xdist worker is a whole pytest process (about 115 MB, seconds of "
                "CPU to start); for a model-bound run use --concurrency 2 (scenarios at once in threads of one process), "
                "or --concurrency auto without -n")
    assert expected in lines, proc.stdout + proc.stderr
    assert lines.index(expected) < next(i for i, line in enumerate(lines) if line.startswith("collected"))  # at the start
