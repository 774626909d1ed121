"""The installed package is enough: build the wheel, install it (light core, not editable) into a fresh
virtual environment, scaffold a new repository with `personalens init`, and record then replay its own
bot against a loopback model server - the way a team adopts the testkit from its own repository."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .support.fake_llm import FakeLLM, Script

ROOT = Path(__file__).resolve().parent.parent
BOT = '''def reply(request):
    return {"reply": "Done - your usual alarm is set for tomorrow."}
'''


def sh(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="session")
def venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, testrun_uid: str) -> Path:
    """A fresh virtual environment with the testkit's wheel installed: no clone on its path, no editable install.
    Built once a test session, whichever xdist workers need it (issue 48: each built its own, half a minute each):
    the first builds it under a lock in the folder the workers share, the others wait and use it - it is only read."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if hasattr(request.config, "workerinput") else base
    work = shared / f"installed-wheel-{testrun_uid}"
    with open(shared / f"installed-wheel-{testrun_uid}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (work / "complete").exists():
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            _install(work)
            (work / "complete").write_text("")
    return work / "venv"


def _install(work: Path) -> None:
    source = work / "source"  # a copy: setuptools builds in the tree's build/, which two processes must not share
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                                ".hypothesis", ".pytest_cache", ".deepeval"))
    built = sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist", source, cwd=work)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (work / "dist").glob("personalens_testkit-*.whl")
    made = sh(sys.executable, "-m", "venv", work / "venv", cwd=work)
    assert made.returncode == 0, made.stderr[-2000:]
    installed = sh(work / "venv" / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=work, timeout=900)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "VIRTUAL_ENV", "OPENAI"))}
    return {**env, **extra}


def test_a_team_repository_records_and_replays_with_the_installed_wheel(venv, tmp_path):
    bin_dir = venv / "bin"
    where = sh(bin_dir / "python", "-c", "import personalens_testkit, importlib.util as u; "
               "print(personalens_testkit.__file__); print(u.find_spec('llama_cpp'))", cwd=tmp_path)
    assert str(venv) in where.stdout.splitlines()[0] and where.stdout.splitlines()[1] == "None"  # the light core

    repo = tmp_path / "team-repo"
    repo.mkdir()
    # before init: no suite to collect - one line says what to do, not pytest's bare exit 5
    empty = sh(bin_dir / "pytest", "--profiles", "7", "-p", "no:cacheprovider", cwd=repo, env=clean_env())
    assert empty.returncode == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "personalens: no PersonaLens case was collected" in empty.stdout and "`personalens init`" in empty.stdout
    init = sh(bin_dir / "personalens", "init", "--kind", "python", "--assistant", "team-bot", cwd=repo)
    assert init.returncode == 0, init.stderr
    assert {p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()} == {
        "suites/test_personalens.py", "suites/conftest.py", "personalens.toml", "thresholds.yaml", ".gitignore",
        ".github/workflows/personalens-pr-gate.yml"}
    (repo / "my_bot.py").write_text(BOT)
    with (repo / "personalens.toml").open("r+") as config:
        text = config.read()
        config.seek(0)
        config.write('user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n' + text)
    select = ["--profiles", "7", "--domains", "Alarm", "-k", "task-1"]

    with FakeLLM(Script(terminate_after=1)) as fake:
        record = sh(bin_dir / "pytest", "suites/", *select, "--record-mode", "once", cwd=repo,
                    env=clean_env(OPENAI_BASE_URL=fake.url, OPENAI_API_KEY="sk-test-not-a-real-key-000"))
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    assert "1 passed" in record.stdout and "PytestDeprecationWarning" not in record.stdout + record.stderr
    assert "assistant team-bot (kind python, context none); user agent openai:fake-user; judge openai:fake-judge" in record.stdout
    assert (repo / "cassettes" / "team-bot" / "user7-SD-Alarm-task-1.json.xz").is_file()

    replay = sh(bin_dir / "pytest", "suites/", *select, cwd=repo, env=clean_env(OPENAI_BASE_URL="http://127.0.0.1:9/v1"))
    assert replay.returncode == 0, replay.stdout[-3000:]
    assert "personalens: replaying 1 of 4 selected scenarios offline" in replay.stdout and "1 passed" in replay.stdout

    # the embedded model is an extra: asking for it names the extra, in one line, before any case
    local = sh(bin_dir / "pytest", "suites/", *select, "--record-mode", "all", "--judge-model", "local", cwd=repo,
               env=clean_env())
    assert local.returncode == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in local.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "pip install 'personalens-testkit[embedded]'" in errors[0], local.stderr
