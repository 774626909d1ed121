"""The model backends of the user agent, the judge and a model bot: one module each in this package, found by
its name - a new backend is a new module here.

A backend's module holds everything about it (see :class:`ModelBackend`): its entry's schema (a
``[tool.personalens.models.NAME]`` table with ``kind = "<backend>"``, and what a spec string
``<backend>:<model>`` stands for), how an entry becomes a chat model (its client imported only then), what a
run checks before a live role's first call, how a price table prices its model ids, and how the gate workflow
``personalens init --models NAME`` writes gives it credentials. It says so in one line,
``BACKEND = ModelBackend(...)``; nothing else lists the backends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict

from ...discovery import discover
from ..local_settings import LocalServerSettings

if TYPE_CHECKING:
    from ..base import AnswerSource, ChatModel

#: where ``openai:`` specs go unless a setting (``openai_base_url``, ``OPENAI_BASE_URL``) says otherwise
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


class BackendEntry(BaseModel):
    """A backend's entry: validated strictly, never changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ModelContext:
    """What backends need from the run: resolved settings and the way to the embedded server."""

    #: Returns the base URL of a healthy embedded server for these settings and role (starting it if needed).
    local_url_for: Callable[[LocalServerSettings, str], str]
    local: LocalServerSettings = field(default_factory=LocalServerSettings)
    openai_base_url: str = OPENAI_DEFAULT_URL
    openai_api_key_env: str = "OPENAI_API_KEY"
    named: Mapping[str, BackendEntry] = field(default_factory=dict)
    local_timeout_s: float = 900.0
    #: roles whose calls only replay from cassettes: no server, no credentials needed
    replay_only_roles: frozenset[str] = frozenset()
    #: where OpenAI-compatible clients' calls are recorded and replayed (the run's cassettes), if anywhere
    exchange: AnswerSource | None = None


@dataclass(frozen=True)
class GateModels:
    """What ``personalens init --models NAME`` writes for the backend (:mod:`personalens_testkit.cli.init_workflow`):
    the user agent's and the judge's models in personalens.toml, and how the gate workflow gets their
    credentials."""

    #: personalens.toml's lines that choose the models
    config_lines: str
    #: the workflow's comment on where the models come from (without a secret: the whole comment)
    comment: str
    #: the secret whose presence means "CI has model credentials" (None: none is needed)
    secret: str | None = None
    #: the gate step's environment lines
    env: tuple[str, ...] = ()
    #: the workflow's extra permission line
    permissions: str = ""
    #: a step before the gate's that sets credentials up
    step: str = ""
    #: lines of the gate step's script, before the bot's
    script: tuple[str, ...] = ()


def _by_id(spec: str, model: str) -> list[str]:
    return [spec, model]


@dataclass(frozen=True)
class ModelBackend:
    """One backend (``kind = "..."`` in a model entry, ``<name>:`` in a spec string)."""

    name: str
    #: the entry's schema: a :class:`BackendEntry` whose ``kind`` field is ``Literal[name]`` and with a ``spec()``
    entry: type[BackendEntry]
    #: the text after ``<name>:`` in a spec string (empty: the spec is the bare name) -> its entry
    from_spec: Callable[[str], BackendEntry]
    #: (label, entry, the run's model context, role) -> the chat model; imports its client when called
    build: Callable[[str, Any, "ModelContext", str], "ChatModel"]
    #: where the backend stands when backends are listed
    order: int
    #: a spec that names a model, shown when a spec names none; "" when the bare name is a whole spec
    example: str = ""
    #: served by the embedded server (its installation is checked, it is never pinged)
    embedded: bool = False
    #: (entry) -> None: what a live role's model needs before its first call, checked without calling it
    #: (raises a PersonalensError naming what is missing)
    check: Callable[[Any], None] | None = None
    #: (spec, model id) -> the keys of the price table that may price it, most specific first
    price_keys: Callable[[str, str], list[str]] = _by_id
    #: whether a call's prompt count includes the tokens read from the prompt cache
    counts_cached_in_prompt: bool = True
    #: how ``personalens init --models NAME`` sets the gate up for it (None: init does not offer it)
    gate: GateModels | None = None


#: every backend, by name, in listing order
BACKENDS: dict[str, ModelBackend] = discover(__name__, __path__, "BACKEND", ModelBackend, lambda b: (b.order, b.name),
                                            group="personalens_testkit.model_backends")
#: the backends' names, in listing order
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)


def backend_of(entry: BaseModel) -> ModelBackend:
    """The backend of an entry (by its ``kind``)."""
    return BACKENDS[entry.kind]  # type: ignore[attr-defined]
