"""The project's config files, read but not yet validated: ``[tool.personalens]`` of pyproject.toml, then
``personalens.toml``, both in the project folder (a later layer overrides an earlier one).

In personalens.toml an assistant may be written as ``[assistants.NAME]`` or simply as a top-level
``[NAME]`` table: every top-level table that is not a setting is an assistant entry.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import ConfigError

#: the config's own tables, never assistant entries
TABLES = ("local", "models", "assistants", "presets")


@dataclass(frozen=True)
class ConfigLayer:
    """One file's settings: the file, how its keys are named in messages, its table, and where each
    assistant entry of it was written."""

    path: Path
    prefix: str
    data: dict[str, Any]
    where: dict[str, str]


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"not valid TOML: {exc}") from None


def table(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A sub-table, or {} when it is missing or not a table (validation then names the key)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def read_layers(rootdir: Path, *, settings: Iterable[str] = ()) -> list[ConfigLayer]:
    """The config layers of the project in ``rootdir`` (``settings``: the names of the config's settings,
    so that a top-level table of personalens.toml that is none of them is taken for an assistant)."""
    layers = []
    pyproject = rootdir / "pyproject.toml"
    if pyproject.is_file():
        data = read_toml(pyproject).get("tool", {}).get("personalens")
        if isinstance(data, dict) and data:
            where = {name: f"[tool.personalens.assistants.{name}] in pyproject.toml" for name in table(data, "assistants")}
            layers.append(ConfigLayer(pyproject, "tool.personalens.", data, where))
    own = rootdir / "personalens.toml"
    if own.is_file():
        data = read_toml(own)
        if not isinstance(data.get("assistants", {}), dict):
            raise ConfigError(own, "assistants", "expected a table of assistant entries ([assistants.NAME])")
        where = {name: f"[assistants.{name}] in personalens.toml" for name in table(data, "assistants")}
        known = set(settings) | set(TABLES)
        for name in [k for k, v in data.items() if k not in known and isinstance(v, dict)]:
            data.setdefault("assistants", {})[name] = data.pop(name)
            where[name] = f"[{name}] in personalens.toml"
        layers.append(ConfigLayer(own, "", data, where))
    return layers
