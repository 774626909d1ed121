"""The report files of a run: results JSON (rows, aggregates, gates, ledger, config), JUnit XML,
the self-contained HTML report and the job summary in Markdown (:data:`FORMATS`, one row a format), each written
whole (temporary file, then rename); the job summary is also appended to GitHub's step summary when there is one."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping

from ..errors import StorageError
from ..files import write_atomically, write_chunks_atomically

if TYPE_CHECKING:
    from .model import RunReport

#: what draws a report file: the whole text, or its pieces
Renderer = Callable[["RunReport"], "str | Iterable[str]"]


def report_json(report: RunReport) -> Iterator[str]:
    """The report as JSON, a line per field and per row: readable, and compact where it is big. Written in pieces:
    the per-case ledger and the rows are read from the run's results file one at a time, never held whole."""
    data = report.model_dump(mode="json", exclude={"rows"})
    yield "{\n"
    for number, (key, value) in enumerate(data.items()):
        yield ("" if number == 0 else ",\n") + f" {json.dumps(key)}: "
        if key == "ledger" and report.streams:
            yield from _streamed_ledger(report, value)
        else:
            yield json.dumps(value, ensure_ascii=False)
    runs = ",\n  ".join(run.model_dump_json() for run in report.row_runs())
    yield (",\n" if data else "") + ' "runs": [' + (f"\n  {runs}\n ]" if runs else "]")
    yield ',\n "rows": ['
    for number, line in enumerate(report.row_lines()):
        yield ("\n  " if number == 0 else ",\n  ") + line
    yield "\n ]\n}\n" if report.rows else "]\n}\n"


def _streamed_ledger(report: RunReport, value: dict) -> Iterator[str]:
    """``{"total": ..., "per_scenario": {...}}`` as json.dumps writes it, each case's entry as it was kept while the
    rows were added up, or else from its results line."""
    from ..data.models import case_id
    from .ledger import case_entry, role_ledger

    yield '{"total": ' + json.dumps(value["total"], ensure_ascii=False) + ', "per_scenario": {'
    entries = report.ledger.spooled_entries()
    if entries is None:
        records = (json.loads(line) for line in report.row_lines())
        entries = (case_entry(case_id(r["scenario_id"], r.get("repeat") or 1), role_ledger(r.get("calls") or []))
                   for r in records)
    for number, entry in enumerate(entries):
        yield ("" if number == 0 else ", ") + entry
    yield "}}"


@dataclass(frozen=True)
class ReportFormat:
    """One kind of report file: its name in messages, its file name in a run's folder, the run setting that
    names another path for it (``--json-report``, ...), the ``personalens report`` option that asks for it,
    and how it is drawn. A new format is a row of :data:`FORMATS` and its renderer: the run, its options and
    the commands take it from here."""

    kind: str
    default_name: str
    setting: str
    cli_flag: str
    what: str
    #: the file's text, whole or in pieces (a big run's report is written without being held whole)
    render: Renderer
    #: what else writing it does, said in its option's help
    also: str = ""

    @property
    def cli_dest(self) -> str:
        return self.cli_flag.lstrip("-").replace("-", "_")


def drawn_by(module: str, name: str) -> Renderer:
    """The renderer ``name`` of this package's ``module``, imported when a report is drawn (every process reads
    :data:`FORMATS` through the run's settings; only the one that ends a run draws)."""
    def render(report: RunReport) -> str | Iterable[str]:
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)(report)  # type: ignore[no-any-return]

    render.__qualname__ = f"{module}.{name}"
    return render


FORMATS: tuple[ReportFormat, ...] = (
    ReportFormat("JSON", "report.json", "json_report", "--json", "the run report as JSON", report_json),
    ReportFormat("JUnit XML", "junit.xml", "junit_report", "--junit", "JUnit XML with scores as properties",
                 drawn_by("junit", "junit_xml")),
    ReportFormat("HTML", "report.html", "html_report", "--html", "the self-contained HTML report",
                 drawn_by("html", "render_html")),
    ReportFormat("job summary", "summary.md", "summary_md", "--summary-md", "the job summary in Markdown",
                 drawn_by("markdown", "render_markdown"), also="(also appended to $GITHUB_STEP_SUMMARY when that is set)"),
)


def in_folder(folder: Path, chosen: Mapping[str, Path | None] | None = None) -> dict[str, Path]:
    """Every format's path, by its setting's name: the one ``chosen`` names, else its file in ``folder``."""
    chosen = chosen or {}
    return {f.setting: chosen.get(f.setting) or folder / f.default_name for f in FORMATS}


def write_report_files(report: RunReport, paths: Mapping[str, Path | None], *,
                       failures: list[str] | None = None) -> dict[str, Path]:
    """Write the files ``paths`` asks for (by the format's setting name; None or absent: not written); returns
    {kind: path} of what was written. A file that cannot be written (a full disk) does not stop the others: its
    one-line reason goes to ``failures`` (raised without it). The job summary also goes to
    ``$GITHUB_STEP_SUMMARY`` when that is set."""
    written = {}
    for form in FORMATS:
        path = paths.get(form.setting)
        if path is None:
            continue
        try:
            text = form.render(report)
            if isinstance(text, str):
                write_atomically(path, text)
            else:
                write_chunks_atomically(path, text)
        except StorageError as exc:
            if failures is None:
                raise
            failures.append(f"{form.kind} report: {exc}")
            continue
        written[form.kind] = path
    if paths.get("summary_md") is not None:
        from .markdown import append_step_summary, render_markdown

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
