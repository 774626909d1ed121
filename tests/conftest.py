"""Fixtures shared by the testkit's own tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpcore  # noqa: F401
import pytest
import vcr.cassette  # noqa: F401
import vcr.stubs.httpx_stubs  # noqa: F401

from personalens_testkit.data import bundled_root

from .support.fake_llm import FakeLLM, Script

pytest_plugins = ["pytester"]

# The modules above are imported here, before any in-process pytester run: pytester removes the
# modules a run imported when it ends, and an httpcore imported again afterwards has new exception
# classes that httpx's cached exception map no longer recognises (a later test then sees a raw
# httpcore.ConnectError instead of httpx.ConnectError).


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
