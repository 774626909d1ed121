"""Every assistant kind end to end through its real path, against the example bot in examples/:
a loopback HTTP server, an imported callable (sync and async), a subprocess speaking JSON
lines, and an OpenAI-compatible endpoint. The user agent and judge are a scripted
OpenAI-compatible server here (fast); tests/test_live_e2e.py covers the embedded model."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .support.fake_llm import FakeLLM, Script
from .support.project import with_runs

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "examples" / "concierge_bot"


@pytest.fixture(scope="module")
def bot_server():
    """The example bot's HTTP server, run as a real process on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(BOT / "http_server.py"), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(timeout=10)


def project(pytester: pytest.Pytester, bot_url: str, fake_url: str, extra: str = "") -> None:
    for name in ("test_single_domain.py", "test_multi_domain.py"):
        shutil.copy(ROOT / "suites" / name, pytester.path / name)
    python = json.dumps(sys.executable)
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
addopts = "-p no:deepeval"
asyncio_default_fixture_loop_scope = "function"
filterwarnings = ["ignore::pytest.PytestAssertRewriteWarning"]

[tool.personalens]
record_mode = "all"
user_model = "sim-user"
judge_model = "openai:fake-judge"
openai_base_url = "{fake_url}"

[tool.personalens.models.sim-user]
kind = "openai"
model = "fake-user"
base_url = "{fake_url}"

[tool.personalens.assistants.http-bot]
kind = "http"
url = "{bot_url}/reply"
context = ["interactions", "situation"]

[tool.personalens.assistants.py-bot]
kind = "python"
callable = "concierge:reply"
path = ["{BOT}"]
context = ["I"]

[tool.personalens.assistants.async-bot]
kind = "python"
callable = "concierge:areply"
path = ["{BOT}"]

[tool.personalens.assistants.cmd-bot]
kind = "command"
command = [{python}, "{BOT / 'jsonl_bot.py'}"]
context = "interactions"

