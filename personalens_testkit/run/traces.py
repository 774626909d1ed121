"""``--otel-endpoint``: every scenario a trace in the team's own observability tool (Jaeger, Tempo, Langfuse, Phoenix,
Honeycomb - any OpenTelemetry collector), sent over OTLP/HTTP by the OpenTelemetry SDK (the ``[otel]`` extra), with
the GenAI semantic conventions (still "development"; the attributes named below are theirs).

One trace per case, made once its row is (from the row and the case's call log, so it holds what the row holds and
nothing the run did not do), with times as they were:

- the case's root span (``personalens.case <case id>``): the scenario, profile, task, domains, repeat, assistant,
  status, verdict, each score (``personalens.score.<metric>``), the run's id (``personalens.run.id``, on the resource
  too: a whole run is one query), ``gen_ai.conversation.id``; an error row sets its status to ERROR with the error's
  kind and message (``error.type``), on the span of the phase that failed too;
- under it a ``dialogue`` span, a ``turn N`` span a turn (the opening is turn 0; turn N is the bot's reply N and the
  user's next message), and a span a call: ``chat <model>`` (kind CLIENT) with ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.*``, its role, what
  it was for, its attempts, and ``personalens.call.replayed`` for a call a cassette answered; a bot that is no model
  behind a chat API is a ``reply <assistant>`` span. A dialogue run again (``--rerun-user-faults``) has its first
  dialogue beside it (``first dialogue``, not judged);
- a ``judging`` span with the judge's (and the reviewer's) calls;
- each score a ``gen_ai.evaluation.result`` event - a log record, as the conventions now ask (span events are
  deprecated) - in the case's trace, parented to its ``dialogue`` span: ``gen_ai.evaluation.name``,
  ``gen_ai.evaluation.score.value`` and ``.label``, and (``--otel-content``) ``gen_ai.evaluation.explanation``.

Message contents only with ``--otel-content`` (``gen_ai.input.messages`` / ``gen_ai.output.messages`` on the dialogue's
calls, the judge's explanations): prompts and replies may hold personal data. Every text is redacted as a row is,
whatever the switch: no secret in any attribute.

Each case's spans are made with explicit parents and times, never the current context: cases in other threads
(``--concurrency``) or processes (xdist: each sends its own) never cross. The export runs in the SDK's background
threads and never fails a run: a collector that does not take a batch is given up for the rest of the process (its
spans counted as dropped; at most one time-out spent, :data:`TIMEOUT_S`), and the run ends with one line saying so;
the rows, reports and verdict are the same with or without it. Nothing is imported, nor made, when it is off.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..callsite import JUDGING_ROLES
from ..scales import METRICS
from ..secrets import redact

if TYPE_CHECKING:
    from ..agents.calls import CallRecord
    from ..evaluation import Evaluation
    from ..settings import RunSettings

#: the most seconds one export may take (the collector's answer, retries included); a collector that takes longer is
#: given up
TIMEOUT_S = 3.0
#: the most seconds the end of a process waits for its last spans to go (whatever the collector does: what is not
#: sent by then is counted as dropped)
FLUSH_S = 5.0
#: the longest text an attribute holds (a longer one is cut, and says so): a batch stays within what collectors take
MAX_TEXT = 8_192
#: spans a batch
BATCH = 128
#: each process's account of its export, in the run folder
FOLDER = "otel"
#: the loggers the OTLP exporters report a failed export to: what they say while exporting for us is taken in (the
#: run says it once), never what they say for anyone else in the process (the bot's own telemetry)
_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
            "opentelemetry.exporter.otlp.proto.http._log_exporter", "opentelemetry.exporter.otlp.proto.http")
_OPEN: dict[Path, CaseTraces] = {}
#: why a process could not make its traces at all, and how many cases it could not trace, by run folder
_BROKEN: dict[Path, list[Any]] = {}
_LOCK = threading.Lock()
_EXPORTING = threading.local()


def export_case(settings: RunSettings, run_dir: Path, run_id: str, evaluation: Evaluation, line: str) -> None:
    """A case's trace sent (``line``: its row, as written - secrets replaced); nothing when traces are off. Never
    raises: a trace is never a reason for a case or a run to fail (one that cannot be made is counted, with why)."""
    if not settings.otel_endpoint:
        return
    with _LOCK:
        traces = _OPEN.get(run_dir)
        if traces is None and run_dir not in _BROKEN:
            try:
                traces = _OPEN[run_dir] = CaseTraces(settings, run_id)
            except Exception as exc:  # noqa: BLE001 - the SDK could not be set up: no trace in this process
                _BROKEN[run_dir] = [f"{type(exc).__name__}: {exc}", 0]
        if traces is None:
            _BROKEN[run_dir][1] += 1
            return
    traces.export(evaluation, json.loads(line))


def check_installed() -> None:
    """Before any case: the exporter is installed - else one line saying how to install it."""
    import importlib.util

    from ..errors import UsageError

    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise UsageError(f"--otel-endpoint: {module} is not installed: pip install 'personalens-testkit[otel]'")


def finish(run_dir: Path) -> None:
    """This process's last spans sent (at most :data:`FLUSH_S`, whatever the collector does), and what it sent and
    dropped kept in the run folder for the controller's line (:func:`summary`)."""
    with _LOCK:
        traces = _OPEN.pop(run_dir, None)
        broken = _BROKEN.pop(run_dir, None)
    if traces is None and broken is None:
        return
    account = traces.close() if traces is not None else {"cases": 0, "untraced": broken[1], "sent": 0, "dropped": 0,
                                                          "why": redact(broken[0])}
    try:
        (run_dir / FOLDER).mkdir(parents=True, exist_ok=True)
        (run_dir / FOLDER / f"{os.getpid()}.json").write_text(json.dumps(account), encoding="utf-8")
    except OSError:
        pass  # the run folder is gone or full: the line is lost, never the run


