"""The settings of one run, resolved (see :mod:`.resolve`): what every part of the run reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from ..assistants.base import ContextSwitches
from ..assistants.kinds.reference import ReferenceEntry
from ..assistants.registry import AssistantCatalogue
from ..data.selection import Selection
from ..gating.thresholds import default_thresholds_path
from ..llm.local_settings import LocalServerSettings
from ..llm.entries import OPENAI_DEFAULT_URL, ModelEntry
from ..llm.limits import Limits
from ..llm.registry import ModelContext, RoleModel, resolve_role
from ..llm.retry import RetryPolicy
from .table import DEFAULT_SCENARIO_TIMEOUT_S, DEFAULT_STOP_AFTER_ERRORS, SETTING


@dataclass(frozen=True)
class RunSettings:
    selection: Selection = field(default_factory=Selection)
    data_path: Path | None = None
    max_turns: int | None = None
    assistant: str = "reference"
    assistant_model: str = "local"
    assistant_context: ContextSwitches = field(default_factory=ContextSwitches)
    #: the built-in reference assistant's prompt variant (None: by its model's family)
    assistant_prompt: Optional[str] = None
    #: the preset the run's settings came from, if any
    preset: Optional[str] = None
    user_model: str = "local"
    judge_model: str = "local"
    thresholds_path: Path = field(default_factory=default_thresholds_path)
    results_dir: Path = Path(SETTING["results_dir"].default)
    cassette_dir: Path = Path(SETTING["cassette_dir"].default)
    #: each scenario's expected outcome (None: <cassette dir>/<assistant>/expectations.yaml when it exists)
    expectations: Optional[Path] = None
    #: vcrpy's record mode: none (offline replay, the default), once, new_episodes, all
    record_mode: str = "none"
    #: replay the dialogues, judge them again
    rejudge: bool = False
    #: --judge-batch: off, submit (the judge's calls sent as batch jobs at the end of the run) or collect (their
    #: answers read into the judge's cassettes, then judged from them); with --batch-wait, how often to look
    judge_batch: str = "off"
    batch_wait: bool = False
    batch_poll_s: float = 60.0
    #: --batch-resend: the calls of a collect's failed cases sent again as new jobs
    batch_resend: bool = False
    #: --otel-endpoint: the OTLP/HTTP collector each case's trace goes to (None: no traces); --otel-content: with the
    #: dialogue's messages and the judge's explanations
    otel_endpoint: Optional[str] = None
    otel_content: bool = False
    #: tries per scenario (each with its own cassette)
    repeat: int = 1
    turn_level: bool = False
    #: chain (one call scoring every prefix, as the paper) or per-turn (one call per assistant reply)
    turn_level_method: str = "chain"
    #: how an unreadable completion verdict counts in the task-completion rate (gating/aggregate.py)
    completion_counting: str = "ours"
    #: how the user agent and the reference assistant keep a reply their model ran past (prompts/render.REPLY_CUTS)
    reply_cut: str = "speaker"
    leak_check: bool = False
    review_user: bool = False
    #: a dialogue the user agent's faults spoiled is run again once (``--rerun-user-faults``)
    rerun_user_faults: bool = False
    #: the review's model (``--review-user-model``; unset: the judge's)
    review_user_model: str = "local"
    #: report files by their format's setting (report/outputs.FORMATS: json_report, ...; None or absent: the file of
    #: its format in the run folder)
    report_paths: Mapping[str, Optional[Path]] = field(default_factory=dict)
    #: a previous run's report or results to compare with, and the drop it tolerates
    baseline: Optional[Path] = None
    #: None: per metric, the judge's drift measured by --judge-retest (calibration/retest.py)
    baseline_margin: Optional[float] = None
    #: the share of cases judged a second time to measure the judge's noise
    judge_retest: float = 0.0
    #: a `personalens calibrate` report of the judge, and whether a gating run requires a passing one
    judge_calibration: Optional[Path] = None
    require_calibrated_judge: bool = False
    #: how failed calls are retried; the most seconds one scenario may take (None: no limit)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    scenario_timeout_s: Optional[float] = DEFAULT_SCENARIO_TIMEOUT_S
    #: an earlier run's results: its scored cases are kept, only the rest run
    resume: Optional[Path] = None
    #: what a --resume does with rows another set-up produced: refuse (a UsageError) or rerun their cases
    resume_mismatch: str = "refuse"
    #: (i, n): run the i-th of n deterministic slices of the cases (1-based)
    shard: Optional[tuple[int, int]] = None
    #: per model endpoint, across every xdist worker
    limits: Limits = field(default_factory=Limits)
    #: scenarios evaluated at once in threads of one process (without xdist)
    concurrency: int | str = 1  # a number, or "auto" (run/lanes.py picks)
    #: stop the run after this many cases in a row fail with the same error from one endpoint (0: never)
    stop_after_errors: int = DEFAULT_STOP_AFTER_ERRORS
    #: stop starting cases once the spend would pass this many US dollars (None: no limit)
    max_cost: Optional[float] = None
    #: run in a stratified random order and stop once the verdict is decided (run/early_stop.py)
    stop_when_decided: bool = False
    order_seed: int = 0
    #: the config's ``[prices."MODEL"]`` entries, over the shipped price table
    prices: dict[str, Any] = field(default_factory=dict)
    #: environment variables whose values are secrets, beyond those named like one
    secret_env: tuple[str, ...] = ()
    local: LocalServerSettings = field(default_factory=LocalServerSettings)
    local_url: str | None = None
    openai_base_url: str = OPENAI_DEFAULT_URL
    openai_api_key_env: str = "OPENAI_API_KEY"
    models: Mapping[str, ModelEntry] = field(default_factory=dict)
    assistants: AssistantCatalogue = field(default_factory=AssistantCatalogue)
    model_sources: Mapping[str, str] = field(default_factory=dict)
    rootdir: Path = Path(".")
    #: where a bot entry's relative paths resolve (None: rootdir); a python bot in a process of its own
    bot_root: Optional[Path] = None
    isolate_bot: bool = False
    #: the gate's sandbox file: a bot's processes run under its user id and environment (None: as this process)
    bot_sandbox: Optional[Path] = None
    #: every setting of the table by name, its value as resolved (what the rows' identity is made from)
    resolved: Mapping[str, Any] = field(default_factory=dict)

    def model_specs(self) -> dict[str, str]:
        """The model (a spec or a [models] name) of each role that runs on a chat model of ours (the reviewer's only
        when the run reviews the user agent)."""
        specs = {"user_agent": self.user_model, "judge": self.judge_model}
        if self.review_user:
            specs["reviewer"] = self.review_user_model
        entry = self.assistants.entries.get(self.assistant)
        if entry is None:
            specs["assistant"] = self.assistant_model
        elif isinstance(entry, ReferenceEntry):
            specs["assistant"] = entry.model
        return specs

    @cached_property
    def role_models(self) -> dict[str, RoleModel]:
        """Each role's model of :meth:`model_specs`, resolved once for the run (its entry, its spec, its label)."""
        return {role: resolve_role(role, spec, self.models) for role, spec in self.model_specs().items()}

    def endpoint_addresses(self) -> dict[str, str]:
        """Every address the run may call, by the setting that gives it: the OpenAI endpoint, the local server's, and
        each URL of a ``[models]`` or ``[assistants]`` entry (what follows their hosts is secret:
        :func:`~personalens_testkit.secrets.register_addresses`)."""
        found = {"openai_base_url": self.openai_base_url, "local_url": self.local_url or "",
                 "otel_endpoint": self.otel_endpoint or ""}
        for table, entries in (("models", self.models), ("assistants", self.assistants.entries)):
            for name, entry in entries.items():
                for key, value in entry.model_dump().items():
                    if isinstance(value, str) and value.lower().startswith(("http://", "https://")):  # not s3://
                        found[f"{table}.{name}.{key}"] = value
        return found

    def model_context(self, local_url_for: Callable[[LocalServerSettings, str], str], **more: Any) -> ModelContext:
        """What the backends need of these settings to build a role's model: the project's ``[models]`` and
        ``[local]``, the OpenAI endpoint and its key variable; ``local_url_for`` finds the embedded server; ``more``:
        the rest of :class:`ModelContext` (a run's replay-only roles, its cassettes' answers)."""
        return ModelContext(local_url_for=local_url_for, local=self.local, named=self.models,
                            openai_base_url=self.openai_base_url, openai_api_key_env=self.openai_api_key_env, **more)
