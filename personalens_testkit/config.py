"""Run settings, resolved once, in one precedence order everywhere:

    command-line option  >  environment variable (where one exists)  >  project config  >  default

Project config is ``pyproject.toml``'s ``[tool.personalens]`` overlaid by ``personalens.toml``
(top-level keys), both read from the pytest rootdir. Environment variables read here and
nowhere else: ``OPENAI_BASE_URL``, ``PERSONALENS_LOCAL_URL`` (API keys and AWS credentials
are read by the backends, from variables whose names the config gives).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .assistants.base import ContextSwitches
from .assistants.entries import ASSISTANT_KINDS, AssistantEntry, ReferenceEntry
from .assistants.registry import BUILTIN, AssistantCatalogue
from .data.loader import open_dataset
from .data.selection import Selection, parse_domains, parse_profiles, parse_sample, parse_task_kind, profile_numbers
from .errors import ConfigError, DataError, UsageError, dotted
from .gating.thresholds import default_thresholds_path
from .llm.embedded import LocalServerSettings
from .llm.entries import BACKEND_NAMES, ModelEntry
from .llm.registry import check_spec
from .llm.limits import Limits
from .llm.retry import RetryPolicy
from .replay.modes import check_record_mode
from .runstop import DEFAULT_STOP_AFTER_ERRORS

DEFAULT_RESULTS_DIR = "personalens-results"
#: the most retries of a failed call (each waits up to retry_max_s)
MAX_RETRIES = 10
DEFAULT_CASSETTE_DIR = "cassettes"


class LocalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_path: Optional[str] = None
    n_ctx: int = Field(default=16384, ge=512)
    n_threads: Optional[int] = Field(default=None, ge=1)
    startup_timeout_s: float = Field(default=120.0, gt=0)


class ProjectConfig(BaseModel):
    """The ``[tool.personalens]`` table of pyproject.toml, or a ``personalens.toml`` file."""

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
    cassette_dir: Optional[str] = None
    record_mode: Optional[str] = None
    retries: Optional[int] = Field(default=None, ge=0, le=MAX_RETRIES)
    retry_initial_s: float = Field(default=1.0, gt=0, le=60)
    retry_max_s: float = Field(default=20.0, gt=0, le=600)
    scenario_timeout_s: Optional[float] = Field(default=None, gt=0)
    concurrency: Optional[int] = Field(default=None, ge=1, le=256)
    max_rps: Optional[float] = Field(default=None, gt=0)
    max_concurrency: Optional[int] = Field(default=None, ge=1)
    stop_after_errors: Optional[int] = Field(default=None, ge=0)
    #: names of environment variables whose values are secrets, beyond those named like one
    secret_env: list[str] = Field(default_factory=list)
    personalens_data: Optional[str] = None
    local: LocalConfig = Field(default_factory=LocalConfig)
    models: dict[str, ModelEntry] = Field(default_factory=dict)
    assistants: dict[str, AssistantEntry] = Field(default_factory=dict)


@dataclass(frozen=True)
class ProjectSources:
    """Which files the config came from, and where each named entry was written."""

    files: tuple[Path, ...] = ()
    assistants: dict[str, str] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"not valid TOML: {exc}") from None


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


def _table(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A sub-table, or {} when it is missing or not a table (validation then names the key)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def load_project_config(rootdir: Path) -> tuple[ProjectConfig, ProjectSources]:
    """The project's config: pyproject.toml's [tool.personalens], overlaid by personalens.toml.

    In personalens.toml, an assistant may be written as ``[assistants.NAME]`` or simply as a
    top-level ``[NAME]`` table; a setting set in both files takes personalens.toml's value,
    and named entries from both files are merged (personalens.toml wins on a clash).
    """
    layers: list[tuple[Path, str, dict[str, Any], dict[str, str]]] = []
    pyproject = rootdir / "pyproject.toml"
    if pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("personalens")
        if isinstance(table, dict) and table:
            where = {name: f"[tool.personalens.assistants.{name}] in pyproject.toml" for name in _table(table, "assistants")}
            layers.append((pyproject, "tool.personalens.", table, where))
    own = rootdir / "personalens.toml"
    if own.is_file():
        data = _read_toml(own)
        if not isinstance(data.get("assistants", {}), dict):
            raise ConfigError(own, "assistants", "expected a table of assistant entries ([assistants.NAME])")
        where = {name: f"[assistants.{name}] in personalens.toml" for name in _table(data, "assistants")}
        settings = set(ProjectConfig.model_fields)
        for name in [k for k, v in data.items() if k not in settings and isinstance(v, dict)]:
            data.setdefault("assistants", {})[name] = data.pop(name)
            where[name] = f"[{name}] in personalens.toml"
        layers.append((own, "", data, where))

    merged: dict[str, Any] = {"models": {}, "assistants": {}}
    sources = ProjectSources(files=tuple(path for path, *_ in layers))
    for path, prefix, data, where in layers:
        config = _validated(path, prefix, data)
        for key in config.model_fields_set:
            if key in ("models", "assistants"):
                merged[key].update(getattr(config, key))
            else:
                merged[key] = getattr(config, key)
        sources.assistants.update(where)
        sources.models.update({name: f"[{prefix}models.{name}] in {path.name}" for name in config.models})
    return ProjectConfig(**merged), sources


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
    cassette_dir: Path = Path(DEFAULT_CASSETTE_DIR)
    #: vcrpy's record mode: none (offline replay, the default), once, new_episodes, all
    record_mode: str = "none"
    #: replay the dialogues, judge them again
    rejudge: bool = False
    #: tries per scenario (each with its own cassette)
    repeat: int = 1
    turn_level: bool = False
    leak_check: bool = False
    #: report files (None: the run folder's report.json / junit.xml / report.html)
    json_report: Optional[Path] = None
    junit_report: Optional[Path] = None
    html_report: Optional[Path] = None
    #: a previous run's report or results to compare with, and the drop it tolerates
    baseline: Optional[Path] = None
    baseline_margin: float = 0.0
    #: how failed calls are retried; the most seconds one scenario may take (None: no limit)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    scenario_timeout_s: Optional[float] = None
    #: an earlier run's results: its scored cases are kept, only the rest run
    resume: Optional[Path] = None
    #: (i, n): run the i-th of n deterministic slices of the cases (1-based)
    shard: Optional[tuple[int, int]] = None
    #: per model endpoint, across every xdist worker
    limits: Limits = field(default_factory=Limits)
    #: scenarios evaluated at once in threads of one process (without xdist)
    concurrency: int = 1
    #: stop the run after this many cases in a row fail with the same error from one endpoint (0: never)
    stop_after_errors: int = DEFAULT_STOP_AFTER_ERRORS
    #: environment variables whose values are secrets, beyond those named like one
    secret_env: tuple[str, ...] = ()
    local: LocalServerSettings = field(default_factory=LocalServerSettings)
    local_url: str | None = None
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key_env: str = "OPENAI_API_KEY"
    models: Mapping[str, ModelEntry] = field(default_factory=dict)
    assistants: AssistantCatalogue = field(default_factory=AssistantCatalogue)
    model_sources: Mapping[str, str] = field(default_factory=dict)
    rootdir: Path = Path(".")

    def model_specs(self) -> dict[str, str]:
        """The model (a spec or a [models] name) of each role that runs on a chat model of ours."""
        specs = {"user_agent": self.user_model, "judge": self.judge_model}
        entry = self.assistants.entries.get(self.assistant)
        if entry is None:
            specs["assistant"] = self.assistant_model
        elif isinstance(entry, ReferenceEntry):
            specs["assistant"] = entry.model
        return specs


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def resolve_settings(options: Mapping[str, Any], rootdir: Path, env: Mapping[str, str]) -> RunSettings:
    """Build :class:`RunSettings` from parsed options (``None`` = not given), the config and the environment."""
    config, sources = load_project_config(rootdir)
    catalogue = AssistantCatalogue(entries=config.assistants, sources=sources.assistants)

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

    assistant = _first(options.get("assistant"), config.assistant, BUILTIN)
    catalogue.entry(assistant)  # an unknown name fails here, listing the known ones
    specs = {}
    for role in ("user_model", "judge_model", "assistant_model"):
        spec = _first(options.get(role), getattr(config, role), "local")
        try:
            specs[role] = check_spec(spec, config.models)
        except UsageError as exc:
            raise UsageError(f"--{role.replace('_', '-')}: {exc}") from None
    for name, entry in config.assistants.items():
        if isinstance(entry, ReferenceEntry):
            try:
                check_spec(entry.model, config.models)
            except UsageError as exc:
                raise UsageError(f"assistant {name!r} ({catalogue.where(name)}): model: {exc}") from None
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

    cassettes = options.get("cassette_dir")
    cassette_dir = Path(cassettes).expanduser() if cassettes is not None else rootdir / (config.cassette_dir or DEFAULT_CASSETTE_DIR)
    record_mode = check_record_mode(_first(options.get("record_mode"), config.record_mode, "none"))
    repeat = options.get("repeat") or 1
    if repeat < 1:
        raise UsageError(f"--repeat: must be at least 1 (got {repeat})")
    margin = options.get("baseline_margin") or 0.0
    if margin < 0:
        raise UsageError(f"--baseline-margin: must be 0 or more (got {margin})")
    baseline = options.get("baseline")
    if baseline is not None and not Path(baseline).expanduser().is_file():
        raise UsageError(f"--baseline: {baseline}: no such file (a report.json or results.jsonl of an earlier run)")

    retries = _first(options.get("retries"), config.retries, 3)
    if not 0 <= retries <= MAX_RETRIES:
        raise UsageError(f"--retries: must be from 0 to {MAX_RETRIES} (got {retries})")
    timeout = _first(options.get("scenario_timeout"), config.scenario_timeout_s)
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--scenario-timeout: must be more than 0 seconds (got {timeout})")
    retry = RetryPolicy(attempts=retries + 1, initial_s=config.retry_initial_s, max_s=config.retry_max_s)

    shard = parse_shard(options["shard"]) if options.get("shard") else None
    concurrency = _first(options.get("concurrency"), config.concurrency, 1)
    if concurrency < 1:
        raise UsageError(f"--concurrency: must be at least 1 (got {concurrency})")
    stop_after = _first(options.get("stop_after_errors"), config.stop_after_errors, DEFAULT_STOP_AFTER_ERRORS)
    if stop_after < 0:
        raise UsageError(f"--stop-after-errors: must be 0 (never) or more (got {stop_after})")
    max_rps = _first(options.get("max_rps"), config.max_rps)
    max_concurrency = _first(options.get("max_concurrency"), config.max_concurrency)
    if max_rps is not None and max_rps <= 0:
        raise UsageError(f"--max-rps: must be more than 0 (got {max_rps})")
    if max_concurrency is not None and max_concurrency < 1:
        raise UsageError(f"--max-concurrency: must be at least 1 (got {max_concurrency})")
    resume = options.get("resume")
    if resume is not None and not Path(resume).expanduser().is_file():
        raise UsageError(f"--resume: {resume}: no such file (the results.jsonl or report.json of the run to finish)")

    def path_option(name: str) -> Path | None:
        value = options.get(name)
        return None if value is None else Path(value).expanduser()

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
        cassette_dir=cassette_dir, record_mode=record_mode, rejudge=bool(options.get("rejudge")),
        repeat=repeat, turn_level=bool(options.get("turn_level")), leak_check=bool(options.get("leak_check")),
        json_report=path_option("json_report"), junit_report=path_option("junit_report"),
        html_report=path_option("html_report"), baseline=path_option("baseline"), baseline_margin=margin,
        retry=retry, scenario_timeout_s=timeout, resume=path_option("resume"), shard=shard,
        limits=Limits(max_rps=max_rps, max_concurrency=max_concurrency), concurrency=concurrency,
        stop_after_errors=stop_after, secret_env=tuple(config.secret_env),
        local_url=_first(options.get("local_url"), env.get("PERSONALENS_LOCAL_URL") or None),
        openai_base_url=_first(env.get("OPENAI_BASE_URL") or None, config.openai_base_url, "https://api.openai.com/v1"),
        openai_api_key_env=config.openai_api_key_env, models=config.models, assistants=catalogue,
        model_sources=sources.models, rootdir=rootdir,
    )


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (1 <= I <= N): the I-th of N slices."""
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard: expected I/N, e.g. 2/4 (got {text!r})") from None
    if not 1 <= i <= n:
        raise UsageError(f"--shard: I must be from 1 to N (got {text!r})")
    return i, n


def check_selection(settings: RunSettings) -> None:
    """Fail early, with one line, on a data folder or profile selection that cannot work (reads no files)."""
    try:
        dataset = open_dataset(settings.data_path)
    except DataError as exc:
        raise UsageError(f"--personalens-data: {exc}") from None
    profile_numbers(dataset, settings.selection)
