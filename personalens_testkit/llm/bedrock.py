"""Amazon Bedrock through boto3's Converse API: the paper's own set-up (Claude on Bedrock).

The system prompt goes in ``system``, sampling in ``inferenceConfig``, the conversation in
``messages``. A judge's JSON schema is enforced by forcing a tool whose input schema it is
(``json_mode="tool"``, for models that accept a forced tool: Anthropic Claude, Mistral
Large), or left to the tolerant parser (``json_mode="none"``). Credentials come from the
standard AWS chain only (environment, shared config and SSO, instance or task role), and
botocore retries throttling in its adaptive mode. botocore's errors become
:class:`ModelError` here and nowhere else.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from ..errors import ModelError
from .base import ChatRequest, ChatResponse, Message

JsonMode = Literal["tool", "none"]

#: Converse error codes worth another attempt (botocore's adaptive mode has retried them already).
RETRYABLE_CODES = frozenset({
    "ThrottlingException", "ServiceUnavailableException", "ModelTimeoutException", "InternalServerException",
    "ModelNotReadyException", "ServiceQuotaExceededException", "RequestTimeout",
})
#: Model-id fragments of families that accept a forced tool (toolChoice "tool").
FORCED_TOOL_FAMILIES = ("anthropic.", "mistral.mistral-large")


#: Model-id fragments of families with Bedrock prompt caching (a Converse ``cachePoint``).
CACHE_FAMILIES = (
    "anthropic.claude-3-7-sonnet", "anthropic.claude-3-5-haiku", "anthropic.claude-sonnet-4", "anthropic.claude-opus-4",
    "anthropic.claude-haiku-4", "amazon.nova-micro", "amazon.nova-lite", "amazon.nova-pro", "amazon.nova-premier",
)
CACHE_POINT = {"cachePoint": {"type": "default"}}


def supports_prompt_cache(model_id: str) -> bool:
    return any(family in model_id for family in CACHE_FAMILIES)


def default_json_mode(model_id: str) -> JsonMode:
    return "tool" if any(family in model_id for family in FORCED_TOOL_FAMILIES) else "none"


def make_client(
    region: str | None, *, max_attempts: int = 8, read_timeout_s: float = 300.0, endpoint_url: str | None = None,
    replay_only: bool = False,
) -> Any:
    """A bedrock-runtime client on the standard credential chain, adaptive retries, generous read timeout.

    ``replay_only``: the client's calls are answered by a cassette, so it needs no real
    credentials or region (placeholders are used when none are configured; botocore
    signs before the cassette sees the request).
    """
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"mode": "adaptive", "max_attempts": max_attempts},
        read_timeout=read_timeout_s, connect_timeout=10,
    )
    session = boto3.Session(region_name=region) if region else boto3.Session()
    if replay_only:
        if session.get_credentials() is None:
            session = boto3.Session(region_name=session.region_name or "us-east-1",
                                    aws_access_key_id="replay", aws_secret_access_key="replay")
        elif session.region_name is None:
            session = boto3.Session(region_name="us-east-1")
    if session.region_name is None:
        raise ModelError("no AWS region: set AWS_DEFAULT_REGION, or region in the model's config entry")
    client = session.client("bedrock-runtime", config=config, endpoint_url=endpoint_url)
    client.meta.events.register_first("needs-retry.*", _never_retry_a_replay_miss)
    return client


def _never_retry_a_replay_miss(caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore wraps a cassette miss (vcrpy) as a connection error and would retry it: raise it at once."""
    inner = getattr(caught_exception, "kwargs", {}).get("error") if caught_exception is not None else None
    if type(inner).__name__ == "CannotOverwriteExistingCassetteException":
        raise inner


