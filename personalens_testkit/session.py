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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .agents.judge import Judge
from .ahead import EvaluateAhead
from .agents.user_agent import UserAgent
from .assistants.base import Assistant
from .assistants.entries import ReferenceEntry
from .assistants.registry import BuildContext, build_assistant
from .config import RunSettings
from .data.loader import Dataset, open_dataset
from .data.models import Scenario, TaskKind, case_id
from .data.selection import select_scenarios
from .errors import ModelServerError, PersonalensError, StorageError, UsageError
from .evaluation import Evaluation, Evaluator
from .files import write_atomically
from .gating.thresholds import Thresholds, load_thresholds
from .llm.base import ChatModel
from .llm.embedded import LocalServerSettings, ServerHandle, ServerPool, server_key, server_url, wait_until_healthy
from .llm.bedrock import check_aws
from .llm.entries import BedrockModel, LocalModel
from .llm.limits import LimitedChat, SharedLimiter, endpoint_of
from .llm.retry import ping
from .llm.registry import ModelContext, create_entry_model, create_model, describe, local_settings_for, resolve
from .replay.plan import ReplayPlan
from .replay.router import recorded_answer
from .assistants.recorded import RecordedBot
from .report.compare import compare_rows, load_rows
from .report.outputs import write_report_files
from .report.results import ResultsWriter, RunInfo, format_transcript, read_rows
from .secrets import redact
from .report.summary import build_report
from .runstop import StopSignal

#: Assistant kinds that are bots: code that may change behind an unchanged request, so always called live.
BOT_KINDS = frozenset({"http", "python", "command", "openai"})
#: Where an embedded model that is only replayed "runs": never contacted (the cassette answers), and the
#: same address as a live one once normalised (loopback host and port -> ``local``, the path kept).
REPLAY_ONLY_URL = server_url(9)


