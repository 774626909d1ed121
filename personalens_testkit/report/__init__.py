"""Result rows and transcripts (no LLMs, no pytest)."""

from .results import ResultRow, ResultsWriter, RunInfo, build_row, read_rows

__all__ = ["ResultRow", "ResultsWriter", "RunInfo", "build_row", "read_rows"]
