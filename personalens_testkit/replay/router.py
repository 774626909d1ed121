"""vcrpy's patches, installed once per process, routed to the cassette of the calling thread.

vcrpy patches HTTP libraries for one cassette at a time (entering and leaving its patches
around each use): two scenarios at once in one process would send each other's requests to
the wrong cassette. Here the patches are installed once, for a router that stands in for
"the cassette": each call goes to the cassette active in its own thread (the ``ACTIVE``
context variable), or straight through when none is. That makes scenarios safe to run
concurrently in threads, and saves re-patching every library for every scenario.

A request that is never recorded - none is active, or it is the bot's own traffic - goes past
vcrpy to httpx's real transport: vcrpy's stub reads a whole answer before the caller sees any of
it, so a bot streaming 400 MB would be held in memory before its reply limit could refuse it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from contextvars import ContextVar
from typing import Any, Iterator

from .vcr_imports import LATER, when_imported, without_unused_libraries

#: The cassette open in this thread, if any.
ACTIVE: ContextVar[Any] = ContextVar("personalens_active_cassette", default=None)

_installed = False
_lock = threading.Lock()


class _PassThrough:
    """What a call meets when no cassette is active: it goes to the network, and nothing is kept."""

    write_protected = False
    record_mode = "all"

    def can_play_response_for(self, request: Any) -> bool:
        return False

    def filter_request(self, request: Any) -> Any:
        return request

    def append(self, request: Any, response: Any) -> None:
        return None


_NONE_ACTIVE = _PassThrough()


class Router:
    """Stands in for the cassette in vcrpy's patches; every attribute comes from the active one."""

    custom_patches: tuple[Any, ...] = ()
    #: libraries the testkit and its backends never call models through - its clients are httpx and, for
    #: Bedrock, botocore (patched on its own, by :func:`_patch_later`), and a bot's own traffic is never
    #: recorded: not patched, and not imported for vcrpy (:mod:`.vcr_imports`). The standard library's
    #: http.client stays as it is, so a library imported later builds on the real classes
    skip_patchers = ("httplib", "httplib2", "tornado", "aiohttp", "requests", "urllib3", "boto3")

    @property
    def _path(self) -> str:
        active = ACTIVE.get()
        return active._path if active is not None else "personalens-cassettes"

    def __getattr__(self, name: str) -> Any:
        active = ACTIVE.get()
        return getattr(active if active is not None else _NONE_ACTIVE, name)

    def __len__(self) -> int:
        active = ACTIVE.get()
        return len(active) if active is not None else 0

    def __contains__(self, request: Any) -> bool:
        active = ACTIVE.get()
        return active is not None and request in active


ROUTER = Router()


def recorded_answer(method: str, uri: str, body: bytes, payload: Any = None) -> dict[str, Any] | None:
    """The recorded response (vcrpy's dict) to a request, when this thread's cassette only replays.

    A short cut past the HTTP client for clients that know their request's method, address
    and body before sending it: the same matching, play counts and misses as vcrpy's
    patches, without building the HTTP request. None: send it (no cassette, a recording,
    or a call that is never recorded, such as a bot's own traffic). ``payload``: the JSON value
    the caller encoded ``body`` from (None: not known), so that it is not parsed again.
    """
    active = ACTIVE.get()
    answer = getattr(active, "replay_answer", None)
    return answer(method, uri, body, payload) if answer is not None else None


def install() -> None:
    """Patch the HTTP libraries once for this process (idempotent, thread-safe)."""
    global _installed
    if _installed:
        return
    with _lock:
        if _installed:
            return
        import vcr.patch
        from vcr.patch import CassettePatcherBuilder

        with without_unused_libraries():
            patchers = list(CassettePatcherBuilder(ROUTER).build())
        for patcher in patchers:
            patcher.__enter__()
        vcr.patch.force_reset = _no_reset
        _pass_unrecorded_traffic_through()
        when_imported(LATER[0], _patch_later)  # now if it is there; else when it is imported
        _installed = True


