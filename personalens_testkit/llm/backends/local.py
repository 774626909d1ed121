"""``local``: the embedded model (``local`` - the bundled SmolLM2-135M - or ``local:FILE.gguf``), served by a
llama.cpp server the run starts (:mod:`personalens_testkit.llm.embedded`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

from ..local_settings import DEFAULT_LOCAL_CAPS, LOCAL_STRING_CHARS, LocalServerSettings
from . import BackendEntry, GateModels, ModelBackend, ModelContext

if TYPE_CHECKING:
    from ..base import ChatModel


class LocalModel(BackendEntry):
    kind: Literal["local"] = "local"
    #: a GGUF file; None is the bundled SmolLM2-135M
    model_path: Optional[str] = None

    def spec(self) -> str:
        return f"local:{self.model_path}" if self.model_path else "local"


def local_settings(entry: LocalModel, base: LocalServerSettings) -> LocalServerSettings:
    """The embedded server's settings for an entry: the run's, with the entry's model file."""
    return replace(base, model_path=Path(entry.model_path)) if entry.model_path else base


def build(label: str, entry: LocalModel, ctx: ModelContext, role: str) -> ChatModel:
    from ..openai_compat import OpenAICompatibleChat

    settings = local_settings(entry, ctx.local)
    bundled = settings.model_path is None
    return OpenAICompatibleChat(
        spec=label, base_url=ctx.local_url_for(settings, role), model=settings.alias(), json_dialect="llama_cpp",
        timeout_s=ctx.local_timeout_s, timeout_name="the embedded model's limit",
        max_tokens_cap=DEFAULT_LOCAL_CAPS if bundled else None,
        max_string_chars=LOCAL_STRING_CHARS if bundled else None, answers=ctx.exchange,
    )


def _price_keys(spec: str, model: str) -> list[str]:
    return [spec, "local"]  # priced as the embedded model, whatever its file


GATE = GateModels(
    config_lines="""# The benchmark's own models: the user agent and the judge. `local` (the default) is the embedded
# model (pip install 'personalens-testkit[embedded]'): it proves the path runs, its verdicts are weak.
# For real verdicts use a strong model (personalens init --models openai|bedrock writes these):
# user_model = "openai:gpt-4o"     # base URL from OPENAI_BASE_URL, key from OPENAI_API_KEY
# judge_model = "openai:gpt-4o"
# preset = "paper"                 # the paper's set-up on Amazon Bedrock""",
    comment="""#
# Models: `local` in personalens.toml, and no credentials here: the user agent's and the judge's calls
# replay from cassettes/<assistant>/ and the bot - this pull request's code - runs live. A case whose bot
# answers a recorded turn differently cannot be scored offline: it is reported "not scored", with the
# command that scores it, and the gate is red. `personalens init --models openai` (or bedrock) writes
# this workflow with model credentials, which score such a change live.
""")

BACKEND = ModelBackend("local", LocalModel, lambda rest: LocalModel(model_path=rest or None), build, order=0,
                       embedded=True, price_keys=_price_keys, gate=GATE)
