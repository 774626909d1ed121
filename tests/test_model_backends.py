"""A model backend is one module of llm/backends/, and an assistant kind one module of assistants/kinds/: a new
one, dropped into a copy of the package, is used everywhere with no other file touched - a backend is a spec, a
config entry, a chat model and a price lookup (and `personalens init` does not offer a backend that gives no gate
workflow); a kind is a config entry, an assistant, and `personalens init --kind`'s entry."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import personalens_testkit
from personalens_testkit.costs.prices import candidates, config_key, provider_counts_cached_in_prompt
from personalens_testkit.errors import UsageError
from personalens_testkit.llm.backends import BACKEND_NAMES, BACKENDS
from personalens_testkit.llm.entries import parse_spec

ECHO = textwrap.dedent('''
    """``echo:<text>``: a test backend that answers with its text."""
    from typing import Literal

    from pydantic import Field

    from ..base import ChatResponse
    from . import BackendEntry, ModelBackend


    class EchoModel(BackendEntry):
        kind: Literal["echo"] = "echo"
        text: str = Field(min_length=1)

        def spec(self) -> str:
            return f"echo:{self.text}"


    class EchoChat:
        def __init__(self, spec, text):
            self.spec, self.text = spec, text

        def complete(self, request):
            return ChatResponse(text=self.text, model=self.spec, prompt_tokens=1, completion_tokens=1)

        def close(self):
            pass


    def check(entry):
        from ...errors import UsageError
        if entry.text == "unready":
            raise UsageError("echo: not ready")


    BACKEND = ModelBackend("echo", EchoModel, lambda rest: EchoModel(text=rest),
                           lambda label, entry, ctx, role: EchoChat(label, entry.text), order=9,
                           example="echo:hello", check=check)
''')

USE = textwrap.dedent('''
    import json
    from personalens_testkit.cli.init_workflow import PROVIDERS
    from personalens_testkit.costs.prices import candidates
    from personalens_testkit.llm.base import ChatRequest, Message
    from personalens_testkit.llm.entries import BACKEND_NAMES, parse_spec
    from personalens_testkit.llm.registry import ModelContext, create_model
    from personalens_testkit.settings.project import ProjectConfig

    config = ProjectConfig.model_validate({"models": {"mine": {"kind": "echo", "text": "from config"}}})
    ctx = ModelContext(local_url_for=lambda settings, role: "", named=config.models)
    request = ChatRequest(messages=(Message("user", "hi"),), purpose="judge")
    print(json.dumps({
        "names": list(BACKEND_NAMES),
        "spec": parse_spec("echo:hello").spec(),
        "spec_answer": create_model("echo:hello", ctx, "judge").complete(request).text,
        "named_answer": create_model("mine", ctx, "judge").complete(request).text,
        "prices": candidates("echo:hello"),
        "providers": list(PROVIDERS),
    }))
''')


ECHO_KIND = textwrap.dedent('''
    """``kind = "echo"``: a test bot that answers with its entry's text."""
    from typing import Literal

    from ..base import AssistantReply
    from ..entries import Entry
    from . import AssistantKind


    class EchoEntry(Entry):
        kind: Literal["echo"]
        text: str


    class EchoBot:
        def __init__(self, name, entry):
            self.name, self.text, self.context = name, entry.text, entry.switches()

        def reply(self, turn):
            return AssistantReply(self.text)

        def check(self):
            pass

        def close(self):
            pass


    KIND = AssistantKind("echo", EchoEntry, lambda name, entry, ctx: EchoBot(name, entry), is_bot=True,
                         order=9, scaffold='kind = "echo"\\ntext = "hello"')
''')

USE_KIND = textwrap.dedent('''
    import json
    from personalens_testkit.assistants.kinds import ASSISTANT_KINDS, BOT_KINDS, SCAFFOLDS
    from personalens_testkit.assistants.build_context import BuildContext
    from personalens_testkit.assistants.registry import AssistantCatalogue, build_assistant
    from personalens_testkit.settings.project import ProjectConfig

    config = ProjectConfig.model_validate({"assistants": {"mine": {"kind": "echo", "text": "hello there"}}})
    bot = build_assistant("mine", AssistantCatalogue(config.assistants), BuildContext(root=".", model=None,
                                                                                      entry_model=None))
    print(json.dumps({"kinds": list(ASSISTANT_KINDS), "bot": "echo" in BOT_KINDS, "init": SCAFFOLDS.get("echo"),
                      "reply": bot.reply(None).text}))
''')


def _with_module(tmp_path: Path, where: str, source: str, use: str) -> dict:
    """Runs ``use`` against a copy of the package with one module added at ``where``; what it printed."""
    package = Path(personalens_testkit.__file__).parent
    copy = tmp_path / "personalens_testkit"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    (copy / "data").symlink_to(package / "data")
    (copy / where).write_text(source)
    done = subprocess.run([sys.executable, "-c", use], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_new_assistant_kind_is_one_module(tmp_path: Path):
    found = _with_module(tmp_path, "assistants/kinds/echo.py", ECHO_KIND, USE_KIND)
    assert found["kinds"][-1] == "echo" and found["bot"]
    assert found["init"] == 'kind = "echo"\ntext = "hello"' and found["reply"] == "hello there"


def test_a_new_backend_is_one_module(tmp_path: Path):
    found = _with_module(tmp_path, "llm/backends/echo.py", ECHO, USE)
    assert found["names"] == ["local", "openai", "bedrock", "echo"]
    assert found["spec"] == "echo:hello" and found["spec_answer"] == "hello"
    assert found["named_answer"] == "from config"
    assert found["prices"] == ["echo:hello", "hello"]
    assert found["providers"] == ["local", "openai", "bedrock"]  # it writes no gate workflow: not offered by init


def test_the_backends_are_the_three_the_specs_name():
    assert BACKEND_NAMES == ("local", "openai", "bedrock")
    assert parse_spec("local").spec() == "local" and parse_spec("local:/m.gguf").spec() == "local:/m.gguf"
    assert parse_spec("openai:gpt-4o").spec() == "openai:gpt-4o"
    assert parse_spec("bedrock:us.anthropic.claude-3-5-sonnet-20241022-v2:0").model.startswith("us.anthropic")
    for wrong, says in (("openai", "like openai:gpt-4o-mini"), ("bedrock:", "nothing after 'bedrock:'"),
                        ("azure:gpt-4o", "unknown backend 'azure' (known: local, openai, bedrock")):
        with pytest.raises(UsageError, match=says.replace("(", r"\(")):
            parse_spec(wrong)
    assert [name for name, b in BACKENDS.items() if b.embedded] == ["local"]
    assert [name for name, b in BACKENDS.items() if b.check is not None] == ["bedrock"]


def test_prices_are_looked_up_by_each_backends_rule():
    assert candidates("local:/models/x.gguf") == ["local:/models/x.gguf", "local"]
    assert config_key("local:/models/x.gguf") == config_key("local") == "local"
    assert candidates("openai:gpt-4o-mini-2024-07-18") == ["openai:gpt-4o-mini-2024-07-18", "gpt-4o-mini-2024-07-18",
                                                           "gpt-4o-mini"]
    assert candidates("bedrock:eu.anthropic.claude-3-haiku-20240307-v1:0")[-1] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert "gpt-4o-mini" in candidates("gpt-4o-mini-2024-07-18")  # a bare id: as any remote backend prices it
    assert not provider_counts_cached_in_prompt("bedrock:x") and provider_counts_cached_in_prompt("openai:x")
    assert provider_counts_cached_in_prompt("x")
