"""JSON from outside - a model's or a bot's answer, a cassette - read within a bound and without ambiguity.

Two rules, each by structure, whatever the shape of the text:

- **Memory follows what is read.** Parsed, JSON takes more memory than its text: a value as small as ``{}``
  (two bytes) becomes an object of 64. So before a text is parsed, its values are counted - from above, at
  C speed: every value but the first follows one of ``{ [ , :``, so their number is at most one more than
  those characters' (inside strings too: a bound, never an undercount) - and a text with more than its limit
  is refused unread. Parsed memory is then at most about 100 bytes a value, whatever the shape.
- **Read as it is checked.** Bytes are read as UTF-8 only, nested values only as deep as Python's parser goes.
- **One meaning or none.** An object that gives a key twice (``"content"`` twice in an answer's message) is
  refused: which of the two a reader keeps is the reader's choice, not the writer's answer.
"""

from __future__ import annotations

import json
from typing import Any

#: the most values a model's or a bot's answer may hold (a chat answer holds a few dozen; 16 MiB of prose, the
#: most an answer may take on the wire, about 300,000 commas and colons)
MAX_ANSWER_VALUES = 1 << 20

#: the characters one of which stands before every JSON value but the first
_BEFORE_A_VALUE = tuple(ord(c) for c in "{[,:")


class UntrustedJsonError(ValueError):
    """A JSON text refused before or while it is read: too many values, or a key given twice in one object."""


def value_bound(data: bytes | bytearray | str) -> int:
    """At most how many values (keys included) the JSON text ``data`` holds."""
    if isinstance(data, str):
        return 1 + sum(data.count(chr(c)) for c in _BEFORE_A_VALUE)
    return 1 + sum(data.count(bytes((c,))) for c in _BEFORE_A_VALUE)


def check_values(data: bytes | bytearray | str, limit: int) -> None:
    """Refuse ``data`` if it may hold more than ``limit`` values (:func:`value_bound`). A text shorter than the limit
    is not counted: the bound is at most one more than its length (one of those characters before each value)."""
    if len(data) < limit:
        return
    found = value_bound(data)
    if found > limit:
        raise UntrustedJsonError(f"holds up to {found:,} JSON values: more than {limit:,} (read, they would take "
                                 f"about {found * 100 >> 20:,} MiB)")


def _one_of_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise UntrustedJsonError(f"the key {twice!r} is given twice in one object: which one is meant is not said")
    return found


def loads(data: bytes | bytearray | str, *, max_values: int) -> Any:
    """``json.loads(data)``, refused (:class:`UntrustedJsonError`) if it may hold more than ``max_values`` values, is
    nested deeper than Python reads, or an object in it gives a key twice; bytes must be UTF-8 (JSON's encoding
    between systems: json.loads would also read UTF-16 and 32, which no check of ours reads - a UnicodeDecodeError);
    any other fault is json's own error, which says where."""
    check_values(data, max_values)
    text = bytes(data).decode("utf-8-sig") if isinstance(data, (bytes, bytearray)) else data
    try:
        return json.loads(text, object_pairs_hook=_one_of_each)
    except RecursionError:
        raise UntrustedJsonError("is nested deeper than it can be read") from None
