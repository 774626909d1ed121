"""``kind = "http"``: the bot is any HTTP endpoint speaking the turn contract (POST, JSON in, JSON out).

The answer is read as a stream and given up past what a reply of ``max_reply_chars`` can take
(a 10 MB answer never reaches memory); its body must be UTF-8, or the charset its
Content-Type names. ``timeout_s`` bounds a reply as a whole, from connecting to its last byte
(a bot that trickles its answer is given up at the limit: :mod:`~personalens_testkit.llm.deadlines`).
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from .. import untrusted_json
from ..errors import ContractError, ModelError
from ..llm.deadlines import http_failure
from ..llm.transport import bounded_client
from ..llm.env_refs import expand_env
from ..llm.openai_compat import RETRYABLE_STATUS
from ..timebox import deadline
from ..untrusted_json import MAX_ANSWER_VALUES
from .base import AssistantInput, AssistantReply, ContextSwitches
from .contract import max_reply_bytes, parse_reply, request_payload
from .setup_check import check_reachable


class HttpBotEntry(Protocol):
    """What an HTTP bot is called from: a ``kind = "http"`` entry (:mod:`.kinds.http`)."""

    url: str
    headers: dict[str, str]
    timeout_s: float
    max_reply_chars: int

    def switches(self) -> ContextSwitches: ...


class HttpAssistant:
    def __init__(self, name: str, entry: HttpBotEntry, transport: httpx.BaseTransport | None = None) -> None:
        self.name = name
        self.entry = entry
        self.context = entry.switches()
        headers = {key: expand_env(value) for key, value in entry.headers.items()}
        self._client = bounded_client(timeout_s=entry.timeout_s, headers=headers, transport=transport)

    def check(self) -> None:
        check_reachable(self.entry.url)

    def reply(self, turn: AssistantInput) -> AssistantReply:
        url = self.entry.url
        with deadline(self.entry.timeout_s, "timeout_s"):  # the whole reply, from connecting to its last byte
            try:
                with self._client.stream("POST", url, json=request_payload(turn)) as response:
                    status, charset, body = response.status_code, response.charset_encoding, self._read(response)
            except httpx.TransportError as exc:
                raise http_failure(exc, what=f"no reply from {url}", url=url, model=self.name,
                                   retry_timeouts=False) from exc
        if status != 200:
            raise ModelError(f"HTTP {status} from {url}: {_excerpt(body.decode('utf-8', 'replace'))}", model=self.name,
                             retryable=status in RETRYABLE_STATUS)
        try:
            return parse_reply(untrusted_json.loads(_decoded(body, charset), max_values=MAX_ANSWER_VALUES),
                               self.entry.max_reply_chars)
        except (ValueError, ContractError) as exc:
            problem = exc if isinstance(exc, (ContractError, untrusted_json.UntrustedJsonError)) else \
                f"not JSON: {_excerpt(body.decode('utf-8', 'replace'))}"
            raise ContractError(f"the answer from {url} breaks the turn contract: {problem}", model=self.name) from None

    def _read(self, response: httpx.Response) -> bytes:
        """The body, refused as soon as it is longer than a reply of ``max_reply_chars`` can take."""
        limit = max_reply_bytes(self.entry.max_reply_chars)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ContractError(f"the answer from {self.entry.url} has {int(declared):,} bytes: more than a reply of "
                                f"max_reply_chars={self.entry.max_reply_chars:,} characters can take", model=self.name)
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise ContractError(f"the answer from {self.entry.url} is longer than {limit:,} bytes: more than a reply "
                                    f"of max_reply_chars={self.entry.max_reply_chars:,} characters can take",
                                    model=self.name)
        return bytes(body)

    def close(self) -> None:
        self._client.close()


def _decoded(body: bytes, charset: str | None) -> str:
    """The body as text: in the charset the Content-Type names, else UTF-8 (JSON's own encoding)."""
    encoding = charset or "utf-8"
    try:
        return body.decode(encoding)
    except LookupError:
        raise ContractError(f"the Content-Type names an unknown charset {charset!r}") from None
    except UnicodeDecodeError as exc:
        raise ContractError(f"the body is not {encoding} (byte 0x{body[exc.start]:02x} at position {exc.start}; "
                            "send UTF-8 JSON, or name the charset in the Content-Type)") from None


def _excerpt(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
