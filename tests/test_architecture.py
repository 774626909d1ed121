"""The package's structure, read from its source: layers that only point down, no import circle between packages
or inside one, no library's internals, classes and functions of a readable size, and every error the package raises drawn in errors.py.
docs/architecture.md draws the same layers."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "personalens_testkit"

#: bottom up; a module may import its own layer's modules and any layer below, never one above
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(names.split()) for names in (
    "errors scales files transcript_file timebox callsite textview untrusted_json secret_spellings secrets projectfiles "
    "discovery scaffold",
    "data",
    "llm",
    "replay",
    "prompts",
    "assistants",
    "agents",
    "evaluation transcripts",
    "results",
    "gating costs",
    "report calibration",
    "settings",
    "run gate integrations",
    "plugin cli",
))
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}
#: what may be bigger than the guide (15 methods a class, 60 lines a function), and why
LARGER: dict[str, str] = {}


def modules() -> dict[str, ast.Module]:
    return {".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts): ast.parse(path.read_text())
            for path in PACKAGE.rglob("*.py")}


def part(module: str) -> str:
    """The top-level part of the package a module belongs to (``llm`` for ``personalens_testkit.llm.base``)."""
    return module.split(".")[1]


def imports(module: str, tree: ast.Module) -> set[str]:
    found = set()
    package = module.split(".")[:-1] if not module.endswith("__init__") else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            found.add(".".join(base + ([node.module] if node.module else [])))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("personalens_testkit"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("personalens_testkit")}
    return {name for name in found if name.count(".") >= 1}


def test_every_part_of_the_package_has_a_layer():
    parts = {part(name) for name in modules() if name.count(".") >= 1}
    parts.discard("__init__")
    assert parts <= set(LAYER), parts - set(LAYER)


def test_imports_only_point_down():
    upward = []
    for module, tree in modules().items():
        if module.count(".") < 1 or part(module) == "__init__":
            continue
        for target in imports(module, tree):
            if LAYER.get(part(target), -1) > LAYER[part(module)]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_package_cycle():
    graph: dict[str, set[str]] = {}
    for module, tree in modules().items():
        if module.count(".") >= 1 and part(module) != "__init__":
            graph.setdefault(part(module), set()).update(part(t) for t in imports(module, tree) if part(t) != part(module))

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})) for nxt in graph.get(start, ()))

    assert [name for name in graph if reaches(name, name, {name})] == []


def module_imports(module: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules ``module`` imports, wherever the import stands (at the top, in a function, under
    TYPE_CHECKING): ``from . import x`` names the module ``x`` when there is one, a package its ``__init__``."""
    def named(name: str) -> str | None:
        return next((n for n in (f"{name}.__init__", name) if n in known), None)

    package = module.split(".")[:-1]
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("personalens_testkit")):
            base = (".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level else str(node.module))
            found |= {named(f"{base}.{alias.name}") or named(base) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {named(alias.name) for alias in node.names}
    return {name for name in found if name is not None and name != module}


def import_circles(trees: dict[str, ast.Module]) -> list[list[str]]:
    """Every set of modules that import one another round a circle (strongly connected, more than one)."""
    graph = {module: module_imports(module, tree, set(trees)) for module, tree in trees.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            members = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(members) > 1:
                circles.append(sorted(members))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return circles


def test_no_import_circle_anywhere():
    """Not between packages, not inside one: an adapter does not import the module that registers it, a module
    typed by another's class does not import it back (TYPE_CHECKING and imports inside functions count)."""
    assert import_circles(modules()) == []


@pytest.mark.parametrize(("sources", "circle"), [
    ({"p.a": "from . import b\n", "p.b": "from .a import X\n"}, ["p.a", "p.b"]),
    ({"p.k.__init__": "from . import m\n", "p.k.m": "def f():\n    from ..reg import R\n",
      "p.reg": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .k import K\n"},
     ["p.k.__init__", "p.k.m", "p.reg"]),
    ({"personalens_testkit.x": "import personalens_testkit.y\n", "personalens_testkit.y": "from personalens_testkit.x import z\n"},
     ["personalens_testkit.x", "personalens_testkit.y"]),
])
def test_the_circle_check_finds_each_kind(sources, circle):
    trees = {name: ast.parse(source) for name, source in sources.items()}
    assert import_circles(trees) == [circle]
    assert import_circles({name: tree for name, tree in trees.items() if name != circle[-1]}) == []


def test_the_llm_layer_never_imports_replay_and_replay_never_imports_agents():
    for module, tree in modules().items():
        targets = {part(t) for t in imports(module, tree)}
        if module.count(".") >= 1 and part(module) == "llm":
            assert "replay" not in targets, module
        if module.count(".") >= 1 and part(module) == "replay":
            assert not targets & {"agents", "assistants"}, module


def test_sizes_are_readable():
    """Classes and functions of a readable size. A module has no size of its own: it holds one concept whole (the
    HTML report, the injection filter), however long that takes - never a concept cut in pieces to fit a count."""
    too_big = []
    for module, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
                if methods > 15 and f"{module}.{node.name}" not in LARGER:
                    too_big.append(f"{module}.{node.name}: {methods} methods")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                if f"{module}.{node.name}" not in LARGER:
                    too_big.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert too_big == []


def test_every_error_the_package_defines_is_in_the_drawn_tree():
    errors_py = (PACKAGE / "errors.py").read_text()
    drawing = errors_py.split('"""', 2)[1]
    defined = set(re.findall(r"^class (\w+)\(", errors_py, flags=re.M))
    assert defined - {"_FileProblem"} <= set(re.findall(r"(\w+Error|\w+Reached)\b", drawing)) | {"PersonalensError"}
    elsewhere = []
    for module, tree in modules().items():
        if module.endswith(".errors"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(base, "id", getattr(base, "attr", "")).endswith(("Error", "Exception")) for base in node.bases):
                elsewhere.append(f"{module}.{node.name}")
    # only internal signals, each named in the drawing with where it is translated
    assert all(name.rsplit(".", 1)[1] in drawing for name in elsewhere), elsewhere


@pytest.mark.parametrize("layer", [name for names in LAYERS for name in sorted(names)])
def test_the_architecture_page_describes_every_part(layer):
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert f"`{layer}" in page


#: what only a case, a statistic or a live server needs: loaded when it is needed, never with the plugin
LATER = ("numpy", "httpx", "httpcore", "vcr", "boto3", "botocore", "jinja2", "deepeval", "xdist.scheduler",
         "personalens_testkit.evaluation", "personalens_testkit.agents")


def test_loading_the_plugin_leaves_what_a_case_needs_for_later():
    """pytest loads the plugin in every process of the environment (its entry point): the dialogue and judging
    machinery, numpy and the HTTP client load when a case, a statistic or a server needs them (bench/startup.py
    measures what that saves a process before its first case)."""
    code = ("import importlib, sys, personalens_testkit.plugin as plugin\n"
            "for name in plugin.pytest_plugins: importlib.import_module(name)\n"  # what pytest registers with it
            f"print(' '.join(m for m in {LATER!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"loaded with the plugin: {done.stdout.strip()}"



#: what only the end of a run (its report, verdict, calibration), a retry or a run that asks for them needs
AT_THE_END = ("personalens_testkit.run.finish", "personalens_testkit.report.model", "personalens_testkit.report.summary",
              "personalens_testkit.calibration.report", "personalens_testkit.gating.compare",
              "personalens_testkit.gating.verdict", "personalens_testkit.run.early_stop", "personalens_testkit.run.budget",
              "tenacity")
PROBE = """
import sys
def pytest_unconfigure(config):
    print("LOADED " + " ".join(m for m in {names!r} if m in sys.modules))
"""


def test_a_collection_leaves_what_the_end_of_a_run_needs_unloaded(tmp_path):
    """``pytest suites/ --collect-only`` reads the settings, the dataset and the cost estimate, and nothing of the
    report, the verdict or the retries (bench/startup.py measures a collection against a bare pytest)."""
    (tmp_path / "end_probe.py").write_text(PROBE.format(names=AT_THE_END))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "end_probe", "-p", "no:cacheprovider", "suites/",
                           "--collect-only", "-q", "-k", "user7-SD-Alarm-task-1", "-s"],
                          cwd=PACKAGE.parent, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "LOADED \n" in done.stdout + "\n", [line for line in done.stdout.splitlines() if line.startswith("LOADED")]


def test_the_pytest_glue_says_what_it_hooks_and_reads_no_private_attribute():
    """Each module of the plugin package names, in its docstring, every hook it implements; none reads another
    object's private attribute, nor xdist's worker loop's queue (a worker's queue is what the scheduler wrote)."""
    unnamed, private, queue_readers = [], [], set()
    for module, tree in modules().items():
        if not module.startswith("personalens_testkit.plugin."):
            continue
        doc = ast.get_docstring(tree) or ""
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_") and f"``{node.name}``" not in doc:
                unnamed.append(f"{module}.{node.name}")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    private.append(f"{module}: .{node.attr}")
            if isinstance(node, ast.Attribute) and node.attr in ("torun", "nextitem_index"):
                queue_readers.add(module)
    assert unnamed == [] and private == []
    assert queue_readers == set()


#: names of the stack's internals that carry no underscore: an import hook, the garbage collector, vcrpy's reset and
#: xdist's worker queue
INTERNALS = frozenset({"meta_path", "freeze", "unfreeze", "force_reset", "torun", "nextitem_index"})
#: a namedtuple's public methods (underscored so as not to clash with its fields)
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})
#: the places that still read or write a library's internals (issue 47, item 1): none is left; a place not listed
#: fails, and so does a listed one that is gone (so the list only shrinks)
STILL_INTERNAL: dict[str, frozenset[str]] = {}


def our_names(trees: dict[str, ast.Module]) -> set[str]:
    """Every name the package itself defines: functions, classes, variables, attributes of self or cls, arguments,
    import aliases and module names - a private name among them is ours to use."""
    found = {module.rsplit(".", 1)[-1] for module in trees}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
                  and node.value.id in ("self", "cls")):
                found.add(node.attr)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.alias):
                found.add((node.asname or node.name).split(".")[0])
    return found


