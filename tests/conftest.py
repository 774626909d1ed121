"""Fixtures shared by the testkit's own tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from personalens_testkit.data import bundled_root

from .support.fake_llm import FakeLLM, Script

pytest_plugins = ["pytester"]


@pytest.fixture
def fake_llm():
    with FakeLLM(Script()) as server:
        yield server


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A writable copy of a few bundled profiles in the upstream layout (for corrupting)."""
    src = bundled_root() / "data"
    dst = tmp_path / "personalens" / "data"
    shutil.copytree(src / "task", dst / "task")
    for user in ("user7", "user53"):
        shutil.copytree(src / "profile" / user, dst / "profile" / user)
    return dst.parent
