"""Some fields of each record of a results file, read without making the rest of each line into objects.

:func:`load_fields` gives what :func:`~.files.load_records` gives, each record cut to the fields asked for: the
same values, type for type, or the same error. A JSON-lines file is read a line at a time by pydantic-core's
parser, which skips what it is not asked for (the recorded results beside the cassettes, which every process of a
replay reads: 4,096 rows of 2 KB in 0.03 s instead of 0.11 s). Anything else - one JSON value (a report, a list),
a line that parser refuses (a lone surrogate, say), a record without ``scenario_id`` - goes the way of
:func:`~.files.load_records`, which reads it or says why not.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict

from ..files import json_lines
from .files import load_records, results_text, whole_lines
from .rows import ResultRow
from .runs import is_run_record


@functools.lru_cache(maxsize=8)
def field_reader(names: tuple[str, ...]) -> TypeAdapter[Any]:
    """A JSON object's fields ``names`` (those it has), as ``json.loads`` reads them, the rest of it read past:
    ``field_reader(names).validate_json(line)``."""
    return TypeAdapter(TypedDict("Fields", {name: NotRequired[Any] for name in names}))  # type: ignore[misc]


def _from_lines(text: str, names: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """Each whole line's fields, when the text is JSON lines (two or more, each an object with a scenario_id that
    the parser reads, no line left out but a torn last one); else None. Objects alone on their lines, with nothing
    between them, are never one JSON value, so the text is read as lines, as :func:`~.files.load_records` reads it
    (lines end at a line feed only: :func:`~personalens_testkit.files.json_lines`)."""
    written = [line for line in json_lines(text, keepends=True) if line.strip()]
    lines = list(whole_lines(written))
    if len(lines) < 2 or (lines != written and lines != written[:-1]):
        return None
    reader = field_reader((*names, "run"))
    try:
        found = [reader.validate_json(line) for line in lines]
    except ValidationError:
        return None
    rows = [record for record in found if not is_run_record(record)]  # a run's record holds no row's field
    for record in rows:
        record.pop("run", None)
    return rows if all("scenario_id" in record for record in rows) else None


def load_fields(path: Path, names: tuple[str, ...], *, what: str = "results") -> list[dict[str, Any]]:
    """The fields ``names`` and ``scenario_id`` of each row of ``path`` (see the module's text): fields a row
    declares (:class:`~.rows.ResultRow`'s, never its run's: a ValueError names one that is not)."""
    names = ("scenario_id", *(name for name in names if name != "scenario_id"))
    unknown = [name for name in names if name not in ResultRow.model_fields or name == "run"]
    if unknown:
        raise ValueError(f"not a field of a result row: {', '.join(unknown)}")
    text = results_text(path, what)
    found = _from_lines(text, names)
    if found is not None:
        return found
    return [{name: record[name] for name in names if name in record}
            for record in load_records(path, what=what, text=text)]