def summary(settings: RunSettings, run_dir: Path) -> list[str]:
    """The run's line about its traces (after every process has finished): how many went where, or how many were
    dropped (or not made) and why - the verdict is the same either way."""
    if not settings.otel_endpoint:
        return []
    cases = untraced = spans = dropped = 0
    why = ""
    for path in sorted((run_dir / FOLDER).glob("*.json")):
        try:
            account = json.loads(path.read_text(encoding="utf-8"))
            cases, spans, dropped = cases + account["cases"], spans + account["sent"], dropped + account["dropped"]
            untraced += account.get("untraced", 0)
            why = why or account["why"] or ""
        except (OSError, ValueError, KeyError, TypeError):
            continue
    where = redact(settings.otel_endpoint)
    if dropped or untraced or (why and not spans):
        missing = f"{dropped} span(s) and event(s) of {cases} case(s) dropped" if dropped or not untraced else \
            f"{untraced} case(s) without a trace"
        return [redact(f"traces: {missing} - {where} did not take them{f' ({_cut(why)})' if why else ''}; the rows and "
                       "the verdict are the same without them")]
    return [f"traces: {cases} case(s) sent to {where} ({spans} span(s) and event(s))"] if cases else []


class _Watched:
    """An exporter that gives its collector up after the first batch it does not take: every later batch is dropped
    at once, so a dead or hung collector costs one time-out, not one a batch. What the exporter logs while it
    exports for us is kept as the cause (:class:`_Taken`)."""

    def __init__(self, inner: Any, success: Any, failure: Any) -> None:
        self.inner, self.success, self.failure = inner, success, failure
        self.sent = 0
        self.gave_up = False
        self._lock = threading.Lock()

    def export(self, batch: Any) -> Any:
        if self.gave_up:
            return self.failure
        _EXPORTING.ours = True
        try:
            result = self.inner.export(batch)
        except Exception:  # noqa: BLE001 - an exporter that raises: as one that failed
            result = self.failure
        finally:
            _EXPORTING.ours = False
        with self._lock:
            if result == self.success:
                self.sent += len(batch)
            else:
                self.gave_up = True
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        self.inner.shutdown()