def internals_read(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """By module: the library internals it reads or writes - an attribute with a private name the package does not
    define (on anything but self or cls), any private name given to getattr/setattr/hasattr/delattr (on anything but
    self), a method with a private name overriding a class from outside the package, and the INTERNALS."""
    ours = our_names(trees)
    found: dict[str, set[str]] = {}
    for module, tree in trees.items():
        local = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                if node.attr in INTERNALS or (node.attr.startswith("_") and not node.attr.startswith("__")
                                              and node.attr not in ours and node.attr not in NAMEDTUPLE_API):
                    names.append(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")):
                name = node.args[1].value
                if name in INTERNALS or (name.startswith("_") and not name.startswith("__")):
                    names.append(name)
            elif isinstance(node, ast.ClassDef) and any(
                    not (isinstance(base, ast.Name) and base.id in local) for base in node.bases):
                foreign = [b for b in node.bases if isinstance(b, ast.Attribute)
                           or (isinstance(b, ast.Name) and b.id not in local and b.id[:1].isupper())]
                if foreign:
                    names += [item.name for item in node.body if isinstance(item, ast.FunctionDef)
                              and item.name.startswith("_") and not item.name.startswith("__")
                              and any(item.name in _defined_by(b, tree) for b in foreign)]
            if names:
                found.setdefault(module, set()).update(names)
    return found


def _defined_by(base: ast.expr, tree: ast.Module) -> set[str]:
    """The private methods of the library class ``base`` names (imported to ask it), as ``tree`` imports it."""
    import importlib

    dotted = ast.unparse(base)
    head = dotted.split(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == head:
                    dotted = f"{node.module}.{alias.name}" + dotted[len(head):]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == head:
                    dotted = alias.name + dotted[len(head):]
    module, _, name = dotted.rpartition(".")
    try:
        owner = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError, ValueError):
        owner = None
    return {n for n in dir(owner) if n.startswith("_") and not n.startswith("__")} if owner is not None else set()


def test_no_library_internal_is_read_or_written_beyond_the_places_still_listed():
    found = internals_read(modules())
    new = {module: sorted(names - STILL_INTERNAL.get(module, frozenset())) for module, names in found.items()}
    gone = {module: sorted(names - found.get(module, set())) for module, names in STILL_INTERNAL.items()}
    assert {m: n for m, n in new.items() if n} == {}, "a library's internals read or written: use its public API"
    assert {m: n for m, n in gone.items() if n} == {}, "no longer read: take it off STILL_INTERNAL"


@pytest.mark.parametrize(("source", "caught"), [
    ("import os\nx = os.environ._data\n", {"_data"}),
    ("import sys\nsys.meta_path.insert(0, object())\n", {"meta_path"}),
    ("import gc\ngc.freeze()\n", {"freeze"}),
    ("def f(pool):\n    return getattr(pool, '_network_backend', None)\n", {"_network_backend"}),
    ("def f(writer):\n    writer._current_line = ''\n", {"_current_line"}),
    ("import argparse\ndef f(sub: argparse._SubParsersAction): ...\n", {"_SubParsersAction"}),
    ("from argparse import ArgumentParser\nclass P(ArgumentParser):\n    def _get_values(self, action, strings): ...\n",
     {"_get_values"}),
])
def test_the_internals_check_catches_each_kind(source, caught):
    assert internals_read({"probe": ast.parse(source)}) == {"probe": caught}


@pytest.mark.parametrize("source", [
    "class A:\n    def __init__(self):\n        self._x = 1\n    def f(self):\n        return self._x\n",
    "from collections import namedtuple\nP = namedtuple('P', 'a')\nq = P(1)._replace(a=2)\n",
    "def _helper():\n    return 1\n\nclass B:\n    def g(self, other):\n        return other._helper\n",
])
def test_the_internals_check_leaves_the_packages_own_private_names_alone(source):
    assert internals_read({"probe": ast.parse(source)}) == {}
