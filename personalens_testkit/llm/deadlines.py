"""Every model and bot call bounded as a whole: from connecting to the last byte of its answer.

A time-out per read lets a server that trickles its answer (a byte a second) hold a call for as
long as it likes. The rule instead: a call's ``timeout_s`` is a deadline
(:func:`~personalens_testkit.timebox.deadline`), and every wait of the call takes at most what is
left of the nearest deadline in force - its own, the scenario's, the preflight's:

- HTTP (httpx): the connections of :func:`~.transport.bounded_client`'s transport
  (:class:`BoundedBackend`'s) connect, send and read each chunk with a time-out of min(their own,
  what is left), so a trickle ends at the deadline and its connection is closed, not left running;
- a call whose waits the testkit cannot reach (botocore, a ``python`` bot):
  :func:`~personalens_testkit.timebox.call_by_deadline` runs it in a daemon thread waited for
  what is left;
- :func:`~.timeouts.timed_out` is the error of a call that ran out: it names the limit it met (``the time
  limit of 2 s (timeout_s)``); one that met the scenario's is :class:`DeadlineReached`, never retried.

The same connections count the bytes an answer takes under :func:`byte_budget`: a model that
answers without end is cut off at the budget on the wire - before a recording, which reads a whole
answer, or the client can hold it in memory.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Any, Iterator

import httpcore
import httpx

from ..errors import ModelError
from ..timebox import time_left
from .timeouts import ran_out, timed_out

#: the most bytes a model's answer may take on the wire (a judge answers in at most a few thousand tokens)
MAX_ANSWER_BYTES = 16 * 1024 * 1024

#: the bytes the answer of the call under way may still take (a one-item list: counted down as it is read)
_BUDGET: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("byte_budget", default=None)


class AnswerTooLarge(httpcore.ReadError):
    """An answer that took more bytes than its budget (turned into a ModelError by :func:`http_failure`)."""


@contextlib.contextmanager
def byte_budget(limit: int) -> Iterator[None]:
    """The answers read in this context take at most ``limit`` bytes on the wire, all of them together."""
    token = _BUDGET.set([limit])
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _counted(data: bytes) -> bytes:
    budget = _BUDGET.get()
    if budget is not None:
        budget[0] -= len(data)
        if budget[0] < 0:
            raise AnswerTooLarge("the answer is larger than its byte budget")
    return data


def _wait(timeout: float | None, error: type[Exception]) -> float | None:
    """The time-out of one network wait: its own, lowered to what is left of the nearest deadline."""
    left = time_left(timeout)
    if left is not None and left <= 0:
        raise error("the call's time limit ran out")
    return left


class RefusedAnswer(httpcore.ReadError):
    """An answer refused from its head, before its body is read (turned into a ModelError by :func:`http_failure`)."""


class EncodedAnswer(RefusedAnswer):
    """An answer sent compressed though the request asked for none: decoded, a few KB can become gigabytes."""


class HeadTooLarge(RefusedAnswer):
    """An answer whose head (status line and fields) is larger than :data:`MAX_HEAD_BYTES`: never read past unchecked."""


#: the end of a response head, as h11 finds it: a blank line, its line breaks CRLF or a bare LF
_HEAD_END = re.compile(rb"\n\r?\n")
#: the most bytes a response head may take (status line and fields together; httpcore's own limit is 100 KiB)
MAX_HEAD_BYTES = 64 * 1024


def content_codings(head: bytes) -> list[str]:
    """The content codings a response head declares other than ``identity``: every item of every Content-Encoding
    field (a field continued on the next line - obsolete line folding - read as one), lower-cased."""
    fields: list[bytes] = []
    for line in head.split(b"\n")[1:]:  # the status line is not a field
        line = line.rstrip(b"\r")
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1] += b" " + line.strip()
        else:
            fields.append(line)
    codings = []
    for field in fields:
        name, colon, value = field.partition(b":")
        if colon and name.strip().lower() == b"content-encoding":
            codings += [item.strip().lower().decode("latin-1") for item in value.split(b",")]
    return [coding for coding in codings if coding not in ("", "identity")]


class _BoundedStream(httpcore.NetworkStream):
    """A connection whose every read, write and TLS handshake waits no longer than the deadlines allow, and whose
    answers are refused if they come compressed (their size on the wire would say nothing of their size) or with a
    head too large to check."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        #: the head of the answer being read (None: in its body)
        self._head: bytearray | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = _counted(self._inner.read(max_bytes, _wait(timeout, httpcore.ReadTimeout)))
        if self._head is not None:
            self._look_at_head(data)
        return data

    def _look_at_head(self, data: bytes) -> None:
        assert self._head is not None
        searched = max(0, len(self._head) - 2)  # the end of a head may straddle two reads
        self._head += data
        while self._head is not None:
            end = _HEAD_END.search(self._head, searched)  # where h11, httpcore's parser, ends a head
            if (len(self._head) if end is None else end.start()) > MAX_HEAD_BYTES:  # however many reads it took
                raise HeadTooLarge(f"the answer's head is larger than {MAX_HEAD_BYTES:,} bytes (MAX_HEAD_BYTES)")
            if end is None:
                return
            head, rest = bytes(self._head[:end.start()]), self._head[end.end():]
            encoded = content_codings(head)
            if encoded:
                raise EncodedAnswer(f"the answer came compressed (Content-Encoding: "
                                    f"{', '.join(encoded)[:40]}) though none was asked for")
            # an interim answer (100 Continue) is followed by the real head
            self._head, searched = (bytearray(rest) if head[9:10] == b"1" else None), 0

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._head = bytearray()  # a request: its answer's head comes next
        self._inner.write(buffer, _wait(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._inner.start_tls(ssl_context, server_hostname,
                                                    _wait(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class BoundedBackend(httpcore.NetworkBackend):
    """httpcore's network backend, its connections bounded by the deadlines in force."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._inner.connect_tcp(host, port, _wait(timeout, httpcore.ConnectTimeout),
                                                      local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._inner.connect_unix_socket(path, _wait(timeout, httpcore.ConnectTimeout),
                                                              socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _caused_by(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``'s chain of causes (``exc`` itself included), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def http_failure(exc: httpx.TransportError, *, what: str, url: str, model: str,
                 retry_timeouts: bool = True) -> ModelError:
    """An httpx transport error as a (retryable) ModelError: a time-out names the limit it met (retried unless
    ``retry_timeouts`` is off: a bot's time limit is its last word); anything else (a refused or dropped
    connection) says the URL cannot be reached."""
    refused = _caused_by(exc, RefusedAnswer)
    if refused is not None:
        return ModelError(f"{what.removeprefix('no ')} refused: {refused}", model=model)
    if _caused_by(exc, AnswerTooLarge) is not None:
        return ModelError(f"{what.removeprefix('no ')} larger than {MAX_ANSWER_BYTES:,} bytes: given up as it came",
                          model=model)
    if isinstance(exc, httpx.TimeoutException):
        limit = ran_out()
        if limit is not None:
            return timed_out(what, limit, model=model, retryable=retry_timeouts)
        if not isinstance(exc, httpx.ConnectTimeout):
            return ModelError(f"{what} within the time limit ({type(exc).__name__})", model=model, retryable=True)
    return ModelError(f"cannot reach {url} ({type(exc).__name__}: {exc})", model=model, retryable=True)
