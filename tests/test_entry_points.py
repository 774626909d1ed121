"""Kinds and backends from other packages: a distribution installed beside the testkit declares an assistant kind
and a model backend under the testkit's entry-point groups, and a run uses them as it uses its own - no fork, no
file of the package touched. A broken declaration is one line naming the entry point and its distribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import personalens_testkit

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_results, read_rows, suite_project
from .test_model_backends import ECHO, ECHO_KIND

#: the kind and the backend tests/test_model_backends.py drops into a copy of the package, as another package writes
#: them: its imports absolute
KIND = (ECHO_KIND.replace("from ..base import", "from personalens_testkit.assistants.base import")
        .replace("from ..entries import", "from personalens_testkit.assistants.entries import")
        .replace("from . import AssistantKind", "from personalens_testkit.assistants.kinds import AssistantKind"))
BACKEND = (ECHO.replace("from ..base import", "from personalens_testkit.llm.base import")
           .replace("from . import BackendEntry", "from personalens_testkit.llm.backends import BackendEntry")
           .replace("from ...errors import", "from personalens_testkit.errors import"))


USE = textwrap.dedent('''
    import json
    from personalens_testkit.assistants.build_context import BuildContext
    from personalens_testkit.assistants.kinds import ASSISTANT_KINDS, BOT_KINDS, SCAFFOLDS
    from personalens_testkit.assistants.registry import AssistantCatalogue, build_assistant
    from personalens_testkit.llm.base import ChatRequest, Message
    from personalens_testkit.llm.entries import BACKEND_NAMES, parse_spec
    from personalens_testkit.llm.registry import ModelContext, create_model
    from personalens_testkit.settings.project import ProjectConfig

    config = ProjectConfig.model_validate({"assistants": {"mine": {"kind": "echo", "text": "hello there"}},
                                           "models": {"m": {"kind": "echo", "text": "from config"}}})
    bot = build_assistant("mine", AssistantCatalogue(config.assistants), BuildContext(root=".", model=None,
                                                                                      entry_model=None))
    ctx = ModelContext(local_url_for=lambda settings, role: "", named=config.models)
    request = ChatRequest(messages=(Message("user", "hi"),), purpose="judge")
    print(json.dumps({"kinds": list(ASSISTANT_KINDS), "bot": "echo" in BOT_KINDS, "init": SCAFFOLDS.get("echo"),
                      "reply": bot.reply(None).text, "backends": list(BACKEND_NAMES),
                      "spec": parse_spec("echo:hey").spec(),
                      "spec_answer": create_model("echo:hey", ctx, "judge").complete(request).text,
                      "named_answer": create_model("m", ctx, "judge").complete(request).text}))
''')


def install_plugin(where: Path, points: dict[str, dict[str, str]], modules: dict[str, str]) -> Path:
    """A distribution ``echo-plugin`` as an installer leaves it in site-packages: its modules (package
    ``echo_plugin``) and its dist-info with the entry points ``{group: {name: value}}``."""
    package = where / "echo_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, source in modules.items():
        (package / f"{name}.py").write_text(source)
    info = where / "echo_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in named.items()) + "\n"
        for group, named in points.items()))
    return where


PLUGIN = {"personalens_testkit.assistant_kinds": {"echo": "echo_plugin.kind"},
          "personalens_testkit.model_backends": {"echo": "echo_plugin.backend"}}


def search_path(plugins: Path) -> str:
    """PYTHONPATH for a process that sees the plugin's site beside this testkit (the one under test, wherever it is)."""
    return os.pathsep.join([str(plugins), str(Path(personalens_testkit.__file__).parent.parent)])


