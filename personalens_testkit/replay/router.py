"""Every model call routed to the cassette of the calling thread.

The testkit's HTTP clients (OpenAI-compatible models, the embedded one included) hand each call to
:func:`exchange`, which answers it from the cassette active in the calling thread (the ``ACTIVE``
context variable), or sends it and records the answer, or - none active - just sends it. A bot's own
traffic is sent and kept nowhere (the cassette's filter drops it); a bot's own HTTP clients are its
own, and nothing patches them.

Bedrock's calls go through botocore, which vcrpy patches: installed once per process for a router
that stands in for "the cassette" (each call goes to the one active in its own thread), since vcrpy
patches for one cassette at a time and two scenarios at once in one process would send each other's
requests to the wrong cassette.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from contextvars import ContextVar
from typing import Any, Callable, Iterator

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
    #: libraries not patched: the testkit's httpx clients record and replay above their transport
    #: (:func:`exchange`), botocore is patched on its own (by :func:`_patch_later`), and a bot's own traffic is
    #: never recorded - not imported for vcrpy either (:mod:`.vcr_imports`). The standard library's
    #: http.client stays as it is, so a library imported later builds on the real classes
    skip_patchers = ("httplib", "httplib2", "tornado", "aiohttp", "requests", "urllib3", "boto3", "httpx", "httpx2")

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


def exchange(method: str, uri: str, body: bytes, payload: Any, send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A model call's answer (vcrpy's response dict) from this thread's cassette: replayed, or sent and recorded;
    sent and kept nowhere when no cassette is active (the model client's :data:`~..llm.base.AnswerSource`).

    The testkit's HTTP clients record and replay here, above their transport, not under vcrpy's patches: the
    request is what the client sends, the answer what it reads (whole, within its byte budget). ``payload``: the
    JSON value the caller encoded ``body`` from (None: not known), so that it is not parsed again."""
    active = ACTIVE.get()
    return send() if active is None else active.exchange(method, uri, body, payload, send)


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


@contextlib.contextmanager
def _no_reset() -> Iterator[None]:
    """Stands in for vcrpy's ``force_reset``, which puts the real classes back process-wide while a
    recorded connection is made or sends its request. With the patches shared by threads that
    is a race: a connection another thread opens meanwhile is never recorded, and two
    overlapping resets can leave the patches removed for good. Nothing needs putting back:
    vcrpy sends through an instance of the real class, which looks no patched name up."""
    yield
