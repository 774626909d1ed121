"""What a gate takes from the trusted commit, and the line that tells a pull request its change to one of
those files does not count yet.

The gate runs pytest in a copy of the trusted commit's tree, so every file the run reads - the testkit's
config, pytest's, the suite and its conftest files, the thresholds, the cassettes, the recorded results, the
expectations, the data and calibration files the config names - is the base's. The pull request gives only
the bot. :func:`trusted_paths` names those files (from the base's config), and :func:`untrusted_changes` the
pull request's changes among them: each one is one line, and none of them reaches the verdict.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from ..settings import RunSettings
from .git import Change

#: files pytest, git or the testkit read by name, wherever the gate runs (.gitattributes: how a commit's files read)
NAMED = ("personalens.toml", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg",
         "pyproject.toml", ".gitattributes")
#: of these, the ones that count only for a table they hold, and which (pyproject.toml: parsed, see PYPROJECT_TABLES)
SECTIONS = {"tox.ini": "[pytest]", "setup.cfg": "[tool:pytest]"}
#: the largest config file read to compare its tables (a bigger one, or one that is not a plain file, counts as changed)
MAX_READ = 1 << 20
#: of pyproject.toml, only these tables decide anything (the rest may be the bot's own packaging)
PYPROJECT_TABLES = (("tool", "personalens"), ("tool", "pytest"))
#: the folder of the workflows that run the gate: a pull request's change there runs with the pull request
WORKFLOWS = ".github/workflows/"
#: the most lines about changed files (a pull request that re-records 4,000 cassettes gets a count)
MAX_LINES = 200


@dataclass(frozen=True)
class TrustedPaths:
    """Repository-relative paths (posix) the run reads: files, and folders read whole."""

    files: frozenset[str]
    folders: tuple[str, ...]

    def covers(self, path: str) -> bool:
        if path in self.files or PurePosixPath(path).name == "conftest.py":
            return True
        return any(path == folder or path.startswith(folder + "/") for folder in self.folders)


def _relative(path: Path | None, root: Path) -> str | None:
    if path is None:
        return None
    with contextlib.suppress(ValueError):
        relative = path.resolve().relative_to(root.resolve()).as_posix()
        return relative if relative != "." else ""
    return None  # outside the repository: not the pull request's to change


def trusted_paths(settings: RunSettings, root: Path, suites: Iterable[str]) -> TrustedPaths:
    """The files and folders of the trusted tree at ``root`` that a run with ``settings`` reads."""
    files = set(NAMED)
    for path in (settings.thresholds_path, settings.expectations, settings.judge_calibration, settings.local.model_path):
        relative = _relative(path, root)
        if relative:
            files.add(relative)
    folders = [_relative(settings.cassette_dir, root), _relative(settings.data_path, root)]
    folders += [PurePosixPath(suite).as_posix().rstrip("/") for suite in suites]
    return TrustedPaths(frozenset(files), tuple(sorted({f for f in folders if f and f != "."})))


def _tables(text: str | None) -> Any:
    """pyproject.toml's tables that decide anything (no file: none of them; a string: it does not parse)."""
    if text is None:
        return [None] * len(PYPROJECT_TABLES)
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"
    return [data.get(a, {}).get(b) if isinstance(data.get(a), dict) else None for a, b in PYPROJECT_TABLES]


def _read(path: Path) -> str | None:
    """A config file's text; None when there is none. A link, a special file or a file too large: a text that
    compares unequal to anything (never read: /dev/zero is not a config file)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_READ:
            return f"\0not a plain config file: {path}" if path.exists() or path.is_symlink() else None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"\0unreadable: {exc}"


def _section(text: str | None, header: str) -> str | None:
    """The lines of one ini section (None: the file has no such section)."""
    if text is None or header not in text:
        return None
    found, keep = [], False
    for line in text.splitlines():
        if line.strip().startswith("["):
            keep = line.strip() == header
            continue
        if keep:
            found.append(line)
    return "\n".join(found) if keep or found else ""


def _counts(path: str, repo: Path, base_tree: Path) -> bool:
    """Whether a change to this config file changes anything the gate reads from it."""
    ours, theirs = _read(repo / path), _read(base_tree / path)
    if path == "pyproject.toml":
        return _tables(ours) != _tables(theirs)
    if path in SECTIONS:
        return _section(ours, SECTIONS[path]) != _section(theirs, SECTIONS[path])
    return True


def untrusted_changes(changes: Iterable[Change], trusted: TrustedPaths, *, repo: Path, base_tree: Path) -> list[Change]:
    """The pull request's changes to files the gate takes from the base (pyproject.toml only when one of its
    tables that decide anything changed)."""
    found = []
    for change in changes:
        if not trusted.covers(change.path):
            continue
        if (change.path == "pyproject.toml" or change.path in SECTIONS) and not _counts(change.path, repo, base_tree):
            continue  # the bot's packaging changed, not the testkit's or pytest's tables
        found.append(change)
    return found


def printable(path: str) -> str:
    """A path as one line: a name with a line break or another control character shown escaped."""
    return path if path.isprintable() else ascii(path)


def lines(found: list[Change]) -> list[str]:
    """One line a file (then a count): what the pull request changes that this gate does not use."""
    shown = [f"{change.verb} {printable(change.path)}: not used by this gate; takes effect once merged"
             for change in found[:MAX_LINES]]
    if len(found) > MAX_LINES:
        shown.append(f"and {len(found) - MAX_LINES} more files the gate takes from the base")
    return shown


def workflow_lines(found: list[Change]) -> list[str]:
    """One line a workflow file the pull request changes: a workflow runs as the pull request has it, this gate's
    own included, so its change acts before anyone reviews it."""
    running = os.environ.get("GITHUB_WORKFLOW_REF", "")  # owner/repo/.github/workflows/FILE@REF
    return [f"{change.verb} {printable(change.path)}: "
            f"{'the workflow running this gate' if f'/{change.path}@' in running else 'a workflow'}; it runs as this "
            "pull request has it, before review: review it before trusting this verdict"
            for change in found if change.path.startswith(WORKFLOWS)]
