"""When a request is the recorded one: one matcher for the whole call, and where two bodies differ.

vcrpy evaluates every matcher against every recorded request; ours is a single equality of
(method, the model's address, canonical JSON body), memoised, and where a body differs is worked
out only for a miss's message.

A model's identity in a cassette is what the spec names, not where the environment sent the
call: an OpenAI-compatible call is matched on its route (``/chat/completions``) and its body,
which names the model, whatever base URL ``OPENAI_BASE_URL`` gave it; a Bedrock call on the
model id in its path, whatever the region. So a recording made through a gateway replays
without it, and one made in us-east-1 replays in a CI whose region is another.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import urlsplit

_BEDROCK = re.compile(r"^bedrock-runtime(?:-fips)?\.[a-z0-9-]+(?:\.amazonaws\.com)?$")


@functools.lru_cache(maxsize=256)
def address(uri: str) -> str:
    """What a call's URI contributes to matching: the model's route, not the endpoint the environment chose."""
    parts = urlsplit(uri)
    host = (parts.hostname or "").lower()
    if _BEDROCK.match(host):
        return f"bedrock:{parts.path}"
    if parts.path.rstrip("/").endswith("/chat/completions"):
        return "openai-compatible:/chat/completions"
    return uri


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
    """vcrpy matcher, one for the whole call: method, the model's :func:`address` and the canonical JSON
    body. One matcher instead of seven: vcrpy evaluates every matcher against every recorded request;
    where a body differs is worked out only for a miss's message."""
    if not same_call(r1, r2):
        raise AssertionError("a different method or address" if (r1.method, address(r1.uri)) != (r2.method, address(r2.uri))
                             else "the JSON bodies differ")


def same_call(r1: Any, r2: Any) -> bool:
    """What :func:`call_matcher` checks, as a yes or no."""
    return (r1.method == r2.method and address(r1.uri) == address(r2.uri)
            and canonical_body(r1.body) == canonical_body(r2.body))


def body_difference(recorded: bytes | str | None, now: bytes | str | None, *, shown: int = 60) -> str:
    """Where two bodies first differ, compared canonically ("" when they match)."""
    a = canonical_body(recorded).decode("utf-8", "replace")
    b = canonical_body(now).decode("utf-8", "replace")
    if a == b:
        return ""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - 20)
    return f"differs at character {at}: recorded {a[start:at + shown]!r}, now {b[start:at + shown]!r}"
