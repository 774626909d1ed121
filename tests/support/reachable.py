"""A ``tmp_path`` a sandboxed bot can reach for the whole test.

pytest's own temporary root (``/tmp/pytest-of-<user>``) is made private again (mode 0700) by every pytest session
that starts - a subprocess run of another test, on another xdist worker - which cuts a bot running under its own
user id off from its folder mid-test (its health URL answers 404, its files cannot be opened). A folder of its own
under the system's temporary folder is out of that reach.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="personalens-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
