"""The state of one run in one process: settings, data, servers, models, results.

Used by the pytest plugin (which stays glue) and usable without pytest. The
controlling process launches the embedded servers and writes results; xdist workers
get the server handles and the run folder from it and only evaluate scenarios.
"""

from __future__ import annotations

import contextlib
import fcntl
import secrets
import shutil
import time
from functools import cached_property
from pathlib import Path
from typing import Any

from .agents.judge import Judge
from .agents.user_agent import UserAgent
from .assistants.base import Assistant
from .assistants.chat_bot import check_aws
from .assistants.entries import ReferenceEntry
from .assistants.registry import BuildContext, build_assistant
from .config import RunSettings
from .data.loader import Dataset, open_dataset
from .data.models import Scenario, TaskKind
from .data.selection import select_scenarios
from .errors import ModelServerError, PersonalensError, UsageError
from .evaluation import Evaluation, Evaluator
from .gating.thresholds import Thresholds, load_thresholds
from .llm.base import ChatModel
from .llm.embedded import LocalServerSettings, ServerHandle, ServerPool, server_key, wait_until_healthy
from .llm.entries import BedrockModel
from .llm.registry import ModelContext, create_entry_model, create_model, describe, local_settings_for, resolve
from .report.results import ResultsWriter, RunInfo


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class RunState:
    def __init__(
        self, settings: RunSettings, *, run_id: str, is_controller: bool,
        server_handles: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.settings = settings
        self.run_id = run_id
        self.is_controller = is_controller
        self.run_dir = settings.results_dir / run_id
        self._handles = dict(server_handles or {})
        self._healthy: set[str] = set()
        self._pool: ServerPool | None = None
        #: models and assistants to close at the end
        self._closing: list[ChatModel | Assistant] = []
        self.writer = ResultsWriter(self.run_dir / "results.jsonl") if is_controller else None

    # -- data ---------------------------------------------------------------------------
    @cached_property
    def dataset(self) -> Dataset:
        return open_dataset(self.settings.data_path)

    @cached_property
    def _selected(self) -> list[Scenario]:
        return select_scenarios(self.dataset, self.settings.selection)

    def scenarios(self, kind: TaskKind) -> list[Scenario]:
        return [s for s in self._selected if s.kind is kind]

    @cached_property
    def thresholds(self) -> Thresholds:
        return load_thresholds(self.settings.thresholds_path)

    # -- embedded servers ---------------------------------------------------------------
    def local_servers_in_use(self) -> list[tuple[str, LocalServerSettings]]:
        """(role, settings) of every embedded server this run's model specs need."""
        found = []
        for role, spec in self.settings.model_specs().items():
            local = local_settings_for(spec, self.settings.local, self.settings.models)
            if local is not None and not (self.settings.local_url and local.model_path is None):
                found.append((role, local))
        return found

    def launch_servers(self) -> dict[str, dict[str, Any]]:
        """Controller only: launch every embedded server the run's specs need (without waiting)."""
        for role, local in self.local_servers_in_use():
            self._server_pool().launch(local, role)
        self._handles = self._server_pool().handles()
        return self._handles

    def _server_pool(self) -> ServerPool:
        if self._pool is None:
            self._pool = ServerPool(self.run_dir)
        return self._pool

    def local_url_for(self, local: LocalServerSettings, role: str) -> str:
        """A healthy embedded server's URL for these settings and role, launching it here if this process may."""
        if self.settings.local_url and local.model_path is None:
            url = self.settings.local_url.rstrip("/")
            if url not in self._healthy:
                wait_until_healthy(url, 10.0)
                self._healthy.add(url)
            return url
        key = server_key(local, role)
        if key not in self._handles:
            if not self.is_controller:
                raise ModelServerError(f"no embedded server for {key} was started by the controlling process", model="local")
            self._handles[key] = self._server_pool().launch(local, role).as_dict()
        handle = ServerHandle.from_dict(self._handles[key])
        if handle.url not in self._healthy:
            wait_until_healthy(handle.url, local.startup_timeout_s, pid=handle.pid, log_path=handle.log_path)
            self._healthy.add(handle.url)
        return handle.url

    # -- models, the assistant, evaluation ------------------------------------------------
    def _model_context(self) -> ModelContext:
        return ModelContext(
            local_url_for=self.local_url_for, local=self.settings.local, named=self.settings.models,
            openai_base_url=self.settings.openai_base_url, openai_api_key_env=self.settings.openai_api_key_env,
        )

    def _model(self, spec: str, role: str) -> ChatModel:
        model = create_model(spec, self._model_context(), role)
        self._closing.append(model)
        return model

    def _assistant(self) -> Assistant:
        """The assistant under test; it owns (and closes) the model it runs on, if any."""
        s = self.settings
        context = BuildContext(
            root=s.rootdir, model=lambda spec, role: create_model(spec, self._model_context(), role),
            entry_model=lambda entry, label: create_entry_model(entry, label, self._model_context(), "assistant"),
        )
        assistant = build_assistant(s.assistant, s.assistants, context, reference_model=s.assistant_model,
                                    reference_context=s.assistant_context)
        self._closing.append(assistant)
        return assistant

    def preflight(self, *, reach: bool = True) -> None:
        """Before any case: every role's model is usable as configured, and so is the assistant.

        Raises :class:`UsageError` with one line naming the option or config entry at fault.
        With ``reach``, a bot is also contacted (or started) once; nothing calls a model.
        """
        s = self.settings
        for role, spec in s.model_specs().items():
            model = resolve(spec, s.models)
            if isinstance(model, BedrockModel):
                try:
                    check_aws(model.region)
                except PersonalensError as exc:
                    raise UsageError(f"{self._role_label(role, spec)}: {exc}") from None
        entry = s.assistants.entries.get(s.assistant)
        if entry is None or isinstance(entry, ReferenceEntry):
            return  # the reference assistant's model was checked above
        try:
            assistant = self._assistant()
            try:
                if reach:
                    assistant.check()
            finally:
                assistant.close()
                self._closing.remove(assistant)
        except PersonalensError as exc:
            raise UsageError(f"assistant {s.assistant!r} ({s.assistants.where(s.assistant)}): {exc}") from None

    def _role_label(self, role: str, spec: str) -> str:
        """Where a role's model was chosen: the option, the model entry, or the assistant entry."""
        s = self.settings
        if role == "assistant" and s.assistant in s.assistants.entries:
            return f"assistant {s.assistant!r} ({s.assistants.where(s.assistant)})"
        flag = {"user_agent": "--user-model", "judge": "--judge-model", "assistant": "--assistant-model"}[role]
        return f"{flag} {spec}" + (f" ({s.model_sources[spec]})" if spec in s.model_sources else "")

    @cached_property
    def evaluator(self) -> Evaluator:
        s = self.settings
        return Evaluator(
            dataset=self.dataset,
            user_agent=UserAgent(self._model(s.user_model, "user_agent")),
            assistant=self._assistant(),
            judge=Judge(self._model(s.judge_model, "judge")),
            max_turns=s.max_turns,
        )

    def evaluate(self, scenario: Scenario) -> Evaluation:
        """Evaluate one scenario; with embedded models, one scenario at a time across all xdist workers.

        A llama.cpp server of llama-cpp-python serves one request at a time and keeps one
        prompt in its cache: two interleaved dialogues make every call re-read its whole
        prompt (measured: 4.3 s instead of 1.4 s a call), and the CPU is already saturated by
        one dialogue. So scenarios take turns on the shared servers (a file lock in the run
        folder); runs on remote models are not serialised.
        """
        try:
            evaluator = self.evaluator
        except PersonalensError as exc:  # e.g. an embedded server that did not start: an error of every case
            return Evaluation.failed(scenario, exc, phase="starting the models", max_turns=self.settings.max_turns)
        if not self.uses_embedded_models:
            return evaluator.evaluate(scenario)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / ".embedded.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return evaluator.evaluate(scenario)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @cached_property
    def uses_embedded_models(self) -> bool:
        s = self.settings
        return any(local_settings_for(spec, s.local, s.models) for spec in s.model_specs().values())

    def run_info(self) -> RunInfo:
        s = self.settings
        entry = s.assistants.entries.get(s.assistant)
        context = s.assistant_context if entry is None else entry.switches()
        assistant_model = s.model_specs().get("assistant")
        return RunInfo(
            run_id=self.run_id, assistant=s.assistant, assistant_kind=entry.kind if entry else "reference",
            assistant_context=context.label,
            assistant_model=describe(assistant_model, s.models) if assistant_model else None,
            user_model=describe(s.user_model, s.models), judge_model=describe(s.judge_model, s.models),
        )

    def transcript_path(self, scenario: Scenario) -> Path:
        return self.run_dir / "transcripts" / f"{scenario.scenario_id}.txt"

    def close(self) -> None:
        for part in self._closing:
            part.close()
        self._closing.clear()
        if self._pool is not None:
            self._pool.stop_all()
        if self.writer is not None:
            self.writer.close()
            self._remove_if_unused()

    def _remove_if_unused(self) -> None:
        """A run that evaluated nothing (say, an unrelated ``pytest -n 4`` that launched the servers anyway)
        leaves no folder behind: only server logs would be in it."""
        if self.writer is None or self.writer.count or not self.run_dir.is_dir():
            return
        if all(p.name.startswith(("embedded-server-", ".embedded.lock")) for p in self.run_dir.iterdir()):
            shutil.rmtree(self.run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.run_dir.parent.rmdir()  # only if no other run is in it
