"""The package's structure, read from its source: layers that only point down, no package cycle, modules,
classes and functions of a readable size, and every error the package raises drawn in errors.py.
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
    "errors scales files timebox callsite textview untrusted_json secret_spellings secrets projectfiles discovery scaffold",
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
#: what may be bigger than the guide (about 300 lines a module, 15 methods a class, 60 lines a function), and why
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


def test_the_llm_layer_never_imports_replay_and_replay_never_imports_agents():
    for module, tree in modules().items():
        targets = {part(t) for t in imports(module, tree)}
        if module.count(".") >= 1 and part(module) == "llm":
            assert "replay" not in targets, module
        if module.count(".") >= 1 and part(module) == "replay":
            assert not targets & {"agents", "assistants"}, module


def test_sizes_are_readable():
    too_big = []
    for module, tree in modules().items():
        lines = len((PACKAGE.parent / (module.replace(".", "/") + ".py")).read_text().splitlines())
        if lines > 300 and module not in LARGER:
            too_big.append(f"{module}: {lines} lines")
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
    object's private attribute, and xdist's worker queue is read in one module, which says why."""
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
    assert queue_readers == {"personalens_testkit.plugin.xdist_queue"}
