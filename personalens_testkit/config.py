"""Run settings, resolved once, in one precedence order everywhere:

    command-line option  >  environment variable (where one exists)  >  project config  >  default

Project config is the first of ``personalens.toml`` (top-level keys) or ``pyproject.toml``
(``[tool.personalens]``) found in the pytest rootdir. Environment variables read here
and nowhere else: ``OPENAI_BASE_URL``, ``PERSONALENS_LOCAL_URL``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .assistants.base import ContextSwitches
from .data.loader import open_dataset
from .data.selection import Selection, parse_domains, parse_profiles, parse_sample, parse_task_kind, profile_numbers
from .errors import ConfigError, DataError, UsageError, dotted
from .gating.thresholds import default_thresholds_path
from .llm.embedded import LocalServerSettings
from .llm.registry import check_spec

ASSISTANTS = ("reference",)
DEFAULT_RESULTS_DIR = "personalens-results"


class LocalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_path: Optional[str] = None
    n_ctx: int = Field(default=16384, ge=512)
    n_threads: Optional[int] = Field(default=None, ge=1)
    startup_timeout_s: float = Field(default=120.0, gt=0)


class ProjectConfig(BaseModel):
    """The ``[tool.personalens]`` table (or a ``personalens.toml`` file)."""

    model_config = ConfigDict(extra="forbid")

    user_model: Optional[str] = None
    judge_model: Optional[str] = None
    assistant: Optional[str] = None
    assistant_model: Optional[str] = None
    assistant_context: Optional[str] = None
    openai_base_url: Optional[str] = None
    openai_api_key_env: str = "OPENAI_API_KEY"
    thresholds: Optional[str] = None
    results_dir: Optional[str] = None
    personalens_data: Optional[str] = None
    local: LocalConfig = Field(default_factory=LocalConfig)


def load_project_config(rootdir: Path) -> tuple[ProjectConfig, Path | None]:
    """The project's config and the file it came from (None when there is none)."""
    own = rootdir / "personalens.toml"
    pyproject = rootdir / "pyproject.toml"
    for path, table in ((own, None), (pyproject, ("tool", "personalens"))):
        if not path.is_file():
            continue
        try:
            data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(path, None, f"not valid TOML: {exc}") from None
        prefix = ""
        if table is not None:
            for key in table:
                data = data.get(key, {}) if isinstance(data, dict) else {}
            if not data and path == pyproject:
                continue
            prefix = ".".join(table) + "."
        try:
            return ProjectConfig.model_validate(data), path
        except ValidationError as exc:
            first = exc.errors()[0]
            key = prefix + dotted(first["loc"])
            problem = "unknown key" if first["type"] == "extra_forbidden" else f"{first['msg']} (got {first.get('input')!r})"
            raise ConfigError(path, key, problem) from None
    return ProjectConfig(), None


@dataclass(frozen=True)
class RunSettings:
    selection: Selection = field(default_factory=Selection)
    data_path: Path | None = None
    max_turns: int | None = None
    assistant: str = "reference"
    assistant_model: str = "local"
    assistant_context: ContextSwitches = field(default_factory=ContextSwitches)
    user_model: str = "local"
    judge_model: str = "local"
    thresholds_path: Path = field(default_factory=default_thresholds_path)
    results_dir: Path = Path(DEFAULT_RESULTS_DIR)
    local: LocalServerSettings = field(default_factory=LocalServerSettings)
    local_url: str | None = None
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key_env: str = "OPENAI_API_KEY"
    config_file: Path | None = None

    def model_specs(self) -> dict[str, str]:
        """The model spec of each role that runs on a model of ours."""
        specs = {"user_agent": self.user_model, "judge": self.judge_model}
        if self.assistant == "reference":
            specs["assistant"] = self.assistant_model
        return specs


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def resolve_settings(options: Mapping[str, Any], rootdir: Path, env: Mapping[str, str]) -> RunSettings:
    """Build :class:`RunSettings` from parsed options (``None`` = not given), the config and the environment."""
    config, config_file = load_project_config(rootdir)

    def under_root(value: str | None) -> Path | None:
        return None if value is None else (rootdir / Path(value).expanduser())

    profiles = options.get("profiles")
    domains = options.get("domains")
    selection = Selection(
        sample=parse_sample(options.get("sample") or "50"),
        profiles=parse_profiles(profiles) if profiles is not None else None,
        domains=parse_domains(domains) if domains is not None else None,
        task_kind=parse_task_kind(options.get("task_kind") or "both"),
    )
    max_turns = options.get("max_turns")
    if max_turns is not None and max_turns < 1:
        raise UsageError(f"--max-turns: must be at least 1 (got {max_turns})")

    assistant = _first(options.get("assistant"), config.assistant, "reference")
    if assistant not in ASSISTANTS:
        raise UsageError(f"--assistant: unknown assistant {assistant!r} (known: {', '.join(ASSISTANTS)})")
    specs = {}
    for role in ("user_model", "judge_model", "assistant_model"):
        spec = _first(options.get(role), getattr(config, role), "local")
        try:
            specs[role] = check_spec(spec)
        except UsageError as exc:
            raise UsageError(f"--{role.replace('_', '-')}: {exc}") from None
    context_text = _first(options.get("assistant_context"), config.assistant_context, "none")

    thresholds = options.get("thresholds")
    if thresholds is not None:
        thresholds_path = Path(thresholds).expanduser()
    elif config.thresholds is not None:
        thresholds_path = rootdir / config.thresholds
    elif (rootdir / "thresholds.yaml").is_file():
        thresholds_path = rootdir / "thresholds.yaml"
    else:
        thresholds_path = default_thresholds_path()

    data = options.get("personalens_data")
    data_path = Path(data).expanduser() if data is not None else under_root(config.personalens_data)
    results = options.get("results_dir")
    results_dir = Path(results).expanduser() if results is not None else rootdir / (config.results_dir or DEFAULT_RESULTS_DIR)

    local_defaults = LocalServerSettings()
    local = LocalServerSettings(
        model_path=under_root(config.local.model_path),
        n_ctx=config.local.n_ctx,
        n_threads=config.local.n_threads or local_defaults.n_threads,
        startup_timeout_s=config.local.startup_timeout_s,
    )
    return RunSettings(
        selection=selection, data_path=data_path, max_turns=max_turns,
        assistant=assistant, assistant_model=specs["assistant_model"],
        assistant_context=ContextSwitches.parse(context_text),
        user_model=specs["user_model"], judge_model=specs["judge_model"],
        thresholds_path=thresholds_path, results_dir=results_dir, local=local,
        local_url=_first(options.get("local_url"), env.get("PERSONALENS_LOCAL_URL") or None),
        openai_base_url=_first(env.get("OPENAI_BASE_URL") or None, config.openai_base_url, "https://api.openai.com/v1"),
        openai_api_key_env=config.openai_api_key_env, config_file=config_file,
    )


def check_selection(settings: RunSettings) -> None:
    """Fail early, with one line, on a data folder or profile selection that cannot work (reads no files)."""
    try:
        dataset = open_dataset(settings.data_path)
    except DataError as exc:
        raise UsageError(f"--personalens-data: {exc}") from None
    profile_numbers(dataset, settings.selection)