class _Taken(logging.Filter):
    """On the exporters' loggers: a record logged while one of our exporters exports (this thread, inside
    :meth:`_Watched.export`) is taken - the first kept as the cause of the run's one line - and goes no further; any
    other passes as it would."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(_EXPORTING, "ours", False):
            return True
        if self.first is None and record.levelno >= logging.WARNING:
            self.first = "".join(c if c.isprintable() else " " for c in record.getMessage())
        return False


class CaseTraces:
    """One process's traces of one run: the SDK's tracer and logger providers (never the global ones: the bot's own
    telemetry, in the same process, is left alone), each exporting to the collector in the background."""

    def __init__(self, settings: RunSettings, run_id: str) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

        self.settings, self.run_id = settings, run_id
        self.cases = self.made = self.untraced = 0
        self._why: str | None = None
        self._count = threading.Lock()
        self._taken = _Taken()
        for name in _LOGGERS:
            logging.getLogger(name).addFilter(self._taken)
        base = endpoint_base(settings.otel_endpoint or "")
        resource = Resource.create({"service.name": "personalens-testkit", "service.version": __version__,
                                    "personalens.run.id": run_id})
        self.spans = _Watched(OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=TIMEOUT_S),
                              SpanExportResult.SUCCESS, SpanExportResult.FAILURE)
        self.events = _Watched(OTLPLogExporter(endpoint=f"{base}/v1/logs", timeout=TIMEOUT_S),
                               LogRecordExportResult.SUCCESS, LogRecordExportResult.FAILURE)
        # never shut down at the interpreter's exit (the SDK's own hook would wait on a hung collector): close() does
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(
            self.spans, max_queue_size=65_536, max_export_batch_size=BATCH, schedule_delay_millis=1000))
        self.logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            self.events, max_queue_size=65_536, max_export_batch_size=BATCH, schedule_delay_millis=1000))
        self.tracer = self.tracer_provider.get_tracer("personalens_testkit", __version__)
        self.logger = self.logger_provider.get_logger("personalens_testkit", __version__)

    def export(self, evaluation: Evaluation, row: dict[str, Any]) -> None:
        """A case's trace made and handed to the exporters; one that cannot be made is counted, with why."""
        try:
            log = evaluation.dialogue.log
            made = CaseTrace(self, log.records, row, log.failed).send()
        except Exception as exc:  # noqa: BLE001 - never a reason for a case to fail
            with self._count:
                self.untraced += 1
                self._why = self._why or f"{type(exc).__name__}: {exc}"
            return
        with self._count:
            self.cases += 1
            self.made += made

    def close(self) -> dict[str, Any]:
        """Every span and event sent, within :data:`FLUSH_S` whatever the collector does (the SDK's flush does not
        bound itself: it runs in a thread of its own, waited for that long); the rest counted as dropped; what was
        done."""
        def shut() -> None:
            self.tracer_provider.force_flush()
            self.logger_provider.force_flush()
            self.tracer_provider.shutdown()
            self.logger_provider.shutdown()

        closing = threading.Thread(target=shut, name="personalens-traces-close", daemon=True)
        closing.start()
        try:
            closing.join(FLUSH_S)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: what is not sent yet is dropped
        in_time = not closing.is_alive()
        for name in _LOGGERS:
            logging.getLogger(name).removeFilter(self._taken)
        sent = self.spans.sent + self.events.sent
        why = self._why or self._taken.first or ("" if in_time else f"not all sent within {FLUSH_S:g} s")
        return {"cases": self.cases, "untraced": self.untraced, "sent": sent, "dropped": max(self.made - sent, 0),
                "why": redact(why)}


def endpoint_base(url: str) -> str:
    """The collector's base URL (``/v1/traces`` or ``/v1/logs`` given whole: their base)."""
    url = url.rstrip("/")
    for tail in ("/v1/traces", "/v1/logs"):
        if url.endswith(tail):
            return url[: -len(tail)]
    return url


#: what each model backend is, as the conventions name providers
PROVIDERS = {"openai": "openai", "bedrock": "aws.bedrock", "local": "llama.cpp"}
METRIC_HIGH = {metric.name: metric.high for metric in METRICS}


