"""The project's config: ``[tool.personalens]`` of pyproject.toml overlaid by ``personalens.toml``, both in
the project folder, validated against the table of settings (:mod:`.table`) and the entry schemas of
models and assistants; a wrong key is one line naming the file and the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..assistants.kinds import ASSISTANT_KINDS, AssistantEntry
from ..errors import ConfigError, dotted
from ..projectfiles import read_layers
from ..llm.entries import BACKEND_NAMES, ModelEntry
from .table import SETTINGS


class LocalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_path: Optional[str] = None
    n_ctx: int = Field(default=16384, ge=512)
    n_threads: Optional[int] = Field(default=None, ge=1)
    startup_timeout_s: float = Field(default=120.0, gt=0)


def _setting_fields() -> dict[str, Any]:
    """Every setting of the table the config may set (None: not set)."""
    return {
        s.config_key: (Optional[s.python_type], Field(default=None, description=s.help, **s.pydantic_bounds()))
        for s in SETTINGS if s.config_key
    }


#: A ``[presets.NAME]`` table: a named set of settings, chosen with ``--preset NAME`` or ``preset = "NAME"``.
PresetConfig = create_model("PresetConfig", __config__=ConfigDict(extra="forbid"), **_setting_fields())


def _config_fields() -> dict[str, Any]:
    """The config's keys: the settings, and the tables."""
    fields = _setting_fields()
    fields["local"] = (LocalConfig, Field(default_factory=LocalConfig))
    fields["models"] = (dict[str, ModelEntry], Field(default_factory=dict))
    fields["assistants"] = (dict[str, AssistantEntry], Field(default_factory=dict))
    fields["presets"] = (dict[str, PresetConfig], Field(default_factory=dict))  # type: ignore[valid-type]
    # checked where the price table is built (costs/prices.py), with one line naming the model and the field
    fields["prices"] = (dict[str, Any], Field(default_factory=dict))
    return fields


#: The ``[tool.personalens]`` table of pyproject.toml, or a ``personalens.toml`` file.
ProjectConfig = create_model("ProjectConfig", __config__=ConfigDict(extra="forbid"), **_config_fields())


@dataclass(frozen=True)
class ProjectSources:
    """Which files the config came from, and where each named entry was written."""

    files: tuple[Path, ...] = ()
    assistants: dict[str, str] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)


def _validated(path: Path, prefix: str, data: dict[str, Any]) -> ProjectConfig:
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = list(first["loc"])
        if len(location) >= 3 and location[0] in ("assistants", "models"):
            del location[2]  # pydantic puts the entry's kind in the path of a union member's field
        key = prefix + dotted(location)
        if first["type"] == "extra_forbidden":
            problem = "unknown key"
        elif first["type"] == "missing":
            named = len(location) >= 3 and location[0] in ("assistants", "models")
            kind = data[location[0]][location[1]].get("kind") if named else None
            problem = "missing" + (f" (kind {kind!r} needs it)" if kind else "")
        elif first["type"] in ("union_tag_not_found", "union_tag_invalid"):
            kinds = ", ".join(ASSISTANT_KINDS if location[0] == "assistants" else BACKEND_NAMES)
            tag = first.get("ctx", {}).get("tag")
            problem = f"unknown kind {tag!r} (one of: {kinds})" if tag else f"needs a kind (one of: {kinds})"
        else:
            problem = f"{first['msg'].removeprefix('Value error, ')} (got {first.get('input')!r})"
        raise ConfigError(path, key, problem) from None


def load_project_config(rootdir: Path) -> tuple[ProjectConfig, ProjectSources]:
    """The project's config: pyproject.toml's [tool.personalens], overlaid by personalens.toml.

    In personalens.toml, an assistant may be written as ``[assistants.NAME]`` or simply as a
    top-level ``[NAME]`` table; a setting set in both files takes personalens.toml's value,
    and named entries from both files are merged (personalens.toml wins on a clash).
    """
    layers = read_layers(rootdir, settings=ProjectConfig.model_fields)
    merged: dict[str, Any] = {"models": {}, "assistants": {}, "presets": {}}
    sources = ProjectSources(files=tuple(layer.path for layer in layers))
    for layer in layers:
        path, prefix, where = layer.path, layer.prefix, layer.where
        config = _validated(path, prefix, layer.data)
        for key in config.model_fields_set:
            if key in ("models", "assistants", "presets"):
                merged[key].update(getattr(config, key))
            else:
                merged[key] = getattr(config, key)
        sources.assistants.update(where)
        sources.models.update({name: f"[{prefix}models.{name}] in {path.name}" for name in config.models})
    return ProjectConfig(**merged), sources
