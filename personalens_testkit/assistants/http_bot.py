"""``kind = "http"``: the bot is any HTTP endpoint speaking the turn contract (POST, JSON in, JSON out)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..errors import ModelError
from ..llm.entries import expand_env
from ..llm.openai_compat import RETRYABLE_STATUS
from .base import AssistantInput, AssistantReply
from .contract import ContractError, parse_reply, request_payload
from .entries import HttpEntry
from .setup_check import check_reachable


class HttpAssistant:
    def __init__(self, name: str, entry: HttpEntry, transport: httpx.BaseTransport | None = None) -> None:
        self.name = name
        self.entry = entry
        self.context = entry.switches()
        headers = {key: expand_env(value) for key, value in entry.headers.items()}
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(entry.timeout_s, connect=10.0), transport=transport)

    def check(self) -> None:
        check_reachable(self.entry.url)

    def reply(self, turn: AssistantInput) -> AssistantReply:
        url = self.entry.url
        try:
            response = self._client.post(url, json=request_payload(turn))
        except httpx.TimeoutException as exc:
            raise ModelError(f"no reply from {url} within {self.entry.timeout_s:.0f} s", model=self.name, retryable=True) from exc
        except httpx.TransportError as exc:
            raise ModelError(f"cannot reach {url} ({type(exc).__name__}: {exc})", model=self.name, retryable=True) from exc
        if response.status_code != 200:
            raise ModelError(f"HTTP {response.status_code} from {url}: {_excerpt(response.text)}", model=self.name,
                             retryable=response.status_code in RETRYABLE_STATUS)
        try:
            return parse_reply(response.json())
        except (json.JSONDecodeError, ContractError) as exc:
            problem = exc if isinstance(exc, ContractError) else f"not JSON: {_excerpt(response.text)}"
            raise ModelError(f"the answer from {url} breaks the turn contract: {problem}", model=self.name) from None

    def close(self) -> None:
        self._client.close()


def _excerpt(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
