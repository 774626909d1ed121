"""``openai:<model>``: a model behind OpenAI's chat-completions API, or any endpoint that speaks it (base URL from
the entry, else ``OPENAI_BASE_URL``, ``openai_base_url`` of the config, else OpenAI's own)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from . import BackendEntry, GateModels, ModelBackend, ModelContext

if TYPE_CHECKING:
    from ..base import ChatModel

#: a dated snapshot's suffix (``gpt-4o-2024-08-06``): priced as its model when the table has no row for it
SNAPSHOT_DATE = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class OpenAIModel(BackendEntry):
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


def build(label: str, entry: OpenAIModel, ctx: ModelContext, role: str) -> ChatModel:
    from ..env_refs import expand_env
    from ..openai_compat import OpenAICompatibleChat

    key_env = entry.api_key_env or ctx.openai_api_key_env
    return OpenAICompatibleChat(
        spec=label, base_url=entry.base_url or ctx.openai_base_url, model=entry.model,
        api_key=os.environ.get(key_env), json_dialect=entry.json_dialect, timeout_s=entry.timeout_s,
        headers={name: expand_env(value) for name, value in entry.headers.items()}, answers=ctx.exchange,
    )


def _price_keys(spec: str, model: str) -> list[str]:
    return [spec, model, SNAPSHOT_DATE.sub("", model)]


GATE = GateModels(
    config_lines="""# The benchmark's own models: the user agent and the judge, on OpenAI or any OpenAI-compatible
# endpoint (base URL from OPENAI_BASE_URL, key from OPENAI_API_KEY).
user_model = "openai:gpt-4o"
judge_model = "openai:gpt-4o\"""",
    comment=("# Models: openai:gpt-4o in personalens.toml, with the OPENAI_API_KEY secret (and, for another\n"
             "# OpenAI-compatible endpoint, an OPENAI_BASE_URL variable or secret)."),
    secret="OPENAI_API_KEY",
    env=("OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}",
         "OPENAI_BASE_URL: ${{ vars.OPENAI_BASE_URL || secrets.OPENAI_BASE_URL }}"),
    script=('[ -n "${OPENAI_API_KEY:-}" ] || unset OPENAI_API_KEY', '[ -n "${OPENAI_BASE_URL:-}" ] || unset OPENAI_BASE_URL'),
)

BACKEND = ModelBackend("openai", OpenAIModel, lambda rest: OpenAIModel(model=rest), build, order=1,
                       example="openai:gpt-4o-mini", price_keys=_price_keys, gate=GATE)
