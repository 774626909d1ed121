"""The httpx transport every client of the testkit sends through: httpcore's connection pool on a network
backend of ours, whose connections are bounded by the deadlines in force (:mod:`.deadlines`).

httpx's own ``HTTPTransport`` builds its pool with httpcore's default network backend and offers no way to
give it another; httpcore's ``ConnectionPool`` takes one (``network_backend``). So this transport is httpx's,
built on httpcore's public API: the same request and response conversion, the same mapping of httpcore's
errors to httpx's, and the environment's proxies (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, as the
standard library reads them) through a pool of the same bounded connections.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
import threading
import urllib.request
from typing import Any, Iterator

import httpcore
import httpx

from .deadlines import BoundedBackend
from .timeouts import CONNECT_S

#: httpcore's errors and the httpx errors they are raised as (the most derived class that matches is used)
ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}


@contextlib.contextmanager
def httpx_errors() -> Iterator[None]:
    """httpcore's errors raised as httpx's (the httpcore error kept as the cause: a refused answer is told by it)."""
    try:
        yield
    except httpcore.ConnectionNotAvailable:
        raise
    except Exception as exc:
        kind = next((ERRORS[cls] for cls in type(exc).__mro__ if cls in ERRORS), None)
        if kind is None:
            raise
        raise kind(str(exc)) from exc


class _Body(httpx.SyncByteStream):
    """An answer's body as httpcore reads it from the connection, its errors raised as httpx's."""

    def __init__(self, parts: Any) -> None:
        self.parts = parts

    def __iter__(self) -> Iterator[bytes]:
        with httpx_errors():
            yield from self.parts

    def close(self) -> None:
        close = getattr(self.parts, "close", None)
        if close is not None:
            with httpx_errors():
                close()


def environment_proxy(url: httpx.URL) -> str | None:
    """The proxy the environment names for ``url`` (``<scheme>_proxy``, else ``all_proxy``), unless ``no_proxy``
    exempts its host: read as the standard library reads them, at each request."""
    proxies = urllib.request.getproxies_environment()
    if not proxies:
        return None
    if urllib.request.proxy_bypass_environment(url.host, proxies):
        return None
    return proxies.get(url.scheme) or proxies.get("all")


class BoundedTransport(httpx.BaseTransport):
    """httpx's transport on httpcore's pool, every connection of it - direct or through a proxy - bounded by the
    deadlines in force and counted against the byte budget (:mod:`.deadlines`)."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, proxies: bool = True) -> None:
        self.ssl_context = ssl_context if ssl_context is not None else tls_context()
        #: whether the environment's proxies are used
        self.proxies = proxies
        #: the proxy's URL (None: direct) -> its pool, made at its first use
        self._pools: dict[str | None, httpcore.ConnectionPool] = {}
        self._lock = threading.Lock()

    def pool(self, proxy: str | None) -> httpcore.ConnectionPool:
        with self._lock:
            found = self._pools.get(proxy)
            if found is None:
                found = self._pools[proxy] = httpcore.ConnectionPool(
                    ssl_context=self.ssl_context, proxy=httpcore.Proxy(proxy) if proxy else None,
                    network_backend=BoundedBackend(httpcore.SyncBackend()))
            return found

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        with httpx_errors():
            answer = self.pool(environment_proxy(url) if self.proxies else None).handle_request(sent)
        return httpx.Response(status_code=answer.status, headers=answer.headers, stream=_Body(answer.stream),
                              extensions=answer.extensions)

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            with httpx_errors():
                pool.close()


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every client of this process verifies servers with: httpx's own (the system's certificates,
    or SSL_CERT_FILE / SSL_CERT_DIR), made once - making one reads the certificate store, about 40 ms."""
    return httpx.create_ssl_context()


def bounded_client(*, timeout_s: float, transport: httpx.BaseTransport | None = None, **kwargs: Any) -> httpx.Client:
    """An httpx client whose every wait (connect, send, each read) takes at most ``timeout_s`` and at most what is
    left of the deadlines in force: hold ``deadline(timeout_s, ...)`` around a call, body read included, and the
    call ends by it however slowly its answer comes. ``transport``: another one (a test's); its connections, if it
    has any, are its own."""
    headers = {"Accept-Encoding": "identity", **(kwargs.pop("headers", None) or {})}  # a compressed answer is refused
    # the environment's proxies are the transport's to choose (trust_env would mount httpx's own, unbounded, for them)
    return httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(CONNECT_S, timeout_s)),
                        transport=transport if transport is not None else BoundedTransport(), headers=headers,
                        trust_env=False, **kwargs)
