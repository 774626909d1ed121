"""Cassettes around a scenario's calls: record, replay, explain misses.

A :class:`Cassettes` object (one per process) opens a :class:`ScenarioCassettes` per
scenario, which opens the scenario's cassette (:class:`~.cassette.Cassette`) for the dialogue and the judging,
or, when re-judging, replays the dialogue from the scenario's cassette and records or
replays the judge's calls in a cassette of their own (``rejudged/<judge>/``).

The assistant under test: a model-backed assistant (the built-in reference assistant,
the ``bedrock`` kind) is a model call like any other - what it answers is determined by
what is sent, so a changed prompt or model is a miss, never a stale answer. A bot (the
``http``, ``python``, ``command`` and ``openai`` kinds, whose code may change behind an
unchanged request) is called live in every record mode: its own traffic is never recorded
here, and :class:`~personalens_testkit.assistants.recorded.RecordedBot` writes its turns to
the cassette as ``ASSISTANT_URI`` interactions, which only ``--rejudge`` replays.
"""

from __future__ import annotations

import contextlib
import zlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..callsite import CALL_ERRORS, CURRENT_CALL, CallSite
from ..errors import CassetteError, CassetteMissError, PersonalensError, ReplayMissError, ReplyChangedError
from ..secrets import secret_values
from .cassette import Cassette, Request
from .matching import address, body_difference
from .scrub import CALL_HEADER, scrub_body, scrub_request_headers, scrub_response, scrub_uri
from .router import ACTIVE
from .store import assistant_dir, cassette_path

ASSISTANT_URI = "http://assistant.personalens/reply"
#: the cassette metadata's key for how many dialogues it holds (absent: one)
DIALOGUES = "dialogues"


_REASONS = {
    "cassette_not_found": "there is no cassette",
    "already_played": "the recording holds no further answer to this request (the dialogue ran longer than when it was recorded)",
    "nothing_similar": "no recorded request matches it (prompts, model settings or the assistant's replies differ from the recording)",
}


@dataclass(frozen=True)
class CassetteSettings:
    cassette_dir: Path
    assistant: str
    record_mode: str = "none"
    #: replay the dialogue, judge again (live or from the re-judging's own cassette)
    rejudge: bool = False
    #: the judge model's name, for the re-judging cassette's folder
    judge: str = "judge"
    #: the assistant under test is a bot, called live (its turns are stored apart)
    assistant_is_bot: bool = False


