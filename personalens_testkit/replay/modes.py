"""Record modes, with vcrpy's names and meanings."""

from __future__ import annotations

from ..errors import UsageError

#: none: replay only, never record (a missing or unmatched call is an error);
#: once: replay a cassette that exists, record one that does not;
#: new_episodes: replay what matches, record the rest into the same cassette;
#: all: call everything live and record it afresh.
RECORD_MODES = ("none", "once", "new_episodes", "all")


def check_record_mode(value: str, *, option: str = "--record-mode") -> str:
    if value not in RECORD_MODES:
        raise UsageError(f"{option}: {value!r} is not a record mode (use one of {', '.join(RECORD_MODES)})")
    return value
