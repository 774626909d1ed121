"""Where the project is, and whether this pytest run is a PersonaLens run: no hook of its own, read by the
configure hooks (:mod:`.configure`) and the controller's summary (:mod:`.controller`)."""

from __future__ import annotations

import contextlib
import fnmatch
from pathlib import Path

import pytest

from ..settings import OPTION_NAMES, SETTINGS

#: the marker of a suite test (``@pytest.mark.personalens(task_kind="sd"|"md")``)
MARKER = "personalens"

#: options whose value is a path: given as a separate argument (``--resume /elsewhere/results.jsonl``),
#: pytest takes it for a test path while it looks for the project folder, before it knows these options
_PATH_OPTIONS = frozenset(setting.option for setting in SETTINGS if setting.kind == "path" and setting.option)
_ROOT_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "personalens.toml")


def project_root(config: pytest.Config) -> Path:
    """The project whose config the run reads: pytest's rootdir, unless pytest took it from the value of one
    of our path options (then the folder pytest would have found from where it was started)."""
    root = config.rootpath
    started = config.invocation_params.dir
    args = [str(arg) for arg in config.invocation_params.args]
    values = [(started / args[i + 1]).resolve() for i, arg in enumerate(args[:-1]) if arg in _PATH_OPTIONS]
    if config.getoption("rootdir", None) or not any(root == v or root in v.parents for v in values):
        return _with_config(root)
    for folder in (started, *started.parents):
        if any((folder / name).is_file() for name in _ROOT_FILES):
            return _with_config(folder)
    return _with_config(started)  # no config file anywhere above: pytest itself would have taken this folder


def _with_config(root: Path) -> Path:
    """``root``, or the nearest folder above it with a personalens.toml when ``root`` has none of the testkit's
    config (a suites folder run in a repository whose pytest has no config file of its own)."""
    if (root / "personalens.toml").is_file() or _has_tool_table(root / "pyproject.toml"):
        return root
    return next((folder for folder in root.parents if (folder / "personalens.toml").is_file()), root)


def _has_tool_table(pyproject: Path) -> bool:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return "[tool.personalens" in pyproject.read_text(encoding="utf-8")
    return False


def asked_for_personalens(config: pytest.Config) -> bool:
    """Whether this run meant to run the benchmark: an option of ours given, or a project config of ours."""
    root = project_root(config)
    return (any(config.getoption(name, None) not in (None, False) for name in OPTION_NAMES)
            or (root / "personalens.toml").is_file() or _has_tool_table(root / "pyproject.toml"))


_SUITES = pytest.StashKey[bool]()


def runs_suites(config: pytest.Config) -> bool:
    """Whether this run collects PersonaLens suites: a test file it would collect uses the marker.

    Decided before collection, from the files (an xdist controller collects nothing, and the shared embedded
    servers must be up before its workers start): whether to check the assistant and launch the servers up
    front, so an unrelated ``pytest`` in the same project never starts a bot or a model. A suite is, by this
    rule, a ``test*.py`` file that writes ``mark.personalens(`` (as ``personalens init``'s suites do). Read once
    a process.
    """
    if _SUITES not in config.stash:
        config.stash[_SUITES] = not only_informs(config) and _finds_suites(config)
    return config.stash[_SUITES]


#: pytest's options that print something and run nothing (``--help``, ``--version``, ``--markers``, ``--fixtures``,
#: ``--fixtures-per-test``): such a run never starts a bot or a model, and checks neither
INFORMATIONAL = ("help", "version", "markers", "showfixtures", "show_fixtures_per_test")


def only_informs(config: pytest.Config) -> bool:
    """Whether pytest was asked only to print something (:data:`INFORMATIONAL`)."""
    return any(getattr(config.option, name, False) for name in INFORMATIONAL)


def _finds_suites(config: pytest.Config) -> bool:
    args = [arg.split("::", 1)[0] for arg in config.args if not arg.startswith("-")]
    roots = [config.invocation_params.dir / arg for arg in args] or [config.rootpath / p for p in config.getini("testpaths")]
    skipped = config.getini("norecursedirs")
    for root in roots or [config.rootpath]:
        files = [root] if root.is_file() else root.rglob("test*.py") if root.is_dir() else []
        for path in files:
            parts = path.relative_to(root).parts[:-1] if path != root else ()
            if any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in skipped):
                continue  # the folders pytest itself does not collect from (.venv, node_modules, ...)
            try:
                if f"mark.{MARKER}(" in path.read_text(encoding="utf-8", errors="ignore"):
                    return True
            except OSError:
                continue
    return False