class CaseTrace:
    """One case's trace, made from its row (as written: secrets replaced) and its call log (each call's start)."""

    def __init__(self, traces: CaseTraces, records: list[CallRecord], row: dict[str, Any],
                 failed: list[CallRecord] = ()) -> None:  # type: ignore[assignment]
        self.traces, self.records, self.row = traces, records, row
        #: the calls that failed (retries spent): each a span with its error, in its turn or under the judging
        self.failed = list(failed)
        self.content = traces.settings.otel_content
        self.case = f"{row['scenario_id']}" + (f"#{row['repeat']}" if row.get("repeat", 1) != 1 else "")
        self.conversation = f"{traces.run_id}/{self.case}"
        self.first_calls = int((((row.get("rerun") or {}).get("first")) or {}).get("calls") or 0)
        #: spans and events made so far
        self.made = 0

    def send(self) -> int:
        """The case's spans and events made and handed to the exporters; how many."""
        from opentelemetry.context import Context
        from opentelemetry.trace import SpanKind, set_span_in_context

        tracer, row = self.traces.tracer, self.row
        start, end = self._bounds()
        root = tracer.start_span(redact(f"personalens.case {self.case}"), context=Context(), kind=SpanKind.INTERNAL,
                                 start_time=start, attributes=self._case_attributes())
        self.made = 1
        try:
            inside = set_span_in_context(root, Context())
            first = self.records[:self.first_calls]
            judged = [r for r in self.records[self.first_calls:] if r.role not in JUDGING_ROLES]
            judging = [r for r in self.records[self.first_calls:] if r.role in JUDGING_ROLES]
            judging += [r for r in self.failed if r.role in JUDGING_ROLES]
            if first:
                self._dialogue("first dialogue", first, inside,
                               (row.get("rerun") or {}).get("first", {}).get("transcript"))
            dialogue = self._dialogue("dialogue", judged, inside, row.get("transcript"), start=start)
            if judging:
                self._group("judging", judging, inside, phase="judging")
            self._evaluations(set_span_in_context(dialogue, Context()), end)
            self._error(root, None)
        finally:
            root.end(end_time=end)
        return self.made

    # -- the spans ------------------------------------------------------------------------------------------------
    def _bounds(self) -> tuple[int, int]:
        """The case's start and end, in nanoseconds: its row's times, widened to its calls'."""
        from datetime import datetime

        times = [(r.started, r.started + r.seconds) for r in self.records if r.started]
        ends = [t for pair in times for t in pair]
        for key in ("started_at", "finished_at"):
            try:
                ends.append(datetime.fromisoformat(str(self.row.get(key))).timestamp())
            except ValueError:
                continue
        low, high = (min(ends), max(ends)) if ends else (0.0, 0.0)
        return _ns(low), _ns(max(high, low))

    def _case_attributes(self) -> dict[str, Any]:
        row = self.row
        found: dict[str, Any] = {
            "personalens.run.id": self.traces.run_id, "personalens.case.id": self.case,
            "personalens.scenario.id": row.get("scenario_id"), "personalens.profile": row.get("user_id"),
            "personalens.task.id": row.get("task_id"), "personalens.task.kind": row.get("task_kind"),
            "personalens.domains": list(row.get("domains") or []), "personalens.repeat": row.get("repeat", 1),
            "personalens.assistant": row.get("assistant"), "personalens.status": row.get("status"),
            "personalens.verdict": row.get("verdict"), "personalens.turns": row.get("turns"),
            "personalens.termination": row.get("termination"), "gen_ai.conversation.id": self.conversation,
        }
        for metric, score in (row.get("scores") or {}).items():
            if score is not None:
                found[f"personalens.score.{metric}"] = score
        return _clean(found)

    def _dialogue(self, name: str, records: list[CallRecord], parent: Any, transcript: Any, *,
                  start: int | None = None) -> Any:
        """A dialogue's span, a span a turn under it, its calls under their turns (each with its message, when asked:
        the k-th call of a dialogue made its k-th message)."""
        from opentelemetry.trace import set_span_in_context

        messages = transcript if isinstance(transcript, list) and len(transcript) == len(records) else None
        failed = [r for r in self.failed if r.role not in JUDGING_ROLES] if name == "dialogue" else []
        records = [*records, *failed]  # a failed call after the answered ones: it made no message
        span = self.traces.tracer.start_span(name, context=parent, start_time=_start(records, start),
                                             attributes=_clean({"gen_ai.conversation.id": self.conversation}))
        self.made += 1 + len({record.turn for record in records})
        inside = set_span_in_context(span, parent)
        turns: dict[int, list[int]] = {}
        for index, record in enumerate(records):
            turns.setdefault(record.turn, []).append(index)
        for turn, indexes in turns.items():
            group = [records[i] for i in indexes]
            turn_span = self.traces.tracer.start_span(f"turn {turn}", context=inside, start_time=_start(group),
                                                      attributes={"personalens.turn": turn})
            turn_inside = set_span_in_context(turn_span, inside)
            for i in indexes:
                said = messages[i] if messages and i < len(messages) else None
                before = messages[i - 1] if messages and 0 < i <= len(messages) else None
                self._call(records[i], turn_inside, said, before)
            turn_span.end(end_time=_end(group))
        self._error(span, "dialogue")
        span.end(end_time=_end(records, start))
        return span

    def _group(self, name: str, records: list[CallRecord], parent: Any, *, phase: str) -> None:
        from opentelemetry.trace import set_span_in_context

        span = self.traces.tracer.start_span(name, context=parent, start_time=_start(records))
        self.made += 1
        inside = set_span_in_context(span, parent)
        for record in records:
            self._call(record, inside, None, None)
        self._error(span, phase)
        span.end(end_time=_end(records))

    def _call(self, record: CallRecord, parent: Any, said: Any, before: Any) -> None:
        from opentelemetry.trace import SpanKind

        provider, model = self._model(record.role)
        attributes: dict[str, Any] = {
            "personalens.role": record.role, "personalens.call.label": record.label,
            "personalens.call.turn": record.turn, "personalens.call.attempts": record.attempts,
            "personalens.call.replayed": record.replayed, "gen_ai.conversation.id": self.conversation,
        }
        if provider is not None:
            attributes.update({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.request.model": model,
                "gen_ai.response.model": record.response_model, "gen_ai.usage.input_tokens": record.prompt_tokens,
                "gen_ai.usage.output_tokens": record.completion_tokens,
                "gen_ai.usage.cache_read.input_tokens": record.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": record.cache_write_tokens})
        if self.content and isinstance(said, dict):
            attributes["gen_ai.output.messages"] = _messages([said])
            if isinstance(before, dict):
                attributes["gen_ai.input.messages"] = _messages([before])
        name = f"chat {model}" if provider is not None else f"reply {self.row.get('assistant')}"
        span = self.traces.tracer.start_span(redact(name), context=parent, kind=SpanKind.CLIENT,
                                             start_time=_ns(record.started), attributes=_clean(attributes))
        self.made += 1
        if record.error is not None:  # the call failed, its retries spent: its error, where it happened
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", record.error.split(":", 1)[0])
            span.set_status(Status(StatusCode.ERROR, _cut(redact(record.error), 1000)))
        span.end(end_time=_ns(record.started + record.seconds))

    def _model(self, role: str) -> tuple[str | None, str | None]:
        """(the conventions' provider name, the model) of a role on a chat model of ours; (None, None) for a bot that
        is none."""
        resolved = self.traces.settings.role_models.get(role)
        if resolved is None:
            return None, None
        spec = resolved.spec
        backend, _, model = spec.partition(":")
        return PROVIDERS.get(backend, backend), model or spec

    def _error(self, span: Any, phase: str | None) -> None:
        """An error row's error on the case's span (``phase`` None) and on the span of the phase it failed in."""
        from opentelemetry.trace import Status, StatusCode

        error = self.row.get("error")
        if not isinstance(error, dict) or (phase is not None and _phase(error.get("phase")) != phase):
            return
        span.set_attribute("error.type", str(error.get("kind")))
        span.set_attribute("personalens.error.source", str(error.get("source")))
        span.set_status(Status(StatusCode.ERROR, redact(f"{error.get('kind')}: {error.get('message')}")[:1000]))

    def _evaluations(self, dialogue: Any, at: int) -> None:
        """Each score a ``gen_ai.evaluation.result`` event, in the case's trace under its dialogue's span."""
        reasons = self.row.get("reasons") or {}
        for metric, score in (self.row.get("scores") or {}).items():
            if score is None:
                continue
            if isinstance(score, bool):
                value, label = float(score), "completed" if score else "not completed"
            else:
                value, label = float(score), f"{score} of {METRIC_HIGH.get(metric, '?')}"
            attributes = {"gen_ai.evaluation.name": metric, "gen_ai.evaluation.score.value": value,
                          "gen_ai.evaluation.score.label": label, "gen_ai.conversation.id": self.conversation,
                          "personalens.case.id": self.case}
            if self.content and isinstance(reasons.get(metric), str):
                attributes["gen_ai.evaluation.explanation"] = reasons[metric]
            self.traces.logger.emit(timestamp=at, context=dialogue, event_name="gen_ai.evaluation.result",
                                    attributes=_clean(attributes))
            self.made += 1


def _cut(text: str, most: int = 200) -> str:
    """At most ``most`` characters; a longer text cut, and saying so."""
    return text if len(text) <= most else text[:most].rstrip() + f"... ({len(text):,} characters)"


def _phase(phase: Any) -> str:
    """The span a failed phase's error goes on: the judging's, or the dialogue's."""
    return "judging" if str(phase) in ("judging", "keeping the judge calls", "review", "leak check") else "dialogue"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _start(records: list[CallRecord], default: int | None = None) -> int | None:
    starts = [r.started for r in records if r.started]
    return _ns(min(starts)) if starts else default


def _end(records: list[CallRecord], default: int | None = None) -> int | None:
    ends = [r.started + r.seconds for r in records if r.started]
    return _ns(max(ends)) if ends else default


def _messages(messages: list[dict[str, Any]]) -> str:
    """Messages as the conventions write them (a JSON list of ``{role, parts: [{type: text, content}]}``)."""
    return json.dumps([{"role": m.get("role"), "parts": [{"type": "text", "content": m.get("content")}]}
                       for m in messages], ensure_ascii=False)


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes as the SDK takes them: no None, every text redacted (no secret in any attribute, whatever the row
    holds), a list of texts as texts."""
    found: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str):
            value = _cut(redact(value), MAX_TEXT)
        elif isinstance(value, list):
            value = [_cut(redact(str(item)), MAX_TEXT) for item in value]
        found[key] = value
    return found