@dataclass
class Cassettes:
    settings: CassetteSettings
    secrets: list[tuple[str, str]] = field(default_factory=secret_values)
    _memo: dict[tuple[str, Any], tuple[str, bytes | None]] = field(default_factory=dict, repr=False)

    @property
    def folder(self) -> Path:
        """The assistant's cassette folder."""
        return assistant_dir(self.settings.cassette_dir, self.settings.assistant)

    def path(self, scenario_id: str) -> Path:
        return cassette_path(self.settings.cassette_dir, self.settings.assistant, scenario_id)

    def judge_path(self, scenario_id: str) -> Path:
        return cassette_path(self.settings.cassette_dir, self.settings.assistant, scenario_id, judge=self.settings.judge)

    def for_scenario(self, scenario_id: str, rerecord: str) -> ScenarioCassettes:
        return ScenarioCassettes(self, scenario_id, rerecord)

    # -- what is stored ------------------------------------------------------------------
    def before_record_request(self, request: Any) -> Request | None:
        """The request as matched and stored: a new object (the one sent is never changed); None for one never
        recorded (a bot's own traffic). ``request``: ours, or any with method, uri, body and headers (vcrpy's)."""
        site = CURRENT_CALL.get()
        if self._bot_traffic(request.uri, site):
            return None  # the bot's own traffic: live, and not recorded (its turns are)
        uri, body = self._cleaned(request.uri, request.body)
        headers = scrub_request_headers(request.headers)
        if site is not None:
            headers[CALL_HEADER] = f"{site.role};{site.label};{site.turn}"
        return Request(request.method, uri, body, headers)

    def request_key(self, method: str, uri: str, body: bytes, payload: Any = None) -> tuple[str, str, bytes] | None:
        """What :meth:`before_record_request` keeps of a request that matters to matching (method,
        address, body), without building it; None for a request that is never recorded. ``payload``: the
        JSON value ``body`` was encoded from, when the caller has it (None: not known; the body is read)."""
        if self._bot_traffic(uri, CURRENT_CALL.get()):
            return None
        # not through the memo: a replayed call's body comes once, the memo serves vcrpy's repeated filtering. A quick
        # key: the secrets' plain forms only - a body that holds one spelled otherwise (a bot's reply) misses here and
        # is found the full way (Cassette.exchange goes on through before_record_request)
        if payload is None:
            scrubbed = scrub_body(body, self.secrets, spellings=False)
        else:
            scrubbed = scrub_body(body, self.secrets, parsed=payload, spellings=False)
        return method, address(scrub_uri(uri, self.secrets)), scrubbed or b""

    def _bot_traffic(self, uri: str, site: CallSite | None) -> bool:
        return (self.settings.assistant_is_bot and site is not None and site.role == "assistant"
                and uri != ASSISTANT_URI)

    def _cleaned(self, uri: str, body: Any) -> tuple[str, bytes | None]:
        """Normalised URI and scrubbed body, memoised: a request is filtered again to play, record and explain it."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        key = (uri, data)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) > 256:
                self._memo.clear()
            found = self._memo[key] = (scrub_uri(uri, self.secrets), scrub_body(data, self.secrets))
        return found

    def before_record_response(self, response: dict[str, Any]) -> dict[str, Any]:
        """The answer as stored: decompressed (for an answer that says it is compressed) and scrubbed. Changes the
        dict it is given: a cassette hands a copy."""
        return scrub_response(decoded(response), self.secrets)

    @contextlib.contextmanager
    def use(self, path: Path, mode: str, rerecord: str = "") -> Iterator[Cassette]:
        """The cassette at ``path`` in record ``mode`` (our storage, matching and filters), active in this thread
        while the context lasts, saved at its end (unless marked not ``dirty``). A cassette that cannot be replayed
        is a CassetteError naming it, and ``rerecord``, the command that records it again."""
        from .store import JsonBytesSerializer, XzPersister

        try:
            cassette = Cassette.open(
                path, record_mode=mode, persister=XzPersister, serializer=JsonBytesSerializer,
                filter_request=self.before_record_request, filter_response=self.before_record_response,
                request_key=self.request_key,
            )
        except CassetteError as exc:
            raise exc.with_command(rerecord) if rerecord else exc
        token = ACTIVE.set(cassette)
        try:
            yield cassette
        finally:
            ACTIVE.reset(token)
            cassette.save()


class ScenarioCassettes:
    """The cassette(s) of one scenario. Use as a context manager around the scenario, and
    :meth:`phase` around its dialogue and its judging. A scenario that fails keeps no new recording
    (a half-recorded cassette would only replay as a miss later), unless its error follows from
    answers all recorded (:func:`keeps_recording`)."""

    def __init__(self, cassettes: Cassettes, scenario_id: str, rerecord: str) -> None:
        self.cassettes = cassettes
        self.scenario_id = scenario_id
        self.rerecord = rerecord
        self._stack = contextlib.ExitStack()
        self._cassettes: list[Any] = []

    def __enter__(self) -> ScenarioCassettes:
        self._stack.enter_context(_set(CALL_ERRORS, self.explain))
        if not self.cassettes.settings.rejudge:
            self._open(self.cassettes.path(self.scenario_id), self.cassettes.settings.record_mode)
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if not keeps_recording(exc):
            for cassette in self._cassettes:
                cassette.dirty = False
        self._stack.close()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """``dialogue`` or ``judging``: under ``--rejudge`` each has its own cassette."""
        if not self.cassettes.settings.rejudge:
            yield
            return
        with contextlib.ExitStack() as stack:
            if name == "dialogue":
                path, mode = self.cassettes.path(self.scenario_id), "none"
            else:
                path, mode = self.cassettes.judge_path(self.scenario_id), self.cassettes.settings.record_mode
            cassette = stack.enter_context(self._use(path, mode))
            self._cassettes.append(cassette)
            try:
                yield
            except BaseException as exc:
                if not keeps_recording(exc):
                    cassette.dirty = False
                raise

    def dialogues(self) -> int | None:
        """How many dialogues the scenario's recording holds (``--rerun-user-faults`` runs a second) when this run
        only replays its dialogue - a replay follows its recording -; None when the dialogue is live here (the run
        decides). Read in the dialogue's phase (its cassette active)."""
        cassette = ACTIVE.get()
        if not isinstance(cassette, Cassette) or not cassette.write_protected:
            return None
        count = cassette.metadata.get(DIALOGUES, 1)
        if count not in (1, 2) or isinstance(count, bool):
            raise CassetteError(cassette.path, f"not a cassette of ours: metadata.{DIALOGUES} is {str(count)[:40]!r}, "
                                               "expected 1 or 2")
        return int(count)

    def record_dialogues(self, count: int) -> None:
        """What a live dialogue's cassette keeps of how many dialogues it holds (1: nothing, as before)."""
        cassette = ACTIVE.get()
        if not isinstance(cassette, Cassette) or cassette.write_protected:
            return
        if cassette.metadata.get(DIALOGUES, 1) != count:
            cassette.metadata.pop(DIALOGUES, None)
            if count != 1:
                cassette.metadata[DIALOGUES] = count
            cassette.dirty = True

    def _open(self, path: Path, mode: str) -> None:
        self._cassettes.append(self._stack.enter_context(self._use(path, mode)))

    def _use(self, path: Path, mode: str) -> Any:
        return self.cassettes.use(path, mode, self.rerecord)

    # -- misses ---------------------------------------------------------------------------
    def explain(self, exc: BaseException, site: CallSite) -> PersonalensError | None:
        """A replay miss, however deeply wrapped (botocore wraps it), as one line; else None."""
        if isinstance(exc, ReplyChangedError):  # the bot changed: the models are needed from that turn on
            return exc.with_command(self.rerecord.replace(" --record-mode all", " --record-mode new_episodes"))
        miss = find_miss(exc)
        if miss is None:
            return exc if isinstance(exc, ReplayMissError) else None
        detail = ""
        if miss.reason == "nothing_similar":
            detail = _same_call_difference(miss.cassette, miss.request, site, self.cassettes.secrets)
        return ReplayMissError(
            f"{self.scenario_id}: {site.describe()}: {_REASONS.get(miss.reason, miss.reason)} in {miss.path}{detail}. "
            f"Re-record it: {self.rerecord}"
        )


