"""A new report format is the two places docs/architecture.md names - its renderer and its row of
``report/outputs.FORMATS`` - proven end to end: a copy of the package with a CSV format added runs a real replay of
the shipped recording, takes the format's option and writes the file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import personalens_testkit

ROOT = Path(__file__).resolve().parent.parent

RENDERER = '''
def render_csv(report):
    yield "kind,value\\n"
    yield f"verdict,{report.verdict.outcome}\\n"
'''
ROW = ('    ReportFormat("CSV", "report.csv", "csv_report", "--csv", "the verdict as CSV", '
       'drawn_by("csv_report", "render_csv")),\n')


def test_a_new_report_format_is_its_renderer_and_its_row(tmp_path: Path):
    package = Path(personalens_testkit.__file__).parent
    copy = tmp_path / "site" / "personalens_testkit"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    (copy / "data").symlink_to(package / "data")
    (copy / "report" / "csv_report.py").write_text(RENDERER)  # the renderer
    outputs = copy / "report" / "outputs.py"
    text = outputs.read_text()
    end = text.index("\n)\n", text.index("FORMATS: tuple[ReportFormat, ...] = ("))
    outputs.write_text(text[:end + 1] + ROW + text[end + 1:])  # its row
    project = tmp_path / "project"  # this repository's suites, config and recording, beside no copy of the package
    shutil.copytree(ROOT / "suites", project / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "conftest.py", "thresholds.yaml"):
        shutil.copy(ROOT / name, project / name)
    (project / "cassettes").symlink_to(ROOT / "cassettes")
    chosen = tmp_path / "verdict.csv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")} | {"PYTHONPATH": str(copy.parent)}
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", "--profiles", "7",
                           "--domains", "Alarm", "--results-dir", str(tmp_path / "results"), "--csv-report", str(chosen)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"personalens: CSV report -> {chosen}" in done.stdout.splitlines()
    assert chosen.read_text() == "kind,value\nverdict,passed\n"  # the run's own verdict, as its terminal says it
    assert "personalens: verdict: passed" in done.stdout
    (folder,) = (tmp_path / "results").iterdir()
    assert {"report.json", "junit.xml", "report.html", "summary.md"} <= {p.name for p in folder.iterdir()}
