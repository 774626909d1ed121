"""Checks an assistant can make before any case runs, so a wrong entry fails once, up front."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from ..errors import AssistantSetupError

__all__ = ["AssistantSetupError", "check_reachable"]


def check_reachable(url: str, timeout_s: float = 5.0) -> None:
    """Open (and close) a TCP connection to the URL's host and port."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AssistantSetupError(f"{url!r} is not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise AssistantSetupError(f"cannot reach {url} ({reason})") from None
