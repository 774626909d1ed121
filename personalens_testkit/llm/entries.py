"""What a model is, as data: parsed from a spec string or read from a named config entry.

    local                        -> LocalModel()                the embedded SmolLM2-135M
    local:/path/model.gguf       -> LocalModel(model_path=...)
    openai:<model>               -> OpenAIModel(model=...)      base URL and key from the run's settings
    bedrock:<model id>           -> BedrockModel(model=...)     region and credentials from the AWS chain

Named entries live in ``[tool.personalens.models.NAME]`` (or ``[models.NAME]`` in
personalens.toml) with ``kind = "local" | "openai" | "bedrock"`` and the fields below,
so ``--judge-model judge-prod`` stands for a whole configured model. Each backend - its entry, its spec, its
client - is a module of :mod:`personalens_testkit.llm.backends`; this module reads specs and entries for all.
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import BaseModel, Field

from ..errors import UsageError
from .backends import BACKEND_NAMES, BACKENDS, OPENAI_DEFAULT_URL
from .backends.bedrock import BedrockModel
from .backends.local import LocalModel
from .backends.openai import OpenAIModel

__all__ = ["BACKEND_NAMES", "OPENAI_DEFAULT_URL", "BedrockModel", "LocalModel", "ModelEntry", "OpenAIModel",
           "parse_spec"]

#: any backend's entry, told apart by its ``kind``
ModelEntry = Annotated[Union[tuple(b.entry for b in BACKENDS.values())], Field(discriminator="kind")]  # type: ignore[valid-type]


def parse_spec(spec: str) -> BaseModel:
    """A spec string as an entry; a :class:`UsageError` names what is wrong with it."""
    name, sep, rest = spec.partition(":")
    backend = BACKENDS.get(name)
    if backend is None:
        raise UsageError(
            f"model spec {spec!r}: unknown backend {name!r} (known: {', '.join(BACKEND_NAMES)}, "
            "or the name of a [tool.personalens.models] entry)"
        )
    if sep and not rest:
        raise UsageError(f"model spec {spec!r}: nothing after '{name}:'")
    if not rest and backend.example:
        raise UsageError(f"model spec {spec!r}: name the model, like {backend.example}")
    return backend.from_spec(rest)

