"""The run's model pool: embedded servers, chat clients behind the shared limits, the preflight calls.

The controlling process launches the embedded servers and hands their addresses to the xdist
workers, which never start their own. A role that only replays talks to no server: its
client gets an address that is never contacted (the cassette answers).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..callsite import ROLES, step
from ..errors import ModelServerError, PersonalensError, UsageError
from ..llm.base import ChatModel
from ..llm.embedded import ServerHandle, ServerPool, server_key, server_url, wait_until_healthy
from ..llm.local_settings import LocalServerSettings, check_installed
from ..llm.backends import backend_of
from ..llm.entries import BedrockModel, OpenAIModel
from ..llm.limits import LimitedChat, SharedLimiter, endpoint_of
from ..llm.registry import ModelContext, create_entry_model, resolve_role
from ..llm.retry import ping
from ..replay.router import exchange
from ..settings import RunSettings

if TYPE_CHECKING:
    from ..agents.calls import CallRecord

#: Where an embedded model that is only replayed "runs": never contacted (the cassette answers), and the
#: same address as a live one once normalised (loopback host and port -> ``local``, the path kept).
REPLAY_ONLY_URL = server_url(9)


class ModelPool:
    def __init__(self, settings: RunSettings, run_dir: Path, *, live_roles: frozenset[str], is_controller: bool,
                 server_handles: dict[str, dict[str, Any]] | None = None) -> None:
        self.settings = settings
        self.run_dir = run_dir
        self.live_roles = live_roles
        #: the preflight's calls (one minimal real call per live remote model): billed, so counted in the run's cost
        self.preflight: list[CallRecord] = []
        self.is_controller = is_controller
        self._handles = dict(server_handles or {})
        self._healthy: set[str] = set()
        self._servers: ServerPool | None = None
        self._closing: list[ChatModel] = []

    # -- embedded servers -------------------------------------------------------------------
    def _local_servers(self) -> list[tuple[str, LocalServerSettings]]:
        """(role, settings) of every live embedded server this run's model specs need (a review on the judge's own
        embedded model asks the judge's server)."""
        s = self.settings
        found = []
        for role, model in s.role_models.items():
            local = model.local(s.local)
            if local is not None and role in self.live_roles and not (s.local_url and local.model_path is None) \
                    and server_role(s, role, local) == role:
                found.append((role, local))
        return found

    def launch_servers(self) -> dict[str, dict[str, Any]]:
        """Controller only: launch every embedded server the run needs (without waiting); their handles."""
        for role, local in self._local_servers():
            self._server_pool().launch(local, role)
        self._handles = self._server_pool().handles()
        return self._handles

    def _server_pool(self) -> ServerPool:
        if self._servers is None:
            self._servers = ServerPool(self.run_dir)
        return self._servers

    def local_url_for(self, local: LocalServerSettings, role: str) -> str:
        """A healthy embedded server's URL for these settings and role, launching it here if this process may."""
        if role not in self.live_roles:
            return REPLAY_ONLY_URL
        if self.settings.local_url and local.model_path is None:
            return self._healthy_url(self.settings.local_url.rstrip("/"), 10.0, role)
        role = server_role(self.settings, role, local)
        key = server_key(local, role)
        if key not in self._handles:
            if not self.is_controller:
                raise ModelServerError(f"no embedded server for {key} was started by the controlling process", model="local")
            self._handles[key] = self._server_pool().launch(local, role).as_dict()
        handle = ServerHandle.from_dict(self._handles[key])
        return self._healthy_url(handle.url, local.startup_timeout_s, role, handle)

    def _healthy_url(self, url: str, timeout_s: float, role: str, handle: ServerHandle | None = None) -> str:
        if url not in self._healthy:
            with step(f"the embedded model of the {role.replace('_', ' ')} to start (up to {timeout_s:.0f} s)"):
                wait_until_healthy(url, timeout_s, pid=handle.pid if handle else None,
                                   log_path=handle.log_path if handle else None)
            self._healthy.add(url)
        return url

    @property
    def uses_embedded(self) -> bool:
        """Whether a live call may reach an embedded server (then scenarios take turns on them)."""
        s = self.settings
        return any(model.local(s.local) for role, model in s.role_models.items() if role in self.live_roles)

    # -- clients ----------------------------------------------------------------------------
    def context(self) -> ModelContext:
        return self.settings.model_context(self.local_url_for, replay_only_roles=frozenset(ROLES) - self.live_roles,
                                           exchange=exchange)

    def chat(self, spec: str, role: str, *, owned: bool = True) -> ChatModel:
        """The chat model a spec or [models] name stands for, for a role, behind the run's limits. An owned
        model is closed with the pool; one given to an assistant is closed by it."""
        resolved = self.settings.role_models.get(role)
        if resolved is None or resolved.named != spec:  # not the role's own model (a calibration's judge, say)
            resolved = resolve_role(role, spec, self.settings.models)
        model = self.limited(create_entry_model(resolved.entry, resolved.label, self.context(), role))
        if owned:
            self._closing.append(model)
        return model

    def entry_chat(self, entry: OpenAIModel | BedrockModel, label: str) -> ChatModel:
        """The chat model of a bot that is a model behind a chat API (its assistant entry's own)."""
        return self.limited(create_entry_model(entry, label, self.context(), "assistant"))

    def limited(self, model: ChatModel) -> ChatModel:
        """The model behind the run's --max-rps / --max-concurrency, shared by every xdist worker."""
        if not self.settings.limits:
            return model
        return LimitedChat(model, SharedLimiter(self.run_dir / ".limits", endpoint_of(model), self.settings.limits))

    def judge_parallel(self) -> int:
        """A live remote judge takes a dialogue's six calls at once; an embedded one (one request at a
        time, the six sharing a cached prefix) and a replayed one take them in turn."""
        s = self.settings
        embedded = s.role_models["judge"].local(s.local) is not None
        return 6 if "judge" in self.live_roles and not embedded else 1

    # -- before any case ----------------------------------------------------------------------
    def check_credentials(self, label: Any) -> None:
        """What every live model needs before its first call, by its backend's check (a Bedrock model's AWS
        credentials and region resolve), and every live embedded model is installed (nothing is called)."""
        s = self.settings
        for role, local in self._local_servers():
            try:
                check_installed(local.model_path)
            except PersonalensError as exc:
                raise UsageError(f"{label(role, s.role_models[role].named)}: {exc}") from None
        for role, model in s.role_models.items():
            check = backend_of(model.entry).check
            if check is not None and role in self.live_roles:
                try:
                    check(model.entry)
                except PersonalensError as exc:
                    raise UsageError(f"{label(role, model.named)}: {exc}") from None

    def ping_all(self, label: Any) -> None:
        """One minimal real call to each live remote model of the run (once per distinct model), within the
        preflight's own limits (:func:`~personalens_testkit.llm.retry.ping`), not the run's retries."""
        s = self.settings
        pinged: set[str] = set()
        for role, resolved in s.role_models.items():
            if role not in self.live_roles or backend_of(resolved.entry).embedded:
                continue
            model = create_entry_model(resolved.entry, resolved.label, self.context(), role)
            try:
                where = f"{resolved.label} at {endpoint_of(model)}"
                if where not in pinged:
                    pinged.add(where)
                    from ..agents.calls import CallRecord  # the dialogue machinery: loaded when a run pings

                    began = time.perf_counter()
                    answer = ping(model, role)  # type: ignore[arg-type]
                    self.preflight.append(CallRecord(
                        role=role, label="preflight", turn=0, seconds=round(time.perf_counter() - began, 3),  # type: ignore[arg-type]
                        prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                        cache_read_tokens=answer.cache_read_tokens, cache_write_tokens=answer.cache_write_tokens))
            except PersonalensError as exc:
                raise UsageError(f"{role.replace('_', ' ')} model, {label(role, resolved.named)}: {exc}") from None
            finally:
                model.close()

    def close(self) -> None:
        for model in self._closing:
            model.close()
        self._closing.clear()
        if self._servers is not None:
            self._servers.stop_all()


def server_role(settings: RunSettings, role: str, local: LocalServerSettings) -> str:
    """The role whose embedded server answers ``role``'s calls: the reviewer shares the judge's when both run the same
    model (one server less; the two never call at once: a review follows its dialogue's judging)."""
    judge = settings.role_models.get("judge")
    if role == "reviewer" and judge is not None and judge.local(settings.local) == local:
        return "judge"
    return role