[tool.personalens.assistants.openai-bot]
kind = "openai"
base_url = "{bot_url}/v1"
model = "concierge"
system_prompt = "You are a concierge."
context = ["interactions"]
temperature = 0.2
{extra}
""")


def rows(pytester: pytest.Pytester) -> list[dict]:
    (path,) = pytester.path.glob("personalens-results/*/results.jsonl")
    return with_runs([json.loads(line) for line in path.read_text().splitlines()])


@pytest.mark.parametrize("name, kind, remembers", [
    ("http-bot", "http", True), ("py-bot", "python", True), ("async-bot", "python", False),
    ("cmd-bot", "command", True), ("openai-bot", "openai", True),
])
def test_each_kind_runs_the_suite_end_to_end(pytester, bot_server, name, kind, remembers):
    with FakeLLM(Script(terminate_after=2)) as fake:
        project(pytester, bot_server, fake.url)
        result = pytester.runpytest("--assistant", name, "--profiles", "7", "--domains", "Alarm")
    result.assert_outcomes(passed=4, deselected=1)
    found = rows(pytester)
    assert len(found) == 4
    for row in found:
        assert (row["assistant"], row["assistant_kind"], row["status"]) == (name, kind, "passed")
        assert row["user_model"] == "sim-user (openai:fake-user)" and row["judge_model"] == "openai:fake-judge"
        assert row["termination"] == "user_terminated" and row["turns"] == 3
        first_reply = row["transcript"][1]["content"]
        # the bot personalizes only when it is given the past interactions
        assert ("I remember from our past chats" in first_reply) is remembers, first_reply
        assert [c["role"] for c in row["calls"]].count("assistant") == 3
    assert row["assistant_context"] == {"http": "I+S", "python": "I" if remembers else "none",
                                        "command": "I", "openai": "I"}[kind]
    # the header names the bot as its rows do: its kind and context, no reference model
    result.stdout.fnmatch_lines([f"personalens: data *; assistant {name} (kind {kind}, context "
                                 f"{row['assistant_context']}); user agent *"])
    if kind == "http":
        assert "(I'll keep it around Toronto, Canada.)" in found[0]["transcript"][1]["content"]
    # the scripted judge was asked about the bot's real replies
    assert any("[ASSISTANT]: Happy to help!" in r["messages"][-1]["content"] for r in fake.requests)


def test_a_failing_bot_is_an_error_with_its_cause(pytester, bot_server, tmp_path):
    crash = tmp_path / "crash_bot.py"
    crash.write_text("import sys\nsys.stdin.readline()\nprint('boom: cannot answer', file=sys.stderr)\nsys.exit(7)\n")
    extra = f'[tool.personalens.assistants.crash-bot]\nkind = "command"\ncommand = [{json.dumps(sys.executable)}, "{crash}"]\n'
    with FakeLLM() as fake:
        project(pytester, bot_server, fake.url, extra)
        result = pytester.runpytest("--assistant", "crash-bot", "--profiles", "7", "--domains", "Alarm", "-x")
    result.assert_outcomes(errors=1, deselected=1)
    result.stdout.fnmatch_lines([
        "the dialogue failed (ModelError): assistant (reply, turn 1) call to crash-bot failed: "
        "the bot process exited (code 7); stderr: boom: cannot answer",
    ])
    (row,) = rows(pytester)
    assert row["status"] == "error" and len(row["transcript"]) == 1


BAD_ENTRIES = [
    ("nope", "", "ERROR: --assistant: unknown assistant 'nope' (known: async-bot, cmd-bot, http-bot, openai-bot, py-bot, reference)"),
    ("down-bot", '[tool.personalens.assistants.down-bot]\nkind = "http"\nurl = "http://127.0.0.1:9/reply"\n',
     "ERROR: assistant 'down-bot' ([[]tool.personalens.assistants.down-bot[]] in pyproject.toml): "
     "cannot reach http://127.0.0.1:9/reply (Connection refused)"),
    ("no-url", '[tool.personalens.assistants.no-url]\nkind = "http"\n',
     "ERROR: */pyproject.toml: tool.personalens.assistants.no-url.url: missing (kind 'http' needs it)"),
    ("grpc-bot", '[tool.personalens.assistants.grpc-bot]\nkind = "grpc"\n',
     "ERROR: */pyproject.toml: tool.personalens.assistants.grpc-bot: unknown kind 'grpc' (one of: reference, openai, bedrock, http, python, command)"),
    ("import-bot", '[tool.personalens.assistants.import-bot]\nkind = "python"\ncallable = "no_such_module:reply"\n',
     "ERROR: assistant 'import-bot' (*): cannot import 'no_such_module' (No module named 'no_such_module')"),
    ("attr-bot", f'[tool.personalens.assistants.attr-bot]\nkind = "python"\ncallable = "concierge:nothing"\npath = ["{BOT}"]\n',
     "ERROR: assistant 'attr-bot' (*): 'concierge' has no attribute 'nothing'"),
    ("missing-cmd", '[tool.personalens.assistants.missing-cmd]\nkind = "command"\ncommand = "no-such-bot --flag"\n',
     "ERROR: assistant 'missing-cmd' (*): command 'no-such-bot' not found or not executable"),
    ("quit-cmd", f'[tool.personalens.assistants.quit-cmd]\nkind = "command"\ncommand = [{json.dumps(sys.executable)}, "-c", "import sys; print(\'no config\', file=sys.stderr); sys.exit(3)"]\n',
     "ERROR: assistant 'quit-cmd' (*): the command exited at once with code 3; stderr: no config"),
    ("ctx-bot", '[tool.personalens.assistants.ctx-bot]\nkind = "http"\nurl = "http://x/"\ncontext = ["preferences"]\n',
     "ERROR: */pyproject.toml: tool.personalens.assistants.ctx-bot.context: 'preferences' is not a context part*"),
    ("down-openai", '[tool.personalens.assistants.down-openai]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n',
     "ERROR: assistant 'down-openai' (*): cannot reach http://127.0.0.1:9/v1 (Connection refused)"),
    ("aws-bot", '[tool.personalens.assistants.aws-bot]\nkind = "bedrock"\nmodel = "anthropic.claude-3-haiku-20240307-v1:0"\n',
     "ERROR: assistant 'aws-bot' (*): no AWS region: set AWS_DEFAULT_REGION*"),
    # the bot's credentials resolved as a call would resolve them (the same check as a Bedrock model's)
    ("aws-creds-bot", '[tool.personalens.assistants.aws-creds-bot]\nkind = "bedrock"\nregion = "us-east-1"\nmodel = "m"\n',
     "ERROR: assistant 'aws-creds-bot' (*): no AWS credentials found (the standard chain: *"),
]


@pytest.mark.parametrize("name, extra, message", BAD_ENTRIES, ids=[b[0] for b in BAD_ENTRIES])
def test_misconfigured_assistants_fail_once_before_any_case(pytester, bot_server, monkeypatch, name, extra, message):
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(pytester.path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(pytester.path / "no-aws-credentials"))
    with FakeLLM() as fake:
        project(pytester, bot_server, fake.url, extra)
        result = pytester.runpytest("--assistant", name, "--profiles", "7", "--domains", "Alarm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert len([line for line in result.stderr.lines if line.startswith("ERROR")]) == 1
    assert "Traceback" not in result.stderr.str() and fake.requests == []


def test_command_paths_are_relative_to_the_entrys_folder_and_bots_are_restarted(tmp_path):
    from personalens_testkit.assistants.base import AssistantInput
    from personalens_testkit.assistants.command_bot import CommandAssistant
    from personalens_testkit.assistants.kinds.command import CommandEntry
    from personalens_testkit.errors import ModelError
    from personalens_testkit.llm.base import Message

    folder = tmp_path / "bots"
    folder.mkdir()
    script = folder / "bot.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {BOT / 'jsonl_bot.py'}\n")
    script.chmod(0o755)
    entry = CommandEntry(kind="command", command="./bot.sh", cwd="bots", timeout_s=20)
    bot = CommandAssistant("sh-bot", entry, tmp_path)
    turn = AssistantInput(scenario_id="s", turn=2, messages=(Message("user", "perfect, thanks"),))
    try:
        assert bot.reply(turn).text == "You're welcome - it's all set. Anything else I can do for you?"
        bot._process.kill()  # a crash between turns
        bot._process.wait()
        with pytest.raises(ModelError, match=r"the bot process exited \(code -9\)"):
            bot.reply(turn)
        assert bot.reply(turn).text.startswith("You're welcome")  # started again for the next turn
    finally:
        bot.close()


UNREACHABLE = [entry for entry in BAD_ENTRIES if entry[0] in ("down-bot", "down-openai", "missing-cmd", "quit-cmd")]


@pytest.mark.parametrize("option", ["--help", "--version", "--markers", "--fixtures", "--collect-only"])
@pytest.mark.parametrize("name, extra, message", UNREACHABLE, ids=[b[0] for b in UNREACHABLE])
def test_help_and_listing_never_start_or_reach_a_bot_or_a_model(pytester, bot_server, name, extra, message, option):
    with FakeLLM() as fake:
        project(pytester, bot_server, fake.url, extra)
        result = pytester.runpytest("--assistant", name, "--profiles", "7", "--domains", "Alarm", option)
        assert fake.requests == []
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()[-2000:]
    shown = result.stderr.str() + result.stdout.str()
    assert f"assistant '{name}'" not in shown and "ERROR" not in result.stderr.str()  # no check of the bot ran
