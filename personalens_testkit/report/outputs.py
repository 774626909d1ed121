"""The report files of a run: results JSON (rows, aggregates, gates, ledger, config), JUnit XML,
the self-contained HTML report and the job summary in Markdown, each written whole (temporary file,
then rename); the job summary is also appended to GitHub's step summary when there is one."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import StorageError
from ..files import write_atomically
from .html import render_html
from .junit import junit_xml
from .markdown import append_step_summary, render_markdown
from .model import RunReport


def report_json(report: RunReport) -> str:
    """The report as JSON, a line per field and per row: readable, and compact where it is big."""
    data = report.model_dump(mode="json", exclude={"rows"})
    fields = [f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}" for key, value in data.items()]
    rows = ",\n".join("  " + row.model_dump_json() for row in report.rows)
    fields.append(f' "rows": [\n{rows}\n ]' if rows else ' "rows": []')
    return "{\n" + ",\n".join(fields) + "\n}\n"


def write_report_files(report: RunReport, *, json_path: Path | None = None, junit_path: Path | None = None,
                       html_path: Path | None = None, summary_path: Path | None = None,
                       failures: list[str] | None = None) -> dict[str, Path]:
    """Write the files asked for; returns {kind: path} of what was written. A file that cannot be written
    (a full disk) does not stop the others: its one-line reason goes to ``failures`` (raised without it).
    With a ``summary_path``, the job summary also goes to ``$GITHUB_STEP_SUMMARY`` when that is set."""
    written = {}
    for kind, path, render in (("JSON", json_path, report_json), ("JUnit XML", junit_path, junit_xml),
                               ("HTML", html_path, render_html), ("job summary", summary_path, render_markdown)):
        if path is None:
            continue
        try:
            write_atomically(path, render(report))
        except StorageError as exc:
            if failures is None:
                raise
            failures.append(f"{kind} report: {exc}")
            continue
        written[kind] = path
    if summary_path is not None:
        try:
            step = append_step_summary(render_markdown(report))
        except StorageError as exc:
            if failures is None:
                raise
            failures.append(f"GitHub step summary: {exc}")
        else:
            if step is not None:
                written["GitHub step summary"] = step
    return written
