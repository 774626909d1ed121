"""Amazon Bedrock through boto3's Converse API: the paper's own set-up (Claude on Bedrock).

The system prompt goes in ``system`` (folded into the first user message for the models that
refuse one: Mistral 7B and Mixtral), sampling in ``inferenceConfig``, the conversation in
``messages``. A judge's JSON schema is enforced through a tool whose input schema it is, as
far as the model family allows (the Converse service model: a *specific* tool choice is only
supported by Anthropic Claude 3+ and Amazon Nova): ``json_mode="tool"`` forces that tool
(Claude, Nova), ``"any"`` forces some tool, the only one offered (Mistral Large), ``"none"``
offers no tool and leaves the answer to the parser (Llama, Mistral 7B, Mixtral, others).

Credentials and region come from the standard AWS chain only (environment - ``AWS_REGION``
too -, shared config and SSO, instance or task role). botocore makes one attempt per call:
retries are the run's own policy (``--retries``), so a call is counted once. botocore's
errors become :class:`ModelError` here and nowhere else; credential problems (an unknown
``AWS_PROFILE``, an SSO session to log in again) are not retried and say what to run.

``timeout_s`` bounds a call as a whole: botocore's reads each wait at most that long, and the
call runs in a thread given up at the limit (an answer that trickles in cannot hold a case:
:func:`~personalens_testkit.timebox.call_by_deadline`).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Iterator, Literal

from .. import untrusted_json
from ..errors import ModelError
from ..timebox import TimeLimit, call_by_deadline
from ..untrusted_json import MAX_ANSWER_VALUES
from .base import AnswerSource, ChatRequest, ChatResponse, Message
from .timeouts import CONNECT_S, timed_out

JsonMode = Literal["tool", "any", "none"]

#: Converse error codes worth another attempt (botocore's adaptive mode has retried them already).
RETRYABLE_CODES = frozenset({
    "ThrottlingException", "ServiceUnavailableException", "ModelTimeoutException", "InternalServerException",
    "ModelNotReadyException", "ServiceQuotaExceededException", "RequestTimeout",
})
#: Model-id fragments of the families that accept a specific tool choice (toolChoice "tool"), per the
#: Converse service model's SpecificToolChoice: Anthropic Claude 3 and later, Amazon Nova.
FORCED_TOOL_FAMILIES = ("anthropic.claude-3", "anthropic.claude-sonnet", "anthropic.claude-opus", "anthropic.claude-haiku",
                        "amazon.nova")
#: ... and those that take tools with toolChoice "any" but no specific one: Mistral Large.
ANY_TOOL_FAMILIES = ("mistral.mistral-large",)
#: Model-id fragments of models that refuse a system prompt ("This model doesn't support system messages").
NO_SYSTEM_FAMILIES = ("mistral.mistral-7b", "mistral.mixtral-8x7b")
#: botocore exception names of credential problems: not retried, each with what to do.
CREDENTIAL_HINTS = {
    "NoCredentialsError": "no AWS credentials found (the standard chain: AWS_* variables, ~/.aws config or SSO, "
                          "instance or task role)",
    "PartialCredentialsError": "incomplete AWS credentials",
    "SSOTokenLoadError": "the AWS SSO session of this profile is missing: run `aws sso login`",
    "UnauthorizedSSOTokenError": "the AWS SSO session of this profile has expired: run `aws sso login`",
    "TokenRetrievalError": "the AWS SSO token could not be refreshed: run `aws sso login`",
    "ProfileNotFound": "AWS_PROFILE (or the profile given) names no profile in the AWS config",
    "NoRegionError": "no AWS region: set AWS_DEFAULT_REGION or AWS_REGION, or region in the entry",
}


#: Model-id fragments of families with Bedrock prompt caching (a Converse ``cachePoint``).
CACHE_FAMILIES = (
    "anthropic.claude-3-7-sonnet", "anthropic.claude-3-5-haiku", "anthropic.claude-sonnet-4", "anthropic.claude-opus-4",
    "anthropic.claude-haiku-4", "amazon.nova-micro", "amazon.nova-lite", "amazon.nova-pro", "amazon.nova-premier",
)
CACHE_POINT = {"cachePoint": {"type": "default"}}


def supports_prompt_cache(model_id: str) -> bool:
    return any(family in model_id for family in CACHE_FAMILIES)


def default_json_mode(model_id: str) -> JsonMode:
    if any(family in model_id for family in FORCED_TOOL_FAMILIES):
        return "tool"
    return "any" if any(family in model_id for family in ANY_TOOL_FAMILIES) else "none"


def credential_problem(exc: BaseException) -> str | None:
    """What to do about a botocore credential error (None: not one)."""
    hint = CREDENTIAL_HINTS.get(type(exc).__name__)
    return f"{hint} ({exc})" if hint else None


def aws_session(region: str | None = None) -> Any:
    """A boto3 session on the standard chain, its region from the argument, AWS_DEFAULT_REGION, the
    config, or AWS_REGION (which botocore itself does not read). An unknown profile is a ModelError."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.Session(region_name=region) if region else boto3.Session()
        if session.region_name is None and os.environ.get("AWS_REGION"):
            session = boto3.Session(region_name=os.environ["AWS_REGION"])
    except BotoCoreError as exc:
        raise ModelError(credential_problem(exc) or f"AWS configuration: {exc}") from None
    return session


