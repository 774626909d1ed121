"""Fixtures shared by the testkit's own tests."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import httpcore  # noqa: F401
import jinja2  # noqa: F401
# loaded here, once: the package loads numpy only when a figure needs it, and a first load inside an in-process
# pytester run is undone with that run's modules - numpy's C core cannot be loaded a second time in one process
import numpy  # noqa: F401
import pytest
import vcr.cassette  # noqa: F401
import vcr.stubs.httpx_stubs  # noqa: F401

from personalens_testkit.data import bundled_root

# The modules a run loads with its first case or at its end (the plugin loads them late: a run's start-up is what a
# team waits for), loaded once here: an in-process pytester run drops what it imported, and the next run would load
# them all again (0.12 s a run, a few hundred runs).
for _name in ("evaluation", "run.cases_runner", "run.finish", "run.header", "run.rerun", "run.concurrency",
              "run.batch_judging", "run.cost_estimate", "report.html", "report.junit", "report.markdown",
              "report.changes", "gating.verdict", "calibration.report", "costs.estimate", "llm.openai_compat",
              "llm.env_refs", "transcript_file"):
    importlib.import_module(f"personalens_testkit.{_name}")

from .support.fake_llm import FakeLLM, Script
from .support.project import LEFT_OUT

pytest_plugins = ["pytester"]

# The modules above are imported here, before any in-process pytester run: pytester removes the
# modules a run imported when it ends, and an httpcore imported again afterwards has new exception
# classes that httpx's cached exception map no longer recognises (a later test then sees a raw
# httpcore.ConnectError instead of httpx.ConnectError).


def pytest_configure(config: pytest.Config) -> None:
    """A process these tests start leaves :data:`~.support.project.LEFT_OUT`'s plugins out: it reads PYTEST_ADDOPTS
    (this one's own options are parsed already)."""
    given = os.environ.get("PYTEST_ADDOPTS", "")
    os.environ["PYTEST_ADDOPTS"] = given if LEFT_OUT in given else f"{given} {LEFT_OUT}".strip()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's pytester, whose runs (in this process or a subprocess) leave the plugins of :data:`LEFT_OUT` out too
    (pytester clears PYTEST_ADDOPTS for its runs; a path given as an option's separate value also keeps a run from
    finding the ini file that says ``-p no:deepeval``)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", LEFT_OUT)
    return pytester


@pytest.fixture(autouse=True)
def _no_github_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs under GitHub Actions would append every test run's job summary to the testkit's own CI summary."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


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


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials and region, no shared AWS files: boto3 is set up, nothing leaves the machine."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
