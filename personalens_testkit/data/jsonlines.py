"""JSON-lines files of our own models (the calibration set, a team's conversations): each line one object
with an ``id`` unique in the file; a bad line is one error naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import DataError, dotted
from ..files import json_lines

M = TypeVar("M", bound=BaseModel)


def read_models(path: Path, model: type[M], noun: str,
                check: Callable[[M], Optional[tuple[str, str]]] | None = None) -> list[M]:
    """Every line of ``path`` as a ``model`` (blank lines skipped); ``check(item)`` may return (field, what is
    wrong). Raises DataError when the file cannot be read, a line is not JSON or not valid, an id appears
    twice, or there is no line at all."""
    try:
        lines = json_lines(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(path, None, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    found: list[M] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = model.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DataError(path, f"line {number}", f"not JSON ({exc.msg})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            raise DataError(path, f"line {number}: {dotted(first['loc']) or noun}",
                            str(first["msg"]).removeprefix("Value error, ")) from None
        wrong = check(item) if check is not None else None
        if wrong is not None:
            raise DataError(path, f"line {number}: {wrong[0]}", wrong[1])
        key = item.id  # type: ignore[attr-defined]
        if key in seen:
            raise DataError(path, f"line {number}: id", f"{key!r} appears twice")
        seen.add(key)
        found.append(item)
    if not found:
        raise DataError(path, None, f"holds no {noun}")
    return found
