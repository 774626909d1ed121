"""The bot a gate starts (``--start``, ``--health-url``): ready when its health URL answers, one line when it
exits or never answers, and its whole process group stopped at the end."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from personalens_testkit.errors import GateError
from personalens_testkit.gate.bot import StartedBot, group_alive


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_bot_is_ready_when_its_health_url_answers_and_stopped_with_its_children(tmp_path: Path):
    port = free_port()
    command = f"sleep 300 & {sys.executable} -m http.server {port} --bind 127.0.0.1"
    bot = StartedBot(command, cwd=tmp_path, log=tmp_path / "bot.log", health_url=f"http://127.0.0.1:{port}/",
                     timeout_s=30)
    with bot:
        assert bot.process is not None and bot.process.poll() is None
        group = bot.process.pid
    assert not group_alive(group)  # the server and its background sleep are gone


def test_a_bot_that_exits_is_one_line_with_its_log(tmp_path: Path):
    bot = StartedBot("echo cannot bind the port >&2; exit 3", cwd=tmp_path, log=tmp_path / "bot.log",
                     health_url=f"http://127.0.0.1:{free_port()}/health", timeout_s=30)
    with pytest.raises(GateError) as caught:
        bot.__enter__()
    message = str(caught.value)  # its exit, not the 30 s health deadline: it was not waited for
    assert "the bot exited (status 3)" in message and "cannot bind the port" in message and "\n" not in message


def test_a_bot_that_never_answers_fails_by_its_deadline(tmp_path: Path):
    bot = StartedBot("sleep 300", cwd=tmp_path, log=tmp_path / "bot.log",
                     health_url=f"http://127.0.0.1:{free_port()}/health", timeout_s=1.5)
    with pytest.raises(GateError, match=r"--health-url .*: no good answer within 1.5 s \(--start-timeout"):
        bot.__enter__()  # ended by its 1.5 s deadline, not by the bot's 300 s
    assert bot.process is not None and bot.process.poll() is not None  # stopped, not left behind
