"""One cassette: a scenario's recorded calls, played back in order by what they are matched on, or recorded.

The testkit's own class (issue 47: it was vcrpy's ``Cassette``, subclassed through its private ``_load``, ``_save``
and ``_path``), on no library's internals. What it stores is vcrpy's cassette format, version 1: each interaction a
request (method, uri, body, headers: name -> list of values) and a response (status, headers, body), so vcrpy's own
``use_cassette`` plays a cassette of ours with our persister (:mod:`.store`), and records one we play
(tests/test_replay_index.py compares the two, call by call).

Record modes (:data:`~.modes.RECORD_MODES`) mean what vcrpy's mean
(https://vcrpy.readthedocs.io/en/latest/usage.html#record-modes):

- ``none``: replay only; a call with no recorded answer left is a :class:`~..errors.CassetteMissError`;
- ``once``: a cassette on disk replays only (as ``none``); with none on disk every call is sent and recorded;
- ``new_episodes``: a call with a recorded answer left plays it, any other is sent and recorded beside them;
- ``all``: every call is sent and recorded; the cassette saved holds only those (what was on disk is not read).

A recorded answer plays once (a dialogue that asks the same thing twice was recorded twice, and plays its two
answers in order); answers recorded in this run never play back in it. A request is found by its key (method, the
model's address, the body's exact bytes) in one look-up, or, said in other bytes (keys in another order, other
spacing), by comparing canonical forms (:func:`~.matching.same_call`). The cassette is written only when it changed
(``dirty``), through a temporary file (:class:`~.store.XzPersister`).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..callsite import mark_replayed
from ..errors import CassetteMissError
from .matching import address, same_call
from .modes import RECORD_MODES

#: vcrpy's cassette format, version 1 (since vcrpy 1.0)
FORMAT_VERSION = 1

#: A response as stored: ``{"status": {"code", "message"}, "headers": {name: [values]}, "body": {"string": bytes}}``
Answer = dict[str, Any]


class Request:
    """A call's request as matched and stored: method, uri, body (bytes, or None for none) and headers (name ->
    value)."""

    __slots__ = ("method", "uri", "body", "headers")

    def __init__(self, method: str, uri: str, body: bytes | str | None, headers: Mapping[str, Any]) -> None:
        self.method = method
        self.uri = uri
        self.body = body.encode("utf-8") if isinstance(body, str) else None if body is None else bytes(body)
        #: a stored list of values reads as its first, as vcrpy reads one
        self.headers = {str(name): value[0] if isinstance(value, list) and value else value
                        for name, value in headers.items()}

    @classmethod
    def stored(cls, item: Mapping[str, Any]) -> Request:
        """A request from its stored form (:meth:`as_stored`)."""
        return cls(item["method"], item["uri"], item["body"], item["headers"])

    def as_stored(self) -> dict[str, Any]:
        """The stored form: vcrpy's (the body text where it is UTF-8, else bytes; each header a list of values)."""
        return {"method": self.method, "uri": self.uri, "body": _text(self.body),
                "headers": {name: [value] for name, value in self.headers.items()}}

    def key(self) -> tuple[str, str, bytes]:
        """What finds the request in one look-up: method, the model's :func:`~.matching.address`, the exact body."""
        return self.method, address(self.uri), self.body or b""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and self.as_stored() == other.as_stored()

    def __repr__(self) -> str:
        return f"Request({self.method} {self.uri}, {len(self.body or b'')} bytes)"


def stored_answer(answer: Answer) -> Answer:
    """An answer in its stored form, a copy: the body text where it is UTF-8 (as vcrpy stores it)."""
    body = answer.get("body")
    if isinstance(body, dict) and "string" in body:
        return {**answer, "body": {**body, "string": _text(body["string"])}}
    return dict(answer)


