"""The report files of a run: results JSON (rows, aggregates, gates, ledger, config), JUnit XML
and the self-contained HTML report, each written whole (temporary file, then rename)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..errors import StorageError
from ..files import write_atomically
from .html import render_html
from .junit import junit_xml


def report_json(report: Mapping[str, Any]) -> str:
    """The report as JSON, a line per field and per row: readable, and written by json's C encoder
    (``indent=`` takes its pure-Python one, seconds for thousands of rows)."""
    fields = []
    for key, value in report.items():
        if key == "rows" and isinstance(value, list):
            rows = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in value)
            fields.append(f' "rows": [\n{rows}\n ]' if rows else ' "rows": []')
        else:
            fields.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def write_report_files(report: Mapping[str, Any], *, json_path: Path | None = None, junit_path: Path | None = None,
                       html_path: Path | None = None, failures: list[str] | None = None) -> dict[str, Path]:
    """Write the files asked for; returns {kind: path} of what was written. A file that cannot be written
    (a full disk) does not stop the others: its one-line reason goes to ``failures`` (raised without it)."""
    written = {}
    for kind, path, render in (("JSON", json_path, report_json), ("JUnit XML", junit_path, lambda r: junit_xml(r["rows"])),
                               ("HTML", html_path, render_html)):
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
    return written