def run_python(code: str, plugins: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": search_path(plugins), "PATH": "/usr/bin:/bin"})


def test_a_kind_and_a_backend_of_another_package_are_used_everywhere(tmp_path: Path):
    plugins = install_plugin(tmp_path, PLUGIN, {"kind": KIND, "backend": BACKEND})
    done = run_python(USE, plugins)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["kinds"][-1] == "echo" and found["bot"] and found["init"] == 'kind = "echo"\ntext = "hello"'
    assert found["reply"] == "hello there"
    assert found["backends"] == ["local", "openai", "bedrock", "echo"]
    assert found["spec"] == "echo:hey" and found["spec_answer"] == "hey" and found["named_answer"] == "from config"


def test_an_object_named_by_the_entry_point_is_taken_as_it_is(tmp_path: Path):
    plugins = install_plugin(tmp_path, {"personalens_testkit.model_backends": {"echo": "echo_plugin.backend:BACKEND"}},
                             {"backend": BACKEND})
    done = run_python("from personalens_testkit.llm.entries import BACKEND_NAMES; print(','.join(BACKEND_NAMES))",
                      plugins)
    assert done.stdout.strip() == "local,openai,bedrock,echo", done.stderr[-3000:]


def test_a_run_scores_a_bot_of_a_kind_another_package_declares(pytester: pytest.Pytester, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    plugins = install_plugin(tmp_path / "site", PLUGIN, {"kind": KIND, "backend": BACKEND})
    monkeypatch.setenv("PYTHONPATH", search_path(plugins))
    with FakeLLM(Script(terminate_after=1)) as fake:
        suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                f'openai_base_url = "{fake.url}"\nrecord_mode = "all"\n'
                                '[assistants.mine]\nkind = "echo"\ntext = "Your alarm is set for 7:00."\n')
        result = pytester.runpytest_subprocess("--profiles", "7", "--domains", "Alarm", "--max-turns", "1",
                                               "-k", "task-1", "--assistant", "mine", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=4)
    row = read_rows(latest_results(pytester.path))[0]
    assert row["assistant"] == "mine" and row["assistant_kind"] == "echo" and row["scores"] is not None
    assert "Your alarm is set for 7:00." in json.dumps(row)


BROKEN = {
    "cannot be loaded (ModuleNotFoundError": ("echo_plugin.missing", {}),
    "cannot be loaded (RuntimeError: no licence": ("echo_plugin.kind", {"kind": "raise RuntimeError('no licence')\n"}),
    "is not a AssistantKind": ("echo_plugin.kind", {"kind": "KIND = 'echo'\n"}),
    "declares 'http', a name already taken": ("echo_plugin.kind", {"kind": KIND.replace('AssistantKind("echo"',
                                                                                       'AssistantKind("http"')}),
}


@pytest.mark.parametrize("says", list(BROKEN))
def test_a_broken_declaration_stops_a_run_with_one_line_naming_it(pytester: pytest.Pytester, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, says: str):
    value, modules = BROKEN[says]
    plugins = install_plugin(tmp_path / "site", {"personalens_testkit.assistant_kinds": {"echo": value}}, modules)
    monkeypatch.setenv("PYTHONPATH", search_path(plugins))
    suite_project(pytester, "")
    result = pytester.runpytest_subprocess("--profiles", "7", "--domains", "Alarm", "--collect-only",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()[-2000:]
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and "Traceback" not in result.stderr.str() + result.stdout.str()
    assert errors[0].startswith(f"ERROR: entry point echo = {value!r} of echo-plugin "
                                "(group personalens_testkit.assistant_kinds):")
    assert says in errors[0]
    # the kinds that are not broken are all there: the package is usable for everything but a run
    done = run_python("from personalens_testkit.assistants.kinds import ASSISTANT_KINDS; print(len(ASSISTANT_KINDS))",
                      plugins)
    assert done.stdout.strip() == "6", done.stderr[-2000:]


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True), min_size=1, max_size=6, unique=True),
       orders=st.lists(st.integers(-5, 20), min_size=6, max_size=6))
def test_discovery_orders_the_package_own_and_the_declared_as_one(names, orders):
    """The kinds of the package and those declared come out as one table in ``order``; a declared name that a
    module of the package takes is left out and named as broken, never a silent replacement."""
    from importlib.metadata import EntryPoint, EntryPoints

    from personalens_testkit import discovery
    from personalens_testkit.assistants import kinds

    own = kinds.KINDS
    made = {name: kinds.AssistantKind(name, object, lambda *a: None, is_bot=True, order=order)  # type: ignore[arg-type]
            for name, order in zip(names, orders)}
    module = type(sys)("declared_kinds")
    vars(module).update({f"K_{i}": kind for i, kind in enumerate(made.values())})
    sys.modules["declared_kinds"] = module
    points = EntryPoints(EntryPoint(name, f"declared_kinds:K_{i}", "g") for i, name in enumerate(made))
    original, problems = discovery.installed, list(discovery._BROKEN)
    discovery.installed = lambda: points  # type: ignore[assignment]
    try:
        found = discovery.discover(kinds.__name__, kinds.__path__, "KIND", kinds.AssistantKind,
                                   lambda k: (k.order, k.name), group="g")
        refused = discovery.broken()[len(problems):]
    finally:
        discovery.installed = original  # type: ignore[assignment]
        discovery._BROKEN[:] = problems
        del sys.modules["declared_kinds"]
    clashes = set(made) & set(own)
    everything = {**{n: k for n, k in made.items() if n not in clashes}, **own}
    assert list(found) == sorted(everything, key=lambda n: (everything[n].order, n))
    assert [line.split("declares ")[1].split(",")[0] for line in refused] == [repr(n) for n in made if n in clashes]