def _patch_later(module: Any) -> None:
    """vcrpy's patches of botocore, which vcrpy is kept from importing (:mod:`.vcr_imports`): made by
    :func:`install` if botocore is there, else when a Bedrock model first imports it.

    Only by the router this process uses now: should this module have been imported afresh meanwhile (pytester's
    in-process runs put sys.modules back as they found it), a hook of the one before must not patch the library
    for a router no cassette is made active on - the new module's own install patches it."""
    if sys.modules.get(__name__) is None or vars(sys.modules[__name__]) is not globals():
        return
    import vcr.patch  # vcrpy too may have been imported afresh: its stubs look its force_reset up when they send

    vcr.patch.force_reset = _no_reset
    _, builder = LATER
    for patcher in getattr(vcr.patch.CassettePatcherBuilder(ROUTER), builder)():
        patcher.__enter__()


def _passes_through(request: Any) -> bool:
    """Whether an httpx request is sent past vcrpy: no cassette is active, or the active one never records it."""
    active = ACTIVE.get()
    if active is None:
        return True
    passes = getattr(active, "passes_through", None)
    return passes is not None and passes(str(request.url))


def _pass_unrecorded_traffic_through() -> None:
    """Put a switch in front of vcrpy's stubs on httpx's real transports: a request that is never recorded
    goes to the transport vcrpy patched, its answer streamed as httpx streams it (a bot's reply limit then
    applies as it is read); every other request goes through vcrpy's stub, as before."""
    import vcr.patch

    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx is a dependency
        return
    for cls, name, real in (
        (httpx.HTTPTransport, "handle_request", getattr(vcr.patch, "_HttpxHttpTransport_handle_request", None)),
        (httpx.AsyncHTTPTransport, "handle_async_request",
         getattr(vcr.patch, "_HttpxAsyncHttpTransport_handle_async_request", None)),
    ):
        stub = getattr(cls, name)
        if real is None or stub is real:  # vcrpy did not patch it: nothing to go past
            continue
        setattr(cls, name, _switch(stub, real, asynchronous=name.endswith("async_request")))


def _switch(stub: Any, real: Any, *, asynchronous: bool) -> Any:
    if asynchronous:
        async def handle_async_request(self: Any, request: Any) -> Any:
            return await (real if _passes_through(request) else stub)(self, request)

        return handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        if _passes_through(request):
            return real(self, request)
        active = ACTIVE.get()
        if getattr(active, "only_records", None) is not None and active.only_records():
            return _send_and_record(real, self, request, active)
        return stub(self, request)

    return handle_request


class _Sent:
    """What a recording's request filter reads of a request sent (vcrpy's Request builds a headers dict first)."""

    __slots__ = ("method", "uri", "body", "headers")

    def __init__(self, method: str, uri: str, body: bytes, headers: Any) -> None:
        self.method, self.uri, self.body, self.headers = method, uri, body, headers


def _send_and_record(real: Any, transport: Any, request: Any, cassette: Any) -> Any:
    """vcrpy's httpx stub for a cassette that only records (``only_records``): the request sent, its whole
    answer read and recorded, the connection released - the same steps and the same cassette entry, without
    vcrpy's three Request objects, its checks for a recorded answer and its copies of the answer."""
    import httpx

    body = b"".join(request.stream)
    request.stream = httpx.ByteStream(body)
    response = real(transport, request)
    try:
        content = b"".join(response.stream)
    except BaseException:
        with contextlib.suppress(Exception):
            response.stream.close()
        raise
    with httpx._exceptions.request_context(request=response._request):
        response.stream.close()
    response.stream = httpx.ByteStream(content)
    headers: dict[str, list[str]] = {}
    for name, value in response.headers.multi_items():
        headers.setdefault(name, []).append(value)
    answer = {"status": {"code": response.status_code, "message": response.reason_phrase},
              "headers": headers, "body": {"string": content}}
    cassette.record_sent(_Sent(request.method, str(request.url), body, request.headers), answer)
    return response


@contextlib.contextmanager
def _no_reset() -> Iterator[None]:
    """Stands in for vcrpy's ``force_reset``, which puts the real classes back process-wide while a
    recorded connection is made or sends its request. With the patches shared by threads that
    is a race: a connection another thread opens meanwhile is never recorded, and two
    overlapping resets can leave the patches removed for good. Nothing needs putting back:
    vcrpy sends through an instance of the real class, which looks no patched name up."""
    yield