#: zlib's window bits per content-encoding: gzip's header, or a zlib stream (HTTP's "deflate")
_DECODERS = {"gzip": 16 + 15, "x-gzip": 16 + 15, "deflate": 15}


def decoded(response: dict[str, Any]) -> dict[str, Any]:
    """An answer with a gzip or deflate body decompressed and its ``content-encoding`` header gone: a cassette holds
    what the caller read. Another encoding, or a body that does not decompress within a cassette's bound
    (:data:`~.store.MAX_CASSETTE_BYTES`), stays as it is."""
    headers = response.get("headers") or {}
    name = next((name for name in headers if str(name).lower() == "content-encoding"), None)
    values = headers.get(name) if name is not None else None
    encoding = (values[0] if isinstance(values, list) and values else str(values or "")).strip().lower()
    body = (response.get("body") or {}).get("string")
    if encoding not in _DECODERS or not isinstance(body, (bytes, bytearray)):
        return response
    from .store import MAX_CASSETTE_BYTES

    inflater = zlib.decompressobj(_DECODERS[encoding])
    try:
        plain = inflater.decompress(bytes(body), MAX_CASSETTE_BYTES)
    except zlib.error:
        return response
    if inflater.unconsumed_tail:
        return response
    kept = {key: value for key, value in headers.items() if key != name}
    return {**response, "headers": kept, "body": {**response["body"], "string": plain}}


def keeps_recording(exc: BaseException | None) -> bool:
    """Whether a scenario that ended so keeps what it recorded: it ended well, or in an error that follows from
    answers all recorded (``PersonalensError.from_answers``: a judge's unreadable answer), which its replay
    meets again. Any other error left a call unanswered: that recording would only replay as a miss."""
    return exc is None or (isinstance(exc, PersonalensError) and exc.from_answers)


def _same_call_difference(cassette: Any, request: Any, site: CallSite, secrets: list[tuple[str, str]]) -> str:
    """How the request differs from the one recorded for the same call (role, label, turn), if any was."""
    label = f"{site.role};{site.label};{site.turn}"
    for stored, _ in cassette.data if isinstance(cassette, Cassette) else ():
        if stored.headers.get(CALL_HEADER) == label:
            now = scrub_uri(request.uri, secrets)
            if address(now) != address(stored.uri):
                return f" (the recorded request of this call went to {stored.uri}, this one to {now})"
            found = body_difference(stored.body, scrub_body(request.body, secrets))
            return f" (the recorded request of this call {found})" if found else ""
    return " (the recording has no such call)"


def find_miss(exc: BaseException | None) -> CassetteMissError | None:
    """A cassette's miss in an exception or its causes (a client may raise its own error from it)."""
    for _ in range(10):
        if exc is None or isinstance(exc, CassetteMissError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


@contextlib.contextmanager
def _set(var: ContextVar[Any], value: Any) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
