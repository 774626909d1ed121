"""The trusted tree of a gate run: the base commit's files in a folder of their own, read-only while the run
reads them, with a digest that shows whether anything changed them before the verdict."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

#: pytest's own config files, in the order pytest looks for them, and the table that makes each one count
PYTEST_CONFIGS = (("pytest.toml", None), (".pytest.toml", None), ("pytest.ini", None), (".pytest.ini", None),
                  ("pyproject.toml", "[tool.pytest"), ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))
#: the config file a gate writes when the base has none: pytest then looks no further up
EMPTY_CONFIG = ".personalens-gate.ini"


def pytest_config(root: Path) -> Path:
    """The file pytest would read as its config in ``root``; if the base has none, an empty one written there,
    so that pytest never looks above the trusted tree (where the pull request's files are)."""
    for name, table in PYTEST_CONFIGS:
        path = root / name
        if path.is_file() and not path.is_symlink():
            if table is None or table in path.read_text(encoding="utf-8", errors="replace"):
                return path
    path = root / EMPTY_CONFIG
    path.write_text("[pytest]\n", encoding="utf-8")
    return path


def digest(root: Path) -> str:
    """One hash over every file's path, mode and bytes (a symlink: its target's name) under ``root``."""
    total = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            total.update(str(path.relative_to(root)).encode("utf-8", "surrogateescape") + b"\0")
            if path.is_symlink():
                total.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
                continue
            total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


def set_writable(root: Path, writable: bool) -> None:
    """Every folder and file under ``root`` read-only (or writable again, to remove it)."""
    write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            path.chmod((mode | stat.S_IWUSR) if writable else (mode & ~write))
    mode = root.stat().st_mode
    root.chmod((mode | stat.S_IWUSR) if writable else (mode & ~write))