def read_answer(stored: Answer) -> Answer:
    """An answer from its stored form: the body's text as bytes (a body that cannot be UTF-8 stays as it is)."""
    body = stored.get("body")
    if isinstance(body, dict) and isinstance(body.get("string"), str):
        try:
            stored["body"]["string"] = body["string"].encode("utf-8")
        except UnicodeEncodeError:
            pass
    return stored


def _text(data: Any) -> Any:
    if isinstance(data, (bytes, bytearray)):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(data)
    return data


class Cassette:
    """One cassette, open in a record mode (:data:`RECORD_MODES`).

    ``filter_request(request)``: the request as stored and matched (None: one never recorded, sent as it is);
    ``filter_response(answer)``: the answer as stored (it may change the dict it is given: it gets a copy);
    ``request_key(method, uri, body, payload)``: the key of a request as ``filter_request`` would store it, without
    building it (None: never recorded), for the look-up; without it, every request is filtered first."""

    def __init__(
        self, path: str | Path, *, record_mode: str, persister: Any, serializer: Any = None,
        filter_request: Callable[[Request], Request | None] = lambda request: request,
        filter_response: Callable[[Answer], Answer | None] = lambda answer: answer,
        request_key: Callable[[str, str, bytes, Any], tuple[str, str, bytes] | None] | None = None,
    ) -> None:
        if record_mode not in RECORD_MODES:
            raise ValueError(f"record mode {record_mode!r}: one of {', '.join(RECORD_MODES)}")
        self.path = str(path)
        self.record_mode = record_mode
        self._persister, self._serializer = persister, serializer
        self._filter_request, self._filter_response, self._request_key = filter_request, filter_response, request_key
        #: (request, answer) in recorded order: those read from the file first
        self.data: list[tuple[Request, Answer]] = []
        #: how often each of ``data`` has played
        self.play_counts: list[int] = []
        self.metadata: dict[str, Any] = {}
        #: read from a file (a cassette that exists)
        self.loaded = False
        #: changed since it was read: written by :meth:`save` (a caller may clear it to keep the file as it was)
        self.dirty = False
        self._from_file = 0
        self._lock = threading.Lock()  # a judge's calls play and record from several threads at once
        #: raw key -> indices into ``data``, in recorded order
        self._index: dict[tuple[str, str, bytes], list[int]] = {}

    @classmethod
    def open(cls, path: str | Path, **settings: Any) -> Cassette:
        """The cassette at ``path``, read unless the record mode is ``all`` (no file: an empty one). One that is
        there but cannot be replayed is a :class:`~..errors.CassetteError` naming it."""
        cassette = cls(path, **settings)
        if cassette.record_mode != "all":
            cassette.read()
        return cassette

    def read(self) -> None:
        """Take in what the file holds, as recorded (it was filtered when it was)."""
        try:
            requests, answers, *metadata = self._persister.load_cassette(self.path, serializer=self._serializer)
        except FileNotFoundError:
            return
        for request, answer in zip(requests, answers):
            self._add(request, answer)
        self._from_file = len(self.data)
        self.metadata = dict(metadata[0]) if metadata else {}
        self.loaded = True

    @property
    def write_protected(self) -> bool:
        """Whether a call not recorded is a miss (never sent): mode ``none``, or ``once`` on a cassette on disk."""
        return self.record_mode == "none" or (self.record_mode == "once" and self.loaded)

    def __len__(self) -> int:
        return len(self.data)

    # -- a call ----------------------------------------------------------------------------------------------------
    def exchange(self, method: str, uri: str, body: bytes, payload: Any,
                 send: Callable[[], Answer]) -> Answer:
        """A call's answer: a request the filter drops (a bot's own traffic) is sent and kept nowhere; a recorded
        answer not yet played is played (never in mode ``all``); a cassette that may not record raises the miss;
        else the request is sent and its answer recorded. ``payload``: the JSON value ``body`` was encoded from
        (None: not known)."""
        if self._request_key is not None:
            key = self._request_key(method, uri, body, payload)
            if key is None:
                return send()
            answer = self._play(self._index.get(key, ()))
            if answer is not None:
                return answer
        request = self._filter_request(Request(method, uri, body, {"content-type": "application/json"}))
        if request is None:
            return send()
        answer = self._play(self._matches(request)) if self._from_file else None  # else nothing plays: no comparing
        if answer is not None:
            return answer
        if self.write_protected:
            raise self.miss(request)
        answer = send()
        self._record(request, answer)
        return answer

    def play(self, request: Request) -> Answer:
        """The next recorded answer to a request (filtered as stored); a :class:`~..errors.CassetteMissError` when none
        is left or the cassette may not play."""
        stored = self._filter_request(request)
        if stored is None:
            raise self.miss(request)
        answer = self._play(self._matches(stored))
        if answer is None:
            raise self.miss(stored)
        return answer

    def answers_to(self, request: Request, *, read: bool = False) -> list[Answer]:
        """Every recorded answer to a request, played or not, without playing them (a ``new_episodes`` recording
        may hold several: a bot's turn before and after its reply changed); ``read``: only those read from the
        file, not those recorded since."""
        stored = self._filter_request(request)
        found = [] if stored is None else self._matches(stored)
        return [self.data[index][1] for index in found if not read or index < self._from_file]

    def record(self, request: Request, answer: Answer) -> None:
        """Record a request and its answer, filtered as every recording is (the caller's dicts are not changed)."""
        stored = self._filter_request(request)
        if stored is not None:
            self._record(stored, answer)

    def miss(self, request: Request) -> CassetteMissError:
        """The miss of a request no answer is left for, with why (vcrpy's words for it): ``cassette_not_found``,
        ``already_played`` (the same call's answers all played), ``nothing_similar``."""
        if not self.loaded and not self.data:
            reason = "cassette_not_found"
        elif any(True for _ in self._matches(request)):
            reason = "already_played"
        else:
            reason = "nothing_similar"
        return CassetteMissError(self.path, request, reason, self)

    # -- inside ----------------------------------------------------------------------------------------------------
    def _play(self, indices: Iterable[int]) -> Answer | None:
        """The first of these recorded answers that may play (read from the file, not played yet), played."""
        with self._lock:
            for index in indices:
                if index < self._from_file and self.play_counts[index] == 0:
                    self.play_counts[index] += 1
                    mark_replayed()
                    return self.data[index][1]
        return None

    def _matches(self, request: Request) -> Iterator[int]:
        """Indices of the recorded answers to the same call: the exact bytes first, then the same in other bytes."""
        exact = self._index.get(request.key(), [])
        yield from list(exact)
        for index, (stored, _) in enumerate(list(self.data)):
            if index not in exact and same_call(request, stored):
                yield index

    def _record(self, request: Request, answer: Answer) -> None:
        kept = self._filter_response(copy.deepcopy(answer))  # the filters change what is stored, never what is answered
        if kept is None:
            return
        with self._lock:
            self._add(request, read_answer(kept))
            self.dirty = True

    def _add(self, request: Request, answer: Answer) -> None:
        self._index.setdefault(request.key(), []).append(len(self.data))
        self.data.append((request, answer))
        self.play_counts.append(0)

    def save(self) -> None:
        """Write the cassette if it changed: all it holds (in mode ``all``, only what this run recorded: the file was
        not read)."""
        if not self.dirty:
            return
        with self._lock:
            kept = list(self.data)
            self._persister.save_cassette(self.path, {
                "requests": [request for request, _ in kept], "responses": [answer for _, answer in kept],
                **({"metadata": self.metadata} if self.metadata else {}),
            }, serializer=self._serializer)
            self.dirty = False


def interactions(requests: Iterable[Any], answers: Iterable[Answer]) -> list[dict[str, Any]]:
    """Requests (ours, or any with method, uri, body and headers: vcrpy's) and answers in the stored form."""
    return [{"request": Request(request.method, request.uri, request.body, request.headers).as_stored(),
             "response": stored_answer(answer)} for request, answer in zip(requests, answers)]


