"""OpenAI-compatible chat completions over httpx (OpenAI, vLLM, llama.cpp servers, gateways).

The only place that talks this wire format; transport and HTTP errors become
:class:`ModelError` here, with retryable ones (429, 5xx, timeouts, resets) marked so.
``timeout_s`` bounds a call as a whole, from connecting to the answer's last byte
(:mod:`~personalens_testkit.llm.deadlines`).
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

from ..errors import ModelError
from .. import untrusted_json
from ..timebox import deadline
from ..untrusted_json import MAX_ANSWER_VALUES
from . import json_body
from .base import AnswerSource, ChatRequest, ChatResponse, token_count
from .deadlines import MAX_ANSWER_BYTES, byte_budget, http_failure
from .transport import bounded_client

#: How a backend asks for JSON-schema-constrained output:
#: ``openai`` - ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, most gateways);
#: ``llama_cpp`` - ``response_format={"type": "json_object", "schema": ...}`` (llama-cpp-python's server);
#: ``none`` - no constraint: the prompt asks for JSON and the parser is tolerant.
JsonDialect = Literal["openai", "llama_cpp", "none"]

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAICompatibleChat:
    """A chat model behind ``POST {base_url}/chat/completions``."""

    def __init__(
        self,
        *,
        spec: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        json_dialect: JsonDialect = "openai",
        timeout_s: float = 120.0,
        headers: dict[str, str] | None = None,
        max_tokens_cap: dict[str, int] | None = None,
        max_string_chars: int | None = None,
        transport: httpx.BaseTransport | None = None,
        answers: AnswerSource | None = None,
        timeout_name: str = "timeout_s",
    ) -> None:
        self.spec = spec
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.json_dialect = json_dialect
        self.max_tokens_cap = dict(max_tokens_cap or {})
        #: the most one call may take, connecting to last byte, and what sets it (named when a call runs out)
        self.timeout_s = timeout_s
        self.timeout_name = timeout_name
        #: bound on every free-text field of a constrained answer, so it always ends within the token cap
        self.max_string_chars = max_string_chars
        #: where a call's answer is recorded or replayed (None: always sent, never recorded)
        self._answers = answers
        all_headers = dict(headers or {})
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        #: what every request to the endpoint carries (its key among them): a batch engine's requests carry it too
        self.request_headers: dict[str, str] = dict(all_headers)
        self._client = bounded_client(timeout_s=timeout_s, base_url=self.base_url, headers=all_headers,
                                      transport=transport)

    def __repr__(self) -> str:  # never shows headers: they may hold a key
        return f"OpenAICompatibleChat(spec={self.spec!r}, base_url={self.base_url!r}, model={self.model!r})"

    @property
    def supports_json_schema(self) -> bool:
        return self.json_dialect != "none"

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        max_tokens = request.max_tokens
        cap = self.max_tokens_cap.get(request.purpose)
        if cap is not None:
            max_tokens = cap if max_tokens is None else min(max_tokens, cap)
        body: dict[str, Any] = {"model": self.model, "messages": [m.as_dict() for m in request.messages]}
        for key, value in (("temperature", request.temperature), ("max_tokens", max_tokens), ("top_p", request.top_p)):
            if value is not None:
                body[key] = value
        if request.stop:
            body["stop"] = list(request.stop)
        if request.json_schema is not None and self.json_dialect == "openai":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
            }
        elif request.json_schema is not None and self.json_dialect == "llama_cpp":
            schema = request.json_schema
            if self.max_string_chars is not None:
                schema = bound_strings(schema, self.max_string_chars)
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    def complete(self, request: ChatRequest) -> ChatResponse:
        # encoded as httpx encodes ``json=``: the bytes on the wire are the same
        payload = self.payload(request)
        body = json_body.body(payload)
        # a replay reads the cassette's answer without building an HTTP request; a recording keeps what is sent
        if self._answers is None:
            answer = self._post(body)
        else:
            answer = self._answers("POST", f"{self.base_url}/chat/completions", body, payload, lambda: self._post(body))
        status, content = answer["status"]["code"], answer["body"]["string"]
        if status >= 400:
            raise ModelError(
                f"HTTP {status} from {self.base_url}: {_error_text(content)}",
                model=self.spec, retryable=status in RETRYABLE_STATUS,
            )
        return self._parse(content)

    def _post(self, body: bytes) -> dict[str, Any]:
        """The answer to a request sent, whole, as a recording stores it (see AnswerSource)."""
        # the error is made under the deadline (it names the limit met); the answer's bytes are counted as they come
        with deadline(self.timeout_s, self.timeout_name), byte_budget(MAX_ANSWER_BYTES):
            try:
                response = self._client.post("/chat/completions", content=body,
                                             headers={"content-type": "application/json"})
                headers: dict[str, list[str]] = {}
                for name, value in response.headers.multi_items():
                    headers.setdefault(name, []).append(value)
                return {"status": {"code": response.status_code, "message": response.reason_phrase},
                        "headers": headers, "body": {"string": response.content}}
            except httpx.TransportError as exc:
                raise http_failure(exc, what="no answer", url=self.base_url, model=self.spec) from exc

    def probe(self) -> None:
        """Any HTTP answer at all (``GET {base_url}/models``, whatever its status), within the deadlines in force:
        the preflight's first step, so a port that accepts connections and never answers fails in seconds while a
        model that is slow to load is not yet asked to answer."""
        try:
            with self._client.stream("GET", "/models"):
                pass  # the status line and headers are the answer; the body is not read
        except httpx.TransportError as exc:
            raise http_failure(exc, what=f"no HTTP answer from {self.base_url}", url=self.base_url,
                               model=self.spec) from exc

    def answer_of(self, content: bytes | str) -> ChatResponse:
        """A chat completion's body read as this model's answer (a batch engine's results hold such bodies): a
        ModelError when it is not one clear answer."""
        return self._parse(content)

    def _parse(self, content: bytes | str) -> ChatResponse:
        try:
            data = untrusted_json.loads(content, max_values=MAX_ANSWER_VALUES)
            if len(data["choices"]) > 1:  # one was asked for: which of several is the answer is not said
                raise untrusted_json.UntrustedJsonError(f"{len(data['choices'])} choices where one was asked for")
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
            if not isinstance(text, str):
                raise TypeError(f"the message content is {type(text).__name__}, not text")
            text.encode("utf-8")  # a lone surrogate (a "\\ud800" escape) is not text: never pass it on
        except untrusted_json.UntrustedJsonError as exc:
            raise ModelError(f"ambiguous or oversized answer from {self.base_url}: {exc}", model=self.spec,
                             retryable=True) from exc
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"malformed answer from {self.base_url} ({type(exc).__name__}): {_text(content)[:300]!r}",
                model=self.spec, retryable=True,
            ) from exc
        return ChatResponse(
            text=text,
            model=str(data.get("model") or self.model),
            prompt_tokens=token_count(usage.get("prompt_tokens") if isinstance(usage, dict) else None),
            completion_tokens=token_count(usage.get("completion_tokens") if isinstance(usage, dict) else None),
            finish_reason=choice.get("finish_reason"),
            # the part of prompt_tokens read from the prompt cache (OpenAI counts it inside prompt_tokens)
            cache_read_tokens=token_count(usage["prompt_tokens_details"].get("cached_tokens"))
            if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens_details"), dict) else None,
        )

    def close(self) -> None:
        self._client.close()


def bound_strings(schema: Any, max_chars: int) -> Any:
    """A copy of a JSON schema in which every string without a length bound gets ``maxLength``."""
    if isinstance(schema, dict):
        bounded = {key: bound_strings(value, max_chars) for key, value in schema.items()}
        if bounded.get("type") == "string" and "maxLength" not in bounded:
            bounded["maxLength"] = max_chars
        return bounded
    if isinstance(schema, list):
        return [bound_strings(item, max_chars) for item in schema]
    return schema


def _text(content: bytes | str) -> str:
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else content


def _error_text(content: bytes | str) -> str:
    """The server's own error message, shortened; never the request (it may carry a key)."""
    try:
        data = untrusted_json.loads(content, max_values=MAX_ANSWER_VALUES)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message", error) if isinstance(error, dict) else error
        text = str(message)
    except ValueError:
        text = _text(content)
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")
