"""Result rows: their typed schema, the one reader and writer of results files, and the recorded
results kept beside the cassettes. Every output of a run (results.jsonl, report.json, JUnit, HTML,
the summary) and every command (report, merge, compare, agreement) reads rows through here."""

from .files import ResultsWriter, load_rows, read_rows, write_rows
from .rows import CallRow, ResultRow, RowError, RunInfo, build_row

__all__ = ["CallRow", "ResultRow", "ResultsWriter", "RowError", "RunInfo", "build_row", "load_rows", "read_rows",
           "write_rows"]
