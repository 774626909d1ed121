"""A pytester project that runs the real suites: the two suite files, a pytest.ini without
deepeval's plugin, and optionally a personalens.toml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

SUITES = Path(__file__).resolve().parent.parent.parent / "suites"
#: pytest plugins installed beside the testkit that no run of these tests exercises: a pytest process the tests start
#: (a pytester run, a bench script's, a CLI command's, a team repository's) loads none of them - deepeval's costs 1.8 s
#: of CPU a process, the other three 0.1 s together, and the suite starts several hundred (tests/conftest.py). A run
#: that must have a team's whole environment (tests/test_install.py, tests/test_workflow.py) clears PYTEST_* from its
#: environment; the gate clears PYTEST_ADDOPTS itself.
LEFT_OUT = " ".join(f"-p no:{name}" for name in ("deepeval", "anyio", "repeat", "rerunfailures"))
INI = ("[pytest]\naddopts = -p no:deepeval\nasyncio_default_fixture_loop_scope = function\n"
       "filterwarnings =\n    ignore::pytest.PytestAssertRewriteWarning\n")


def suite_project(pytester: pytest.Pytester, personalens_toml: str | None = None, *,
                  suites: tuple[str, ...] = ("test_single_domain.py", "test_multi_domain.py")) -> pytest.Pytester:
    for name in suites:
        shutil.copy(SUITES / name, pytester.path / name)
    pytester.makeini(INI)
    if personalens_toml is not None:
        pytester.makefile(".toml", personalens=personalens_toml)
    return pytester


def latest_results(root: Path) -> Path:
    """The results.jsonl of the project's most recent run (by the time its folder was made: run ids
    made within one second do not sort by time)."""
    return max(root.glob("personalens-results/*/results.jsonl"), key=lambda p: p.parent.stat().st_mtime_ns)


def read_rows(path: Path) -> list[dict]:
    """The complete rows of a results file, as plain dicts (a torn last line is skipped), each with its run's
    fields beside its own (the file holds them once a run, in the run's record)."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
               if line.endswith("\n") and line.strip()]
    return with_runs(records)


def with_runs(records: list[dict]) -> list[dict]:
    """Row records with their run's fields (``run_id`` naming a run record among them), run records left out."""
    runs = {record["run"]["run_id"]: record["run"] for record in records if "run" in record and "scenario_id" not in record}
    return [{**runs.get(record.get("run_id"), {}), **record} for record in records
            if not ("run" in record and "scenario_id" not in record)]


def recorded_rows(folder: Path) -> list[dict]:
    """The recorded results kept beside an assistant's cassettes (``results.jsonl.xz``), as plain dicts."""
    import lzma

    text = lzma.decompress((folder / "results.jsonl.xz").read_bytes()).decode("utf-8")
    return with_runs([json.loads(line) for line in text.splitlines() if line.strip()])


def write_recorded(folder: Path, rows: list[dict]) -> None:
    import lzma

    (folder / "results.jsonl.xz").write_bytes(lzma.compress("".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")))


def recording_project(pytester: pytest.Pytester, thresholds: str, config: str = "") -> pytest.Pytester:
    """A suite project that records every call (``record_mode = "all"``), with these thresholds and config lines."""
    project = suite_project(pytester, 'record_mode = "all"\n' + config)
    (project.path / "thresholds.yaml").write_text(thresholds)
    return project


def run_against(project: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    """pytest in the project, its OpenAI-compatible models at ``url``."""
    project._monkeypatch.setenv("OPENAI_BASE_URL", url)  # noqa: SLF001
    return project.runpytest(*args)


def latest_report(root: Path) -> dict:
    """The report.json of the project's most recent run."""
    return json.loads((latest_results(root).parent / "report.json").read_text())
