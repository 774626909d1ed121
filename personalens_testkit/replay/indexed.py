"""vcrpy's Cassette with its recorded calls indexed by what they are matched on.

vcrpy finds a request's answer by comparing it with every recorded request, several
times per call (``can_play_response_for``, ``__contains__``, ``play_response``), and
re-filters and deep-copies every stored interaction as it loads a cassette. Our one
matcher (:func:`~personalens_testkit.replay.matching.call_matcher`) is an equality of
(method, normalised URI, canonical body), so the same answers come from a dictionary:
same order, same play counts, same record modes; vcrpy's own code does the rest (saving,
re-recording, the message of a miss).

The index is on the exact bytes of the body: a replayed call sends what was recorded,
byte for byte, and is found in one look-up. A body that says the same in other bytes
(keys in another order, other spacing) is still found, by comparing canonical forms.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Iterator

from vcr.cassette import Cassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.persisters.filesystem import CassetteDecodeError, CassetteNotFoundError
from vcr.request import Request

from ..callsite import mark_replayed
from ..errors import CassetteError
from .matching import address, same_call


def raw_key(request: Any) -> tuple[str, str, bytes]:
    """Method, the model's address and the body's exact bytes."""
    stored = request.__dict__.get("_stored") if type(request) is StoredRequest else None
    method, uri, body = (request.method, request.uri, request.body) if stored is None else (
        stored["method"], stored["uri"], stored["body"])
    return method, address(uri), body.encode("utf-8") if isinstance(body, str) else bytes(body or b"")


class StoredRequest(Request):
    """A recorded request (its dict in the cassette: method, uri, body, headers) as vcrpy's Request, made only when
    something reads it: a replay that finds each call by its key (:func:`raw_key`, read from the dict) never does,
    where building twelve a scenario took a tenth of a millisecond. It is made whole on the side and then taken
    in at once, under a lock (a judge's calls read a cassette from several threads), so a reader never sees half
    of it; one that cannot be made (a body with a lone surrogate) raises as vcrpy's would, on every read. Once made
    it is the Request vcrpy's own ``Request._from_dict`` makes."""

    def __init__(self, stored: dict[str, Any]) -> None:  # noqa: D107 - vcrpy's __init__ runs on the first use
        self.__dict__["_stored"] = stored

    def _make(self) -> None:
        with _MAKING:
            stored = self.__dict__.get("_stored")
            if stored is not None:
                made = Request(**stored)
                self.__dict__.update(made.__dict__)
                del self.__dict__["_stored"]

    def __getattr__(self, name: str) -> Any:  # only for what is not there yet: everything, until the first read
        if "_stored" not in self.__dict__:
            raise AttributeError(name)
        self._make()
        return getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:  # a change made before any read lands on the whole request
        if "_stored" in self.__dict__:
            self._make()
        super().__setattr__(name, value)

    def __copy__(self) -> StoredRequest:  # as copy.copy copies vcrpy's: the same headers object
        self._make()
        copied = object.__new__(StoredRequest)
        copied.__dict__.update(self.__dict__)
        return copied


_MAKING = threading.Lock()


class _Sent:
    """What a recording's request filter reads of a request sent (vcrpy's Request builds a headers dict first)."""

    __slots__ = ("method", "uri", "body", "headers")

    def __init__(self, method: str, uri: str, body: bytes, headers: Any) -> None:
        self.method, self.uri, self.body, self.headers = method, uri, body, headers


class IndexedCassette(Cassette):
    def __init__(self, *args: Any, request_key: Callable[[str, str, bytes, Any], Any] | None = None,
                 **kwargs: Any) -> None:
        """``request_key(method, uri, body, payload)``: the raw key of a request as ``before_record_request``
        would filter it (None: a request it drops), for :meth:`replay_answer`'s look-up."""
        super().__init__(*args, **kwargs)
        self._request_key = request_key
        self._appending = threading.Lock()
        #: raw key -> indices into ``data``, in recorded order
        self._index: dict[tuple[str, str, bytes], list[int]] = {}
        #: the last request filtered, and its filtered form (vcrpy asks about one request several times)
        self._last: tuple[Any, Any] = (None, None)

    def append(self, request: Any, response: Any) -> None:
        with self._appending:  # a judge's calls may be recorded from several threads at once
            before = len(self.data)
            super().append(request, response)
            if len(self.data) > before:
                self._index.setdefault(raw_key(self.data[-1][0]), []).append(before)

    def exchange(self, method: str, uri: str, body: bytes, payload: Any,
                 send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A call's answer, as vcrpy's stubs decide it: a request the filter drops (a bot's own traffic) is sent and
        kept nowhere; a recorded answer not yet played is played (unless record mode ``all``); a cassette that may
        not record raises vcrpy's miss; else the request is sent and its answer recorded."""
        key = self._request_key(method, uri, body, payload) if self._request_key is not None else ()
        if key is None:
            return send()
        if self.write_protected:
            answer = self.replay_answer(method, uri, body, payload, key=key or None)
            return send() if answer is None else answer
        sent = _Sent(method, uri, body, {"content-type": "application/json"})
        request = Request(sent.method, sent.uri, sent.body, sent.headers)
        if self.can_play_response_for(request):
            return self.play_response(request)
        answer = send()
        self.record_sent(sent, copy.deepcopy(answer))  # the filters change what they store, never what is answered
        return answer

    def record_sent(self, sent: Any, response: dict[str, Any]) -> None:
        """Record a request sent and its answer, as :meth:`append` does, for a caller that built both afresh
        (:meth:`exchange`): ``sent`` has the method, uri, body and headers ``before_record_request`` reads,
        ``response`` is vcrpy's dict of the answer, the caller's own (the filters change it)."""
        request = self._before_record_request(sent)
        if not request:
            return
        if request is sent:  # a filter that keeps the request as it is: stored as vcrpy stores one
            request = Request(sent.method, sent.uri, sent.body, sent.headers)
        response = self._before_record_response(response)
        if response is None:
            return
        with self._appending:
            self._index.setdefault(raw_key(request), []).append(len(self.data))
            self.data.append((request, response))
            self.dirty = True

    def _load(self) -> None:
        """As vcrpy loads, without re-filtering what was filtered when it was recorded. A cassette that cannot
        be replayed (:class:`~personalens_testkit.errors.CassetteError`) is an error, except in record mode
        ``all``, which records it afresh."""
        try:
            requests, responses, *metadata = self._persister.load_cassette(self._path, serializer=self._serializer)
        except CassetteNotFoundError:
            return
        except CassetteError:
            if self.record_mode == "all":
                return
            raise
        except CassetteDecodeError:
            super()._load()  # vcrpy's warning, and an empty cassette
            return
        for request, response in zip(requests, responses):
            self._index.setdefault(raw_key(request), []).append(len(self.data))
            self.data.append((request, response))
            self._old_interactions.append((request, response))
        self._loaded_count = len(self.data)
        self.dirty = False
        self.rewound = True
        self._metadata = metadata[0] if metadata else {}

    def _filtered(self, request: Any) -> Any:
        last, filtered = self._last
        if request is not last:
            filtered = self._before_record_request(request)
            self._last = (request, filtered)
        return filtered

    def _responses(self, request: Any) -> Iterator[tuple[int, Any]]:
        filtered = self._filtered(request)
        if not filtered:
            return
        exact = self._index.get(raw_key(filtered), ())
        for index in exact:
            yield index, self.data[index][1]
        for index, (stored, response) in enumerate(self.data):  # the same call in other bytes
            if index not in exact and same_call(filtered, stored):
                yield index, response

    def play_response(self, request: Any) -> Any:
        response = super().play_response(request)
        mark_replayed()
        return response

    def recorded_responses(self, request: Any) -> list[Any]:
        """Every recorded response to a request, read without playing them (a new_episodes recording may hold
        several: a bot's turn before and after its reply changed)."""
        return [response for _, response in self._responses(request)]

    def can_play_response_for(self, request: Any) -> bool:
        return bool(
            self._filtered(request) and request in self and self.record_mode != "all"
            and (self.rewound or self.allow_playback_repeats)
        )

    def replay_answer(self, method: str, uri: str, body: bytes, payload: Any = None, *,
                      key: tuple[str, str, bytes] | None = None) -> dict[str, Any] | None:
        """The recorded response to a request if this cassette only replays (None: it may record, or the filter
        drops the request); a miss raises vcrpy's own error. ``key``: the request's key, if the caller has it."""
        if not self.write_protected:
            return None
        if self._request_key is not None:
            key = key if key is not None else self._request_key(method, uri, body, payload)
            if key is None:
                return None
            for index in self._index.get(key, ()):
                if self.play_counts[index] == 0:  # as vcrpy's play_response counts a play
                    self._played_interactions.append(self.data[index])
                    self.play_counts[index] += 1
                    mark_replayed()
                    return self.data[index][1]
        request = Request(method, uri, body, {})  # the same call in other bytes, or a miss: vcrpy's way
        if not self._filtered(request):
            return None
        if request in self:
            return self.play_response(request)
        raise CannotOverwriteExistingCassetteException(cassette=self, failed_request=request)