class BedrockChat:
    """A chat model on Amazon Bedrock (``bedrock:<model id or inference profile>``)."""

    def __init__(
        self, *, spec: str, model_id: str, region: str | None = None, client: Any = None,
        json_mode: JsonMode | None = None, max_attempts: int = 8, endpoint_url: str | None = None,
        replay_only: bool = False, prompt_cache: bool | None = None,
    ) -> None:
        self.spec = spec
        self.model_id = model_id
        #: mark each prompt's fixed part as a cache point (None: by model family)
        self.prompt_cache = supports_prompt_cache(model_id) if prompt_cache is None else prompt_cache
        self.json_mode: JsonMode = json_mode or default_json_mode(model_id)
        self._client = client if client is not None else make_client(
            region, max_attempts=max_attempts, endpoint_url=endpoint_url, replay_only=replay_only)

    def __repr__(self) -> str:
        return f"BedrockChat(spec={self.spec!r}, model_id={self.model_id!r})"

    @property
    def supports_json_schema(self) -> bool:
        return self.json_mode != "none"

    def converse_args(self, request: ChatRequest) -> dict[str, Any]:
        system: list[dict[str, Any]] = [{"text": m.content} for m in request.messages if m.role == "system"]
        if system and self.prompt_cache:
            system.append(CACHE_POINT)
        turns = [m for m in request.messages if m.role != "system"]
        inference: dict[str, Any] = {
            key: value for key, value in (
                ("maxTokens", request.max_tokens), ("temperature", request.temperature), ("topP", request.top_p),
            ) if value is not None
        }
        if request.stop:
            inference["stopSequences"] = [s for s in request.stop if s.strip()][:4]
        args: dict[str, Any] = {
            "modelId": self.model_id,
            # Converse refuses blank text: a user message that was only TERMINATE is sent as a marker
            "messages": [{"role": m.role, "content": self._content(m)} for m in turns],
            "inferenceConfig": inference,
        }
        if system:
            args["system"] = system
        if request.json_schema is not None and self.json_mode == "tool":
            args["toolConfig"] = {
                "tools": [{"toolSpec": {
                    "name": request.schema_name,
                    "description": "Record your answer in exactly this structure.",
                    "inputSchema": {"json": request.json_schema},
                }}],
                "toolChoice": {"tool": {"name": request.schema_name}},
            }
        return args

    def _content(self, message: Message) -> list[dict[str, Any]]:
        """A message's content blocks; with prompt caching, a cache point after its fixed prefix."""
        text = message.content or "(empty message)"
        cut = message.cache_prefix
        if self.prompt_cache and 0 < cut < len(text):
            return [{"text": text[:cut]}, CACHE_POINT, {"text": text[cut:]}]
        return [{"text": text}]

    def complete(self, request: ChatRequest) -> ChatResponse:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            response = self._client.converse(**self.converse_args(request))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "ClientError")
            raise ModelError(f"Bedrock {code}: {error.get('Message', '')}".strip(), model=self.spec,
                             retryable=code in RETRYABLE_CODES) from exc
        except NoCredentialsError as exc:
            raise ModelError(
                "no AWS credentials found (the standard chain: AWS_* variables, ~/.aws config or SSO, instance or task role)",
                model=self.spec,
            ) from exc
        except BotoCoreError as exc:
            raise ModelError(f"Bedrock call failed ({type(exc).__name__}: {exc})", model=self.spec, retryable=True) from exc
        return self._parse(response)

    def _parse(self, response: dict[str, Any]) -> ChatResponse:
        try:
            content = response["output"]["message"]["content"]
        except (KeyError, TypeError) as exc:
            raise ModelError(f"malformed Converse answer: {str(response)[:300]}", model=self.spec) from exc
        tool_inputs = [block["toolUse"]["input"] for block in content if "toolUse" in block]
        text = json.dumps(tool_inputs[0]) if tool_inputs else "".join(block.get("text", "") for block in content)
        usage = response.get("usage", {})
        return ChatResponse(
            text=text, model=self.model_id, prompt_tokens=usage.get("inputTokens"),
            completion_tokens=usage.get("outputTokens"), finish_reason=response.get("stopReason"),
            cache_read_tokens=usage.get("cacheReadInputTokens"), cache_write_tokens=usage.get("cacheWriteInputTokens"),
        )

    def close(self) -> None:
        self._client.close()
