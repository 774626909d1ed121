"""Every model call routed to the cassette of the calling thread.

The testkit's model clients (OpenAI-compatible ones, the embedded model included, and Bedrock's through botocore's
``before-send`` event) hand each call to :func:`exchange`, which answers it from the cassette active in the calling
thread (the ``ACTIVE`` context variable), or sends it and records the answer, or - none active - just sends it.
Nothing is patched: a bot's own HTTP clients are its own, its traffic sent and kept nowhere (the cassette's filter
drops it), and two scenarios recording at once in one process each record into their own cassette.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Callable

#: The cassette open in this thread, if any (:class:`~.cassette.Cassette`).
ACTIVE: ContextVar[Any] = ContextVar("personalens_active_cassette", default=None)


def exchange(method: str, uri: str, body: bytes, payload: Any, send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A model call's answer (a response in the cassette's form) from this thread's cassette: replayed, or sent and
    recorded; sent and kept nowhere when no cassette is active (the model client's :data:`~..llm.base.AnswerSource`).

    The request is what the client sends, the answer what it reads (whole, within its byte budget). ``payload``: the
    JSON value the caller encoded ``body`` from (None: not known), so that it is not parsed again."""
    active = ACTIVE.get()
    return send() if active is None else active.exchange(method, uri, body, payload, send)