@dataclass(frozen=True)
class RunOutcome:
    """The end of a run: its report, the report files written, the rows added to the recorded results,
    and the files that could not be written (one line each)."""

    report: dict[str, Any]
    written: dict[str, Path]
    recorded_rows: int
    failures: list[str]


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
        #: raised by the controller to stop the run early (a full disk, a dead endpoint); checked by every process
        self.stop_signal = StopSignal(self.run_dir)
        self._ahead: EvaluateAhead | None = None

    # -- data ---------------------------------------------------------------------------
    @cached_property
    def dataset(self) -> Dataset:
        return open_dataset(self.settings.data_path)

    @cached_property
    def _selected(self) -> list[Scenario]:
        return select_scenarios(self.dataset, self.settings.selection)

    @cached_property
    def _all_cases(self) -> list[tuple[Scenario, int]]:
        """(scenario, try) of every selected scenario and ``--repeat`` try, in this ``--shard``, not yet
        scored in the ``--resume`` results."""
        cases = [(s, r) for s in self._selected for r in range(1, self.settings.repeat + 1)]
        if self.settings.shard is not None:
            i, n = self.settings.shard
            cases = [case for k, case in enumerate(cases) if k % n == i - 1]
        if self.resumed_rows:
            done = {case_id(row["scenario_id"], row.get("repeat")) for row in self.resumed_rows}
            cases = [(s, r) for s, r in cases if case_id(s.scenario_id, r) not in done]
        return cases

    @cached_property
    def resumed_rows(self) -> list[dict[str, Any]]:
        """The scored rows of the ``--resume`` results (errors are run again)."""
        if self.settings.resume is None:
            return []
        rows = load_rows(self.settings.resume, what="--resume")
        return [row for row in rows if row.get("status") in ("passed", "failed")]

    def header_lines(self) -> list[str]:
        """What this run will do with cassettes, shards and resumed results (for the run header)."""
        lines = [self.plan.summary()]
        if self.settings.shard is not None:
            lines.append(f"shard {self.settings.shard[0]}/{self.settings.shard[1]}: {len(self._all_cases)} cases of this "
                         "slice (join the shards' results with `personalens merge`)")
        if self.settings.resume is not None:
            lines.append(f"resuming {self.settings.resume}: {len(self.resumed_rows)} scored cases kept, "
                         f"{len(self._all_cases)} to run")
        if not self.thresholds.aggregate.gates:
            lines.append(f"NO AGGREGATE GATE is set in {self.shown(self.settings.thresholds_path)}: the run is judged "
                         "by the per-scenario floors alone")
        return lines

    def carry_resumed_rows(self) -> int:
        """Controller, before any case: the resumed rows open this run's results, so it holds the whole run."""
        if self.writer is not None:
            for row in self.resumed_rows:
                self.writer.write(row)
        return len(self.resumed_rows)

    def cases(self, kind: TaskKind) -> list[tuple[Scenario, int]]:
        return [(s, r) for s, r in self.plan.runnable if s.kind is kind]

    # -- cassettes ----------------------------------------------------------------------
    @cached_property
    def assistant_is_bot(self) -> bool:
        entry = self.settings.assistants.entries.get(self.settings.assistant)
        return entry is not None and entry.kind in BOT_KINDS

    @cached_property
    def plan(self) -> ReplayPlan:
        """What this run replays, records and checks."""
        s = self.settings
        return ReplayPlan(
            cassette_dir=s.cassette_dir, assistant=s.assistant, record_mode=s.record_mode, rejudge=s.rejudge,
            judge=s.judge_model, repeat=s.repeat, assistant_is_bot=self.assistant_is_bot, all_cases=self._all_cases,
            shown=self.shown,
        )

    @property
    def live_roles(self) -> frozenset[str]:
        return self.plan.live_roles

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
            if role in self.live_roles:
                self._server_pool().launch(local, role)
        self._handles = self._server_pool().handles()
        return self._handles

    def _server_pool(self) -> ServerPool:
        if self._pool is None:
            self._pool = ServerPool(self.run_dir)
        return self._pool

    def local_url_for(self, local: LocalServerSettings, role: str) -> str:
        """A healthy embedded server's URL for these settings and role, launching it here if this process may."""
        if role not in self.live_roles:
            return REPLAY_ONLY_URL
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
            replay_only_roles=frozenset({"user_agent", "assistant", "judge"}) - self.live_roles,
            recorded_answer=recorded_answer,
        )

    def _model(self, spec: str, role: str) -> ChatModel:
        model = self._limited(create_model(spec, self._model_context(), role))
        self._closing.append(model)
        return model

    def _limited(self, model: ChatModel) -> ChatModel:
        """The model behind the run's --max-rps / --max-concurrency, shared by every xdist worker."""
        if not self.settings.limits:
            return model
        return LimitedChat(model, SharedLimiter(self.run_dir / ".limits", endpoint_of(model), self.settings.limits))

    def _assistant(self) -> Assistant:
        """The assistant under test; it owns (and closes) the model it runs on, if any."""
        s = self.settings
        context = BuildContext(
            root=s.rootdir, model=lambda spec, role: self._limited(create_model(spec, self._model_context(), role)),
            entry_model=lambda entry, label: self._limited(
                create_entry_model(entry, label, self._model_context(), "assistant")),
        )
        assistant = build_assistant(s.assistant, s.assistants, context, reference_model=s.assistant_model,
                                    reference_context=s.assistant_context)
        if self.assistant_is_bot:
            assistant = RecordedBot(assistant, replay=s.rejudge)
        self._closing.append(assistant)
        return assistant

    def preflight(self, *, reach: bool = True) -> None:
        """Before any case: every role's model is usable as configured, and so is the assistant.

        Raises :class:`UsageError` with one line naming the role, the option or config entry, and
        the cause. Without ``reach`` (``--collect-only``) nothing is contacted; with it, the bot is
        contacted (or started) once and every live remote model gets one minimal real call - a dead
        endpoint, a wrong key or an unknown model fails the run here, not once per case.
        """
        s = self.settings
        for role, spec in s.model_specs().items():
            model = resolve(spec, s.models)
            if isinstance(model, BedrockModel) and role in self.live_roles:
                try:
                    check_aws(model.region)
                except PersonalensError as exc:
                    raise UsageError(f"{self._role_label(role, spec)}: {exc}") from None
        self._check_assistant(reach)
        if reach:
            self._ping_models()

    def _ping_models(self) -> None:
        """One minimal real call to each live remote model of the run (once per distinct model)."""
        s = self.settings
        pinged: set[str] = set()
        for role, spec in s.model_specs().items():
            if role not in self.live_roles or isinstance(resolve(spec, s.models), LocalModel):
                continue
            model = create_model(spec, self._model_context(), role)
            try:
                where = f"{describe(spec, s.models)} at {endpoint_of(model)}"
                if where not in pinged:
                    pinged.add(where)
                    ping(model, role, s.retry)  # type: ignore[arg-type]
            except PersonalensError as exc:
                raise UsageError(f"{role.replace('_', ' ')} model, {self._role_label(role, spec)}: {exc}") from None
            finally:
                model.close()

    def _check_assistant(self, reach: bool) -> None:
        s = self.settings
        entry = s.assistants.entries.get(s.assistant)
        if entry is None or isinstance(entry, ReferenceEntry) or s.rejudge:
            return  # the reference assistant's model was checked above; a re-judging replays the assistant
        if not self.assistant_is_bot and "assistant" not in self.live_roles:
            return  # a model-backed assistant that only replays needs no credentials
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
            judge=Judge(self._model(s.judge_model, "judge"), parallel=self._judge_parallel()),
            max_turns=s.max_turns, turn_level=s.turn_level, leak_check=s.leak_check,
            retry=s.retry, time_limit_s=s.scenario_timeout_s,
        )

    def _judge_parallel(self) -> int:
        """A live remote judge takes a dialogue's six calls at once; an embedded one (one request at a
        time, the six sharing a cached prefix) and a replayed one take them in turn."""
        s = self.settings
        embedded = local_settings_for(s.judge_model, s.local, s.models) is not None
        return 6 if "judge" in self.live_roles and not embedded else 1

    def evaluate_ahead(self, cases: list[tuple[str, Scenario, int]]) -> None:
        """Evaluate these cases (node id, scenario, try) ahead of pytest, ``concurrency`` at a time."""
        try:
            self.evaluator  # noqa: B018 - built once, before any thread needs it
        except PersonalensError:
            return  # every case reports it
        self._ahead = EvaluateAhead(
            [(nodeid, scenario, repeat, self.rerecord_command(nodeid)) for nodeid, scenario, repeat in cases],
            self.evaluate, self.settings.concurrency,
        )

    def evaluate_case(self, nodeid: str, scenario: Scenario, repeat: int = 1) -> Evaluation:
        """A pytest case's evaluation: from the ones under way ahead, or made now."""
        if self._ahead is not None and nodeid in self._ahead:
            return self._ahead.result(nodeid)
        return self.evaluate(scenario, self.rerecord_command(nodeid), repeat)

    def evaluate(self, scenario: Scenario, rerecord: str = "", repeat: int = 1) -> Evaluation:
        """Evaluate one scenario and keep its transcript; never raises (a failure is the case's error)."""
        evaluation = self._evaluate(scenario, rerecord, repeat)
        try:
            write_atomically(self.transcript_path(scenario, repeat), redact(format_transcript(evaluation)))
        except StorageError as exc:
            if evaluation.error is None:
                evaluation.fail(exc, "writing the transcript")
        return evaluation

    def _evaluate(self, scenario: Scenario, rerecord: str, repeat: int) -> Evaluation:
        """Evaluate one scenario; with embedded models, one scenario at a time across all xdist workers.

        A llama.cpp server of llama-cpp-python serves one request at a time and keeps one
        prompt in its cache: two interleaved dialogues make every call re-read its whole
        prompt (measured: 4.3 s instead of 1.4 s a call), and the CPU is already saturated by
        one dialogue. So scenarios take turns on the shared servers (a file lock in the run
        folder); runs on remote models are not serialised.
        """
        try:
            evaluator = self.evaluator
            cassette = self.plan.cassettes.for_scenario(case_id(scenario.scenario_id, repeat), rerecord or self._rerecord_hint(scenario))
        except Exception as exc:  # e.g. an embedded server that did not start: an error of every case
            return Evaluation.failed(scenario, exc, phase="starting the models", max_turns=self.settings.max_turns,
                                     repeat=repeat)
        if not self.uses_embedded_models:
            return evaluator.evaluate(scenario, cassette, repeat=repeat)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / ".embedded.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return evaluator.evaluate(scenario, cassette, repeat=repeat)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _rerecord_hint(self, scenario: Scenario) -> str:
        return self.rerecord_command(f"suites/ -k {scenario.scenario_id}")

    def rerecord_command(self, target: str) -> str:
        """The command that re-records one case (``target``: its node id, quoted here)."""
        target = target if target.startswith("suites/ ") else f"'{target}'"
        line = f"pytest {target} --assistant {self.settings.assistant} --record-mode all"
        return line + (" --rejudge" if self.settings.rejudge else "")

    # -- the end of the run ---------------------------------------------------------------
    def settings_snapshot(self) -> dict[str, Any]:
        s = self.settings
        sel = s.selection
        return {
            "data": str(s.data_path) if s.data_path else "bundled 50-profile sample",
            "sample": sel.sample, "profiles": list(sel.profiles) if sel.profiles else None,
            "domains": list(sel.domains) if sel.domains else None, "task_kind": sel.task_kind,
            "max_turns": s.max_turns, "record_mode": s.record_mode, "rejudge": s.rejudge, "repeat": s.repeat,
            "turn_level": s.turn_level, "leak_check": s.leak_check, "thresholds": str(s.thresholds_path),
            "cassette_dir": self.shown(s.cassette_dir), "baseline": str(s.baseline) if s.baseline else None,
            "baseline_margin": s.baseline_margin,
        }

    def replay_differences(self, evaluation: Evaluation) -> list[str] | None:
        """In a whole-run replay of a recorded case: what differs from its recording (``[]``: reproduced); else None."""
        if evaluation.verdict is None:
            return None
        dialogue = evaluation.dialogue
        now = {
            "scores": evaluation.verdict.scores.model_dump(mode="json"), "turns": dialogue.turns,
            "termination": dialogue.termination.value if dialogue.termination else None,
        }
        return self.plan.differences(case_id(evaluation.scenario.scenario_id, evaluation.repeat), now)

    def finish(self) -> RunOutcome | None:
        """Controller, at the end: recorded results kept, the run report over every worker's rows, its files."""
        if self.writer is None or not self.writer.path.is_file():
            return None
        self.writer.close()
        rows = read_rows(self.writer.path)
        failures: list[str] = []
        try:
            recorded = self.plan.keep_recorded(rows)
        except StorageError as exc:
            recorded = 0
            failures.append(f"recorded results: {exc}")
        comparison = None
        if self.settings.baseline is not None:
            comparison = compare_rows(load_rows(self.settings.baseline, what="--baseline"), rows,
                                      margin=self.settings.baseline_margin, confidence=self.thresholds.aggregate.confidence)
        report = build_report(rows, self.thresholds, run=self.run_info().model_dump(), settings=self.settings_snapshot(),
                              gates_enforced=not self.plan.checks_reproduction, comparison=comparison)
        s = self.settings
        written = write_report_files(
            report, json_path=s.json_report or self.run_dir / "report.json",
            junit_path=s.junit_report or self.run_dir / "junit.xml", html_path=s.html_report or self.run_dir / "report.html",
            failures=failures,
        )
        return RunOutcome(report, written, recorded, failures)

    @cached_property
    def uses_embedded_models(self) -> bool:
        """Whether a live call may reach an embedded server (then scenarios take turns on them)."""
        s = self.settings
        return any(local_settings_for(spec, s.local, s.models)
                   for role, spec in s.model_specs().items() if role in self.live_roles)

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
            record_mode=s.record_mode + (" (re-judging)" if s.rejudge else ""),
        )

    def cassette_of(self, scenario: Scenario, repeat: int = 1) -> str:
        return self.shown(self.plan.cassettes.path(case_id(scenario.scenario_id, repeat)))

    def shown(self, path: Path) -> str:
        """A path as rows show it: relative to the project root when inside it."""
        with contextlib.suppress(ValueError):
            return str(path.relative_to(self.settings.rootdir))
        return str(path)

    def transcript_path(self, scenario: Scenario, repeat: int = 1) -> Path:
        return self.run_dir / "transcripts" / f"{case_id(scenario.scenario_id, repeat)}.txt"

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
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
        if all(p.name.startswith(("embedded-server-", ".embedded.lock", ".stop")) for p in self.run_dir.iterdir()):
            shutil.rmtree(self.run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.run_dir.parent.rmdir()  # only if no other run is in it
