"""Run settings, resolved once, in one precedence order for every setting of the table:

    command-line option  >  environment variable (where one exists)  >  project config  >  default

A value is checked against the table wherever it came from, and a wrong one is one line naming
where it came from (the option, or the config file and key). Paths given on the command line are
relative to where pytest runs; paths in the config, to the project folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..assistants.base import ContextSwitches
from ..assistants.kinds.reference import ReferenceEntry
from ..assistants.registry import BUILTIN, AssistantCatalogue
from ..data.loader import open_dataset
from ..data.selection import Selection, parse_domains, parse_profiles, parse_sample, parse_task_kind, profile_numbers
from ..discovery import broken
from ..errors import DataError, UsageError
from ..gating.thresholds import default_thresholds_path
from ..llm.local_settings import LocalServerSettings
from ..llm.limits import Limits
from ..llm.registry import check_spec
from ..llm.retry import RetryPolicy
from ..replay.modes import check_record_mode
from ..report.outputs import FORMATS
from .model import RunSettings
from .presets import preset_values
from .project import ProjectConfig, load_project_config
from .table import MODEL_SETTING, SETTING, SETTINGS


class _Values:
    """Each setting's value and where it came from, by the one precedence order (a preset's values sit
    just above the level that names it: see :mod:`.presets`)."""

    def __init__(self, options: Mapping[str, Any], config: ProjectConfig, env: Mapping[str, str], root: Path) -> None:
        self.options, self.config, self.env, self.root = options, config, env, root
        named_by_option = options.get("preset") is not None
        self.preset_name: str | None = options.get("preset") if named_by_option else config.preset
        self.preset_level = "option" if named_by_option else "config"
        self.preset = preset_values(self.preset_name, config.presets) if self.preset_name else {}

    def source(self, name: str) -> tuple[Any, str]:
        """(value, ``option`` | ``preset`` | ``env`` | ``config`` | ``default``); a value out of range is a UsageError."""
        s = SETTING[name]
        if s.option and self.options.get(name) is not None:
            return s.check(self.options[name], s.option), "option"
        preset = self.preset.get(s.config_key) if s.config_key else None
        if preset is not None and self.preset_level == "option":
            return s.normalised(preset), "preset"
        if s.env and self.env.get(s.env):
            return self.env[s.env], "env"
        value = getattr(self.config, s.config_key) if s.config_key else None
        if value is not None:  # validated against the table when the config was read
            return s.normalised(value), "config"
        if preset is not None:
            return s.normalised(preset), "preset"
        return s.default, "default"

    def __getitem__(self, name: str) -> Any:
        return self.source(name)[0]

    def path(self, name: str) -> Path | None:
        """A path setting: an option's relative to the working folder, the config's to the project folder."""
        value, where = self.source(name)
        if value is None:
            return None
        return Path(value).expanduser() if where == "option" else self.root / Path(value).expanduser()


def resolve_settings(options: Mapping[str, Any], rootdir: Path, env: Mapping[str, str]) -> RunSettings:
    """Build :class:`RunSettings` from parsed options (``None`` = not given), the config and the environment."""
    problems = broken()  # a kind or backend another package declares, broken: the first, as one line
    if problems:
        raise UsageError(problems[0])
    config, sources = load_project_config(rootdir)
    values = _Values(options, config, env, rootdir)
    catalogue = AssistantCatalogue(entries=config.assistants, sources=sources.assistants)
    assistant = values["assistant"] or BUILTIN
    catalogue.entry(assistant)  # an unknown name fails here, listing the known ones
    specs = _model_specs(values, config, catalogue)
    retries = values["retries"]
    batch = _judge_batch(values)
    return RunSettings(
        resolved={setting.name: values[setting.name] for setting in SETTINGS},
        selection=_selection(values), data_path=values.path("personalens_data"), max_turns=values["max_turns"],
        assistant=assistant, assistant_model=specs["assistant_model"],
        assistant_context=ContextSwitches.parse(values["assistant_context"] or "none"),
        assistant_prompt=_choice(values, "assistant_prompt"),
        preset=values.preset_name,
        user_model=specs["user_model"], judge_model=specs["judge_model"], review_user_model=specs["review_user_model"],
        thresholds_path=_thresholds(values), results_dir=values.path("results_dir"),  # type: ignore[arg-type]
        expectations=values.path("expectations"),  # a run checks it exists; `expectations update` may create it
        cassette_dir=values.path("cassette_dir"),
        record_mode="none" if batch == "collect" else check_record_mode(values["record_mode"]),  # type: ignore[arg-type]
        rejudge=bool(values["rejudge"]) or batch == "collect", judge_batch=batch, batch_wait=bool(values["batch_wait"]),
        batch_resend=bool(values["batch_resend"]),
        batch_poll_s=values["batch_poll_s"], repeat=values["repeat"], turn_level=bool(values["turn_level"]),
        otel_endpoint=_otel_endpoint(values), otel_content=bool(values["otel_content"]),
        turn_level_method=_choice(values, "turn_level_method"),
        completion_counting=_choice(values, "completion_counting"), reply_cut=_choice(values, "reply_cut"),
        leak_check=bool(values["leak_check"]), review_user=bool(values["review_user"]),
        rerun_user_faults=bool(values["rerun_user_faults"]), report_paths={f.setting: values.path(f.setting) for f in FORMATS},
        baseline=_existing(values, "baseline", "a report.json or results.jsonl of an earlier run"),
        baseline_margin=values["baseline_margin"], judge_retest=values["judge_retest"],
        judge_calibration=_existing(values, "judge_calibration", "a report of `personalens calibrate`"),
        require_calibrated_judge=bool(values["require_calibrated_judge"]),
        retry=RetryPolicy(attempts=retries + 1, initial_s=values["retry_initial_s"], max_s=values["retry_max_s"]),
        scenario_timeout_s=values["scenario_timeout"] or None,  # 0: no limit
        resume=_existing(values, "resume", "the results.jsonl or report.json of the run to finish"),
        resume_mismatch=_choice(values, "resume_mismatch"),  # type: ignore[arg-type]
        shard=parse_shard(values["shard"]) if values["shard"] else None,
        limits=Limits(max_rps=values["max_rps"], max_concurrency=values["max_concurrency"]),
        concurrency=values["concurrency"], stop_after_errors=values["stop_after_errors"], max_cost=values["max_cost"],
        stop_when_decided=bool(values["stop_when_decided"]), order_seed=values["order_seed"],
        prices=dict(config.prices),
        secret_env=tuple(values["secret_env"]), local=_local(config, rootdir), local_url=values["local_url"],
        openai_base_url=values["openai_base_url"], openai_api_key_env=values["openai_api_key_env"],
        models=config.models, assistants=catalogue, model_sources=sources.models, rootdir=rootdir,
        bot_root=values.path("bot_root"), isolate_bot=bool(values["isolate_bot"]),
        bot_sandbox=values.path("bot_sandbox"),
    )


def _otel_endpoint(values: _Values) -> str | None:
    """``--otel-endpoint``: an http(s) URL, its trailing ``/`` dropped; --otel-content only with it; said in one line,
    naming where the value came from."""
    from urllib.parse import urlsplit

    url, where = values.source("otel_endpoint")
    place = {"option": "--otel-endpoint", "env": "PERSONALENS_OTEL_ENDPOINT"}.get(where, "otel_endpoint in the config")
    if url:
        try:
            parts = urlsplit(str(url).strip())
            usable = parts.scheme.lower() in ("http", "https") and bool(parts.hostname) and " " not in str(url).strip()
            parts.port  # noqa: B018 - a port out of range raises
        except ValueError:
            usable = False
        if not usable:
            raise UsageError(f"{place}: {str(url)[:80]!r} is not an OTLP/HTTP endpoint: http://HOST:PORT expected "
                             "(e.g. http://localhost:4318)")
    if values["otel_content"] and not url:
        raise UsageError("--otel-content: only with --otel-endpoint (it says what the traces hold)")
    return str(url).strip().rstrip("/") or None if url else None


def _judge_batch(values: _Values) -> str:
    """``--judge-batch``: off, submit or collect, with what each cannot go with said in one line."""
    batch = _choice(values, "judge_batch") or "off"
    if batch != "off" and values["judge_retest"]:
        raise UsageError(f"--judge-batch {batch}: --judge-retest cannot go with it - a second judgement needs a second "
                         "answer to the same request, and a batch job answers each once")
    mode, where = values.source("record_mode")
    if batch == "collect" and where == "option" and mode != "none":  # a config's record mode is for other runs
        raise UsageError(f"--judge-batch collect judges from the jobs' answers only: --record-mode {mode} would call "
                         "the judge live; leave it out")
    for name in ("batch_wait", "batch_poll_s", "batch_resend"):
        if batch != "collect" and values.source(name)[1] == "option" and values[name]:
            raise UsageError(f"{SETTING[name].option}: only with --judge-batch collect")
    return batch


def _selection(values: _Values) -> Selection:
    profiles, domains = values["profiles"], values["domains"]
    return Selection(
        sample=parse_sample(str(values["sample"] or "50")),
        profiles=parse_profiles(profiles) if profiles is not None else None,
        domains=parse_domains(domains) if domains is not None else None,
        task_kind=parse_task_kind(values["task_kind"] or "both"),
    )


def _model_specs(values: _Values, config: ProjectConfig, catalogue: AssistantCatalogue) -> dict[str, str]:
    specs = {}
    for role in MODEL_SETTING.values():
        if role == "review_user_model" and not values[role]:  # unset: the judge's, checked already
            specs[role] = specs["judge_model"]
            continue
        try:
            specs[role] = check_spec(values[role] or "local", config.models)
        except UsageError as exc:
            raise UsageError(f"{SETTING[role].option}: {exc}") from None
    for name, entry in config.assistants.items():
        if isinstance(entry, ReferenceEntry):
            try:
                check_spec(entry.model, config.models)
            except UsageError as exc:
                raise UsageError(f"assistant {name!r} ({catalogue.where(name)}): model: {exc}") from None
    return specs


def _choice(values: _Values, name: str) -> str | None:
    """A setting's value, one of the choices its row of the settings table lists."""
    value, where = values.source(name)
    choices = SETTING[name].choices or ()
    if value is not None and value not in choices:
        named = SETTING[name].option if where == "option" else f"{where} {SETTING[name].config_key}"
        raise UsageError(f"{named}: {value!r} is not one of {', '.join(choices)}")
    return value


def _thresholds(values: _Values) -> Path:
    """The option's file, the config's, the project's thresholds.yaml, or the shipped defaults."""
    given = values.path("thresholds")
    if given is not None:
        return given
    project = values.root / "thresholds.yaml"
    return project if project.is_file() else default_thresholds_path()


def _existing(values: _Values, name: str, what: str) -> Path | None:
    path = values.path(name)
    if path is not None and not path.is_file():
        value, where = values.source(name)
        named = SETTING[name].option if where == "option" else f"{where} {SETTING[name].config_key or name}"
        raise UsageError(f"{named}: {value}: no such file ({what})")
    return path


def _local(config: ProjectConfig, rootdir: Path) -> LocalServerSettings:
    local = config.local
    return LocalServerSettings(
        model_path=rootdir / Path(local.model_path).expanduser() if local.model_path else None, n_ctx=local.n_ctx,
        n_threads=local.n_threads or LocalServerSettings().n_threads, startup_timeout_s=local.startup_timeout_s,
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
