"""What a model is, as data: parsed from a spec string or read from a named config entry.

    local                        -> LocalModel()                the embedded SmolLM2-135M
    local:/path/model.gguf       -> LocalModel(model_path=...)
    openai:<model>               -> OpenAIModel(model=...)      base URL and key from the run's settings
    bedrock:<model id>           -> BedrockModel(model=...)     region and credentials from the AWS chain

Named entries live in ``[tool.personalens.models.NAME]`` (or ``[models.NAME]`` in
personalens.toml) with ``kind = "local" | "openai" | "bedrock"`` and the fields below,
so ``--judge-model judge-prod`` stands for a whole configured model.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UsageError


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LocalModel(_Entry):
    kind: Literal["local"] = "local"
    #: a GGUF file; None is the bundled SmolLM2-135M
    model_path: Optional[str] = None

    def spec(self) -> str:
        return f"local:{self.model_path}" if self.model_path else "local"


class OpenAIModel(_Entry):
    kind: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    #: None: OPENAI_BASE_URL, then openai_base_url of the config, then OpenAI's own
    base_url: Optional[str] = None
    #: the *name* of the environment variable that holds the key (never the key itself)
    api_key_env: Optional[str] = None
    #: extra request headers; ``${VAR}`` in a value is read from the environment at call time
    headers: dict[str, str] = Field(default_factory=dict)
    json_dialect: Literal["openai", "llama_cpp", "none"] = "openai"
    timeout_s: float = Field(default=120.0, gt=0)

    def spec(self) -> str:
        return f"openai:{self.model}"


class BedrockModel(_Entry):
    kind: Literal["bedrock"] = "bedrock"
    #: a model id or an inference profile id / ARN
    model: str = Field(min_length=1)
    #: None: the AWS chain's region (AWS_DEFAULT_REGION, ~/.aws/config)
    region: Optional[str] = None
    #: how a judge's JSON schema is asked for: "tool" forces a tool whose input is the schema (Claude, Nova),
    #: "any" forces the only tool offered (Mistral Large), "none" asks in the prompt; None: by model family
    json_mode: Optional[Literal["tool", "any", "none"]] = None
    #: the read timeout of one call, in seconds (retries are the run's own: --retries)
    timeout_s: float = Field(default=300.0, gt=0)
    #: another bedrock-runtime endpoint (a VPC endpoint, a proxy); None: the region's
    endpoint_url: Optional[str] = Field(default=None, pattern=r"^https?://")
    #: mark each prompt's fixed part for Bedrock prompt caching; None: on for model families that support it
    prompt_cache: Optional[bool] = None

    def spec(self) -> str:
        return f"bedrock:{self.model}"


ModelEntry = Annotated[Union[LocalModel, OpenAIModel, BedrockModel], Field(discriminator="kind")]
BACKEND_NAMES = ("local", "openai", "bedrock")
#: where ``openai:`` specs go unless a setting (``openai_base_url``, ``OPENAI_BASE_URL``) says otherwise
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


def parse_spec(spec: str) -> LocalModel | OpenAIModel | BedrockModel:
    """A spec string as an entry; a :class:`UsageError` names what is wrong with it."""
    backend, sep, rest = spec.partition(":")
    if backend not in BACKEND_NAMES:
        raise UsageError(
            f"model spec {spec!r}: unknown backend {backend!r} (known: {', '.join(BACKEND_NAMES)}, "
            "or the name of a [tool.personalens.models] entry)"
        )
    if sep and not rest:
        raise UsageError(f"model spec {spec!r}: nothing after '{backend}:'")
    if backend == "local":
        return LocalModel(model_path=rest or None)
    if not rest:
        example = "openai:gpt-4o-mini" if backend == "openai" else "bedrock:anthropic.claude-3-5-sonnet-20241022-v2:0"
        raise UsageError(f"model spec {spec!r}: name the model, like {example}")
    return OpenAIModel(model=rest) if backend == "openai" else BedrockModel(model=rest)


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, env: dict[str, str] | None = None) -> str:
    """``"Bearer ${TOKEN}"`` -> the value with TOKEN read from the environment (missing: empty)."""
    source = os.environ if env is None else env
    return _VAR.sub(lambda m: source.get(m.group(1), ""), value)
