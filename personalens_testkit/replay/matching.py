"""When a request is the recorded one: one matcher for the whole call, and where two bodies differ.

vcrpy evaluates every matcher against every recorded request; ours is a single equality of
(method, normalised URI, canonical JSON body), memoised, and where a body differs is worked
out only for a miss's message.
"""

from __future__ import annotations

import functools
import json
from typing import Any


def canonical_body(body: bytes | str | None) -> bytes:
    """The body as matched: JSON re-serialised with sorted keys, anything else as its bytes."""
    if body is None:
        return b""
    return _canonical(body.encode("utf-8") if isinstance(body, str) else bytes(body))


@functools.lru_cache(maxsize=4096)
def _canonical(data: bytes) -> bytes:
    """Memoised: a replay compares each request with every recorded one, so recorded bodies recur."""
    try:
        parsed = json.loads(data)
    except ValueError:
        return data
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def call_matcher(r1: Any, r2: Any) -> None:
    """vcrpy matcher, one for the whole call: method, scheme, host, port, path and query (of the
    normalised URI) and the canonical JSON body. One matcher instead of seven: vcrpy evaluates
    every matcher against every recorded request; where a body differs is worked out only for
    a miss's message."""
    if not same_call(r1, r2):
        raise AssertionError("a different method or address" if (r1.method, r1.uri) != (r2.method, r2.uri)
                             else "the JSON bodies differ")


def same_call(r1: Any, r2: Any) -> bool:
    """What :func:`call_matcher` checks, as a yes or no."""
    return r1.method == r2.method and r1.uri == r2.uri and canonical_body(r1.body) == canonical_body(r2.body)


def body_difference(recorded: bytes | str | None, now: bytes | str | None, *, shown: int = 60) -> str:
    """Where two bodies first differ, compared canonically ("" when they match)."""
    a = canonical_body(recorded).decode("utf-8", "replace")
    b = canonical_body(now).decode("utf-8", "replace")
    if a == b:
        return ""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - 20)
    return f"differs at character {at}: recorded {a[start:at + shown]!r}, now {b[start:at + shown]!r}"