def check_aws(region: str | None) -> None:
    """Credentials and a region from the standard chain, resolved as a call would resolve them (an SSO
    token is loaded, an unknown profile found), without calling Bedrock; a ModelError says what is wrong."""
    from botocore.exceptions import BotoCoreError

    session = aws_session(region)
    if session.region_name is None:
        raise ModelError("no AWS region: set AWS_DEFAULT_REGION or AWS_REGION, or region in the entry")
    try:
        credentials = session.get_credentials()
        if credentials is None:
            raise ModelError(CREDENTIAL_HINTS["NoCredentialsError"])
        credentials.get_frozen_credentials()
    except BotoCoreError as exc:
        raise ModelError(credential_problem(exc) or f"AWS credentials: {exc}") from None


def make_client(
    region: str | None, *, read_timeout_s: float = 300.0, endpoint_url: str | None = None, replay_only: bool = False,
    exchange: AnswerSource | None = None,
) -> Any:
    """A bedrock-runtime client on the standard credential chain: one attempt per call (the run's
    retry policy does the retrying), the given read timeout.

    ``exchange``: the run's recordings, which answer each call or send it and record the answer
    (:data:`~.base.AnswerSource`), through botocore's public ``before-send`` event: a handler that returns a
    response is what botocore reads, so the request signed for the model is what the cassette matches.

    ``replay_only``: the client's calls are answered by a cassette, so it signs with placeholder
    credentials, whatever the environment holds (botocore signs before the cassette sees the
    request: a real chain would need a region, and an SSO login, for nothing; an unknown
    ``AWS_PROFILE`` is not looked at).
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        read_timeout=read_timeout_s, connect_timeout=min(CONNECT_S, read_timeout_s),
    )
    if replay_only:
        no_profile = botocore.session.get_session({"profile": (None, None, None, None)})
        session = boto3.Session(botocore_session=no_profile, region_name=region or "us-east-1",
                                aws_access_key_id="replay", aws_secret_access_key="replay")
    else:
        session = aws_session(region)
    if session.region_name is None:
        raise ModelError("no AWS region: set AWS_DEFAULT_REGION or AWS_REGION, or region in the model's config entry")
    client = session.client("bedrock-runtime", config=config, endpoint_url=endpoint_url)
    if exchange is not None:
        client.meta.events.register("before-send.bedrock-runtime", Exchanged(client.meta.config, exchange))
    client.meta.events.register("before-parse.bedrock-runtime.Converse", _read_unambiguously)
    return client


class Exchanged:
    """botocore's ``before-send`` handler that answers a call from the run's recordings (``exchange``): replayed,
    or sent by a session of botocore's own (:class:`botocore.httpsession.URLLib3Session`, configured as the client's:
    its time-outs, the environment's proxies, ``AWS_CA_BUNDLE``) and recorded."""

    def __init__(self, config: Any, exchange: AnswerSource) -> None:
        self.config = config
        self.exchange = exchange
        self._session: Any = None
        self._lock = threading.Lock()

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        body = request.body if isinstance(request.body, bytes) else (request.body or b"")
        if not isinstance(body, bytes):
            body = body.encode("utf-8") if isinstance(body, str) else body.read()
        answer = self.exchange(request.method, request.url, body, None, lambda: self._send(request))
        headers = {name: ", ".join(value) if isinstance(value, list) else str(value)
                   for name, value in (answer.get("headers") or {}).items()}
        content = answer["body"]["string"]
        content = content.encode("utf-8") if isinstance(content, str) else content
        return AWSResponse(request.url, answer["status"]["code"], headers, _Body(content))

    def _send(self, request: Any) -> dict[str, Any]:
        response = self._http(request.url).send(request)
        return {"status": {"code": response.status_code, "message": ""},
                "headers": {name: [value] for name, value in response.headers.items()},
                "body": {"string": response.content}}

    def _http(self, url: str) -> Any:
        """The session, made on the first call sent (its proxies are the environment's for the endpoint's URL, as
        botocore's own endpoint takes them)."""
        from botocore.httpsession import URLLib3Session
        from botocore.utils import get_environ_proxies

        with self._lock:
            if self._session is None:
                config = self.config
                self._session = URLLib3Session(
                    verify=os.environ.get("AWS_CA_BUNDLE") or True, proxies=config.proxies or get_environ_proxies(url),
                    timeout=(config.connect_timeout, config.read_timeout), max_pool_connections=config.max_pool_connections,
                    proxies_config=config.proxies_config, client_cert=config.client_cert)
            return self._session


class _Body:
    """A recorded answer's body, as botocore reads a response's (``stream()``)."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


def _read_unambiguously(response_dict: dict[str, Any], **_: Any) -> None:
    """Before botocore parses a Converse answer: its JSON read within a bound on its values and without a key given
    twice (``"text"`` twice in a content block: botocore would keep the last) - else an error, never one reading."""
    if response_dict.get("status_code", 200) < 300:
        untrusted_json.loads(response_dict.get("body") or b"{}", max_values=MAX_ANSWER_VALUES)


class BedrockChat:
    """A chat model on Amazon Bedrock (``bedrock:<model id or inference profile>``)."""

    def __init__(
        self, *, spec: str, model_id: str, region: str | None = None, client: Any = None,
        json_mode: JsonMode | None = None, read_timeout_s: float = 300.0, endpoint_url: str | None = None,
        replay_only: bool = False, prompt_cache: bool | None = None, exchange: AnswerSource | None = None,
    ) -> None:
        self.spec = spec
        self.model_id = model_id
        #: mark each prompt's fixed part as a cache point (None: by model family)
        self.prompt_cache = supports_prompt_cache(model_id) if prompt_cache is None else prompt_cache
        self.json_mode: JsonMode = json_mode or default_json_mode(model_id)
        #: the most one call may take, as a whole
        self.timeout_s = read_timeout_s
        self._client = client if client is not None else make_client(
            region, read_timeout_s=read_timeout_s, endpoint_url=endpoint_url, replay_only=replay_only,
            exchange=exchange)

    def __repr__(self) -> str:
        return f"BedrockChat(spec={self.spec!r}, model_id={self.model_id!r})"

    @property
    def supports_json_schema(self) -> bool:
        return self.json_mode != "none"

    def converse_args(self, request: ChatRequest) -> dict[str, Any]:
        system: list[dict[str, Any]] = [{"text": m.content} for m in request.messages if m.role == "system"]
        turns = [m for m in request.messages if m.role != "system"]
        if system and any(family in self.model_id for family in NO_SYSTEM_FAMILIES):
            turns = _system_in_first_turn(" ".join(block["text"] for block in system), turns)
            system = []
        if system and self.prompt_cache:
            system.append(CACHE_POINT)
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
        if request.json_schema is not None and self.json_mode != "none":
            choice = {"tool": {"name": request.schema_name}} if self.json_mode == "tool" else {"any": {}}
            args["toolConfig"] = {
                "tools": [{"toolSpec": {
                    "name": request.schema_name,
                    "description": "Record your answer in exactly this structure.",
                    "inputSchema": {"json": request.json_schema},
                }}],
                "toolChoice": choice,
            }
        return args

    def _content(self, message: Message) -> list[dict[str, Any]]:
        """A message's content blocks; with prompt caching, a cache point after its fixed prefix."""
        text = message.content or "(empty message)"
        cut = message.cache_prefix
        if self.prompt_cache and 0 < cut < len(text):
            return [{"text": text[:cut]}, CACHE_POINT, {"text": text[cut:]}]
        return [{"text": text}]

    @property
    def region(self) -> str | None:
        """The region the client calls (its own, resolved from the entry or the AWS chain)."""
        return self._client.meta.region_name

    @property
    def endpoint_url(self) -> str:
        """The endpoint the client calls (the region's, or the entry's ``endpoint_url``)."""
        return self._client.meta.endpoint_url

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self._parse(self.converse(self.converse_args(request)))

    def converse(self, args: dict[str, Any]) -> dict[str, Any]:
        """One Converse call of these arguments, its answer as the service returns it (botocore's metadata left out);
        every failure a :class:`ModelError` saying what went wrong and whether another attempt may help."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = call_by_deadline(lambda: self._client.converse(**args), self.timeout_s, "timeout_s",
                                        thread="bedrock")
        except TimeLimit as exc:
            assert exc.deadline is not None
            raise timed_out("no answer", exc.deadline, model=self.spec) from None
        except untrusted_json.UntrustedJsonError as exc:
            raise ModelError(f"ambiguous or oversized Converse answer: {exc}", model=self.spec, retryable=True) from exc
        except UnicodeDecodeError as exc:
            raise ModelError(f"malformed Converse answer: not UTF-8 ({exc.reason})", model=self.spec,
                             retryable=True) from exc
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "ClientError")
            raise ModelError(f"Bedrock {code}: {error.get('Message', '')}".strip(), model=self.spec,
                             retryable=code in RETRYABLE_CODES) from exc
        except BotoCoreError as exc:
            problem = credential_problem(exc)
            if problem is not None:  # retrying cannot help: say what to do
                raise ModelError(problem, model=self.spec) from exc
            raise ModelError(f"Bedrock call failed ({type(exc).__name__}: {exc})", model=self.spec, retryable=True) from exc
        return {key: value for key, value in response.items() if key != "ResponseMetadata"}

    def answer_of(self, response: dict[str, Any]) -> ChatResponse:
        """A Converse answer read as this model's (a batch job's results hold such answers): a ModelError when it is
        not one clear answer."""
        return self._parse(response)

    def _parse(self, response: dict[str, Any]) -> ChatResponse:
        try:
            content = response["output"]["message"]["content"]
        except (KeyError, TypeError) as exc:
            raise ModelError(f"malformed Converse answer: {str(response)[:300]}", model=self.spec) from exc
        tool_inputs = [block["toolUse"]["input"] for block in content if "toolUse" in block]
        if len(tool_inputs) > 1:  # one was asked for: which of several is the answer is not said
            raise ModelError(f"ambiguous Converse answer: {len(tool_inputs)} tool inputs where one was asked for",
                             model=self.spec, retryable=True)
        text = json.dumps(tool_inputs[0]) if tool_inputs else "".join(block.get("text", "") for block in content)
        usage = response.get("usage", {})
        return ChatResponse(
            text=text, model=self.model_id, prompt_tokens=usage.get("inputTokens"),
            completion_tokens=usage.get("outputTokens"), finish_reason=response.get("stopReason"),
            cache_read_tokens=usage.get("cacheReadInputTokens"), cache_write_tokens=usage.get("cacheWriteInputTokens"),
        )

    def close(self) -> None:
        self._client.close()


def _system_in_first_turn(system: str, turns: list[Message]) -> list[Message]:
    """For a model that refuses a system prompt: the instructions open the first user message."""
    if turns and turns[0].role == "user":
        first = turns[0]
        return [Message("user", f"{system}\n\n{first.content}", cache_prefix=0), *turns[1:]]
    return [Message("user", system), *turns]
