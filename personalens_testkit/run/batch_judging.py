"""``--judge-batch``: the judge's calls answered by the provider's batch engine (:mod:`~..llm.batch`) instead of one
by one - about half the price, within 24 hours. Two runs, in any two processes:

- **submit** (``--judge-batch submit``): the dialogues run as always (live and recorded, or replayed with
  ``--rejudge``); the judge's and the reviewer's calls are not sent but kept (a stand-in answer lets the judging go
  on to every call it makes: the six dimensions, ``--turn-level``, ``--leak-check``, ``--review-user``), and the case
  is *not scored* - its row says its calls went to the batch engine; no score is made of a stand-in. The kept calls
  hold each secret's placeholder (never a secret in a file, nor sent). At the end of the run the controller sends
  them as batch jobs (not when ``--max-cost`` could not pay for them at most, nor over an earlier submit's jobs not
  yet collected) and keeps the jobs - their ids, each record's case, role and model - in the judge's re-judging
  folder (``<cassettes>/<assistant>/rejudged/<judge>/batch-jobs.json``).
- **collect** (``--judge-batch collect``, which re-judges: ``--rejudge``, record mode none): before any case, the
  jobs file is checked whole and the jobs looked at - still running: the run says how far they are and stops
  (``--batch-wait``: it waits, with progress) -; their answers are joined back on their record ids and written into
  the judge's cassettes, each as the answer to the request the provider holds as sent with its record (a record in
  error as the provider's error, with its code; ``--batch-resend`` sends a failed case's calls again); then the
  recorded dialogues are judged from those cassettes, through the same answer grammar, into the same rows, reports,
  gates and verdict as an online run - and replay offline alike, ever after (``--rejudge``).

The engines: the OpenAI Batch API behind an OpenAI-compatible endpoint, and Bedrock's batch inference (a judge's
``[models]`` entry of kind ``bedrock`` with ``json_mode = "none"`` - a batch job takes no tool -, ``batch_role_arn``
and ``batch_s3``). A model's calls fewer than its engine's least job (Bedrock: 100) are sent online at the end of the
submit run, their answers kept in the jobs file for collect. Each engine records a collected answer as the answer to
the online call its judge makes (:meth:`~..llm.batch.jobs.OnlineCall.record`), so the cassettes replay as an online
run's.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import threading
import time
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from ..callsite import JUDGING_ROLES, CallRole
from ..costs.shape import stand_in_answer
from ..data.models import case_id
from ..errors import BatchPendingError, ModelError, PersonalensError, StorageError, UsageError
from ..files import write_bytes_atomically
from ..llm.base import ChatModel, ChatRequest, ChatResponse, Message
from ..llm.batch.jobs import BatchAnswer, BatchEngine, BatchJob, record_ids
from ..replay.cassette import Request
from ..replay.store import assistant_dir, assistant_folder
from ..secrets import redact_json

if TYPE_CHECKING:
    from ..evaluation import Evaluation
    from ..llm.registry import ModelContext
    from ..settings import RunSettings

#: the folder of a run that holds the judge calls each process kept (one file a process)
REQUESTS = "batch-requests"
STATE_NAME = "batch-jobs.json"
#: the calls the running case's judging made, in order: (role, the role's model spec, request)
PENDING: ContextVar[list[tuple[str, str, ChatRequest]] | None] = ContextVar("personalens_batch_pending", default=None)
_WRITING = threading.Lock()


class Deferring:
    """A judging role's model under ``--judge-batch submit``: each call kept for the running case
    (:data:`PENDING`), answered at once by a stand-in that reads, never sent."""

    def __init__(self, inner: ChatModel, role: CallRole, named: str) -> None:
        self.inner, self.role, self.named = inner, role, named
        self.spec = inner.spec

    def complete(self, request: ChatRequest) -> ChatResponse:
        pending = PENDING.get()
        if pending is None:
            raise UsageError("--judge-batch submit: a judge call outside a case cannot be kept for a batch job")
        pending.append((self.role, self.named, request))
        return ChatResponse(text=stand_in_answer(request.json_schema or {}, 8), model=self.spec)

    def close(self) -> None:
        self.inner.close()


@contextlib.contextmanager
def keeping() -> Iterator[list[tuple[str, str, ChatRequest]]]:
    """The judge calls of the case evaluated inside, kept (:class:`Deferring`)."""
    kept: list[tuple[str, str, ChatRequest]] = []
    token = PENDING.set(kept)
    try:
        yield kept
    finally:
        PENDING.reset(token)


def request_json(request: ChatRequest) -> dict[str, Any]:
    return {"messages": [[m.role, m.content, m.cache_prefix] for m in request.messages], "purpose": request.purpose,
            "temperature": request.temperature, "max_tokens": request.max_tokens, "top_p": request.top_p,
            "json_schema": request.json_schema, "schema_name": request.schema_name, "stop": list(request.stop)}


def request_of(data: Any) -> ChatRequest:
    """A kept request read back; a ValueError when it is not one."""
    try:
        return ChatRequest(messages=tuple(Message(role, content, prefix) for role, content, prefix in data["messages"]),
                           purpose=data["purpose"], temperature=data["temperature"], max_tokens=data["max_tokens"],
                           top_p=data["top_p"], json_schema=data["json_schema"], schema_name=data["schema_name"],
                           stop=tuple(data["stop"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a kept request is not one ({type(exc).__name__}: {exc})") from None


def keep_calls(run_dir: Path, process: str, case: str, kept: list[tuple[str, str, ChatRequest]]) -> None:
    """A case's kept calls, appended to its process's file in the run folder (one write a case)."""
    folder = run_dir / REQUESTS
    folder.mkdir(parents=True, exist_ok=True)
    # secrets never reach a file: the request kept, and so sent, holds each one's placeholder (as its cassette would)
    lines = "".join(redact_json(json.dumps({"case": case, "role": role, "spec": spec, "request": request_json(request)},
                                           ensure_ascii=False)) + "\n" for role, spec, request in kept)
    with _WRITING, open(folder / f"{process}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(lines)


def kept_for_batch(evaluation: Evaluation, kept: list[tuple[str, str, ChatRequest]], run_dir: Path,
                   process: str) -> Evaluation:
    """A submit run's case once evaluated: its judge calls kept in the run folder, the case not scored (no score is
    made of a stand-in answer), its calls the dialogue's only (every judging call was kept, none made)."""
    log = evaluation.dialogue.log
    log.records = [record for record in log.records if record.role not in JUDGING_ROLES]
    if kept and evaluation.error is None:
        try:
            keep_calls(run_dir, process, case_id(evaluation.scenario.scenario_id, evaluation.repeat), kept)
            evaluation.fail(BatchPendingError(len(kept)), "judging")
        except OSError as exc:  # a full disk, say: the case's error, as any write's
            evaluation.fail(StorageError(run_dir / REQUESTS, exc), "keeping the judge calls")
    return evaluation


def state_path(settings: RunSettings) -> Path:
    """Where a submitted run keeps its jobs: beside the judge's re-judging cassettes."""
    return assistant_dir(settings.cassette_dir, settings.assistant) / "rejudged" / assistant_folder(
        settings.judge_model) / STATE_NAME


def _engine(spec: str, role: str, context: ModelContext, settings: RunSettings) -> BatchEngine:
    """The batch engine of a judging role's model: the OpenAI Batch API behind an OpenAI-compatible endpoint, or
    Bedrock's batch inference (its entry's ``batch_role_arn`` and ``batch_s3``); a UsageError for any other."""
    import dataclasses

    from ..llm.bedrock import BedrockChat
    from ..llm.openai_compat import OpenAICompatibleChat
    from ..llm.registry import create_model

    # the engine's own client, on the role's credentials (never a replaying one), recording nothing itself
    chat = create_model(spec, dataclasses.replace(context, replay_only_roles=frozenset(), exchange=None), role)
    if isinstance(chat, OpenAICompatibleChat):
        from ..llm.batch.openai_batch import OpenAIBatch

        return OpenAIBatch(chat)
    if isinstance(chat, BedrockChat):
        return _bedrock_engine(chat, spec, role, settings)
    chat.close()
    raise UsageError(f"--judge-batch: the {role}'s model {spec} has no batch engine: an OpenAI-compatible endpoint "
                     "that offers the Batch API or a Bedrock model is expected")


def _bedrock_engine(chat: Any, spec: str, role: str, settings: RunSettings) -> BatchEngine:
    """Bedrock's batch inference for a judging role: its answer asked as free text (a batch job takes no tool: the
    model's entry says so, ``json_mode = "none"``, so that its online calls - and their replays - are the batch
    job's), its clients on the role's region and credentials."""
    from ..llm.batch.bedrock_batch import BedrockBatch
    from ..llm.bedrock import aws_session
    from ..llm.entries import BedrockModel

    entry = settings.role_models[role].entry
    if chat.json_mode != "none" or not isinstance(entry, BedrockModel):
        chat.close()
        raise UsageError(f"--judge-batch: the {role}'s model {spec} asks for its answer through a tool (json_mode "
                         f"{chat.json_mode!r}), which a Bedrock batch job does not take: name a [models] entry with "
                         'kind = "bedrock", json_mode = "none" (its answer read as free text, online and in batch '
                         "alike), batch_role_arn and batch_s3")
    session = aws_session(chat.region)
    return BedrockBatch(chat, role_arn=entry.batch_role_arn, s3_uri=entry.batch_s3, bedrock=session.client("bedrock"),
                        s3=session.client("s3"))


def judging_models(settings: RunSettings) -> dict[str, str]:
    """The judging roles' models, by role; a UsageError for one that is the embedded model (no batch engine)."""
    roles = {"judge": settings.judge_model, **({"reviewer": settings.review_user_model} if settings.review_user else {})}
    for role, spec in roles.items():
        if settings.role_models[role].embedded:
            raise UsageError(f"--judge-batch: the {role}'s model {spec} is the embedded model, which has no batch "
                             "engine: give it an OpenAI-compatible endpoint that offers the Batch API")
    return roles


def check_engines(settings: RunSettings, context: ModelContext) -> None:
    """Before any dialogue of a submit run: no earlier submit's jobs wait to be collected, and each judging role's
    endpoint offers the Batch API to its key."""
    uncollected(state_path(settings))
    for role, spec in judging_models(settings).items():
        engine = _engine(spec, role, context, settings)
        try:
            engine.check()
        except ValueError as exc:
            raise UsageError(f"--judge-batch submit: the {role}'s model {spec}: {exc} in its [models] entry") from None
        finally:
            engine.close()


def _batch_cost(settings: RunSettings, calls: list[tuple[str, int | None, int, int | None, bool]]) -> float | None:
    """What calls - (role, prompt tokens, completion tokens, cached prompt tokens, whether on the batch engine) - cost
    at each role's model's price, the batch price for those on the batch engine; None when a model has no price or a
    call no prompt tokens."""
    from ..costs.prices import batch_price, call_cost, load_prices

    prices, total = load_prices(settings.prices), 0.0
    for role, prompt, completion, cached, batched in calls:
        spec = settings.role_models[role].spec
        price = prices.lookup(spec)
        if price is None or prompt is None:
            return None
        total += call_cost(batch_price(price) if batched else price, spec, prompt_tokens=prompt,
                           completion_tokens=completion, cache_read_tokens=cached)
    return total


def kept_cost(settings: RunSettings, kept: list[dict[str, Any]], online: frozenset[int] = frozenset()) -> float | None:
    """What the kept calls cost at most: each prompt's characters / 4 tokens, each answer its token cap, at the batch
    price of its role's model (``online``: the indexes of those sent online, at the full price); None when a model has
    no price."""
    return _batch_cost(settings, [(e["role"], -(-sum(len(m[1]) for m in e["request"]["messages"]) // 4),
                                   e["request"]["max_tokens"] or 800, 0, n not in online) for n, e in enumerate(kept)])


def answered_cost(settings: RunSettings, records: dict[str, dict[str, Any]], found: dict[str, BatchAnswer],
                  online: Iterable[str] = ()) -> float | None:
    """What the answers cost, by the token counts each reports: the batch price, the full price for those sent online
    (``online``); None when a model has no price or an answer no counts."""
    alone = set(online)
    return _batch_cost(settings, [(records[record]["role"], a.response.prompt_tokens, a.response.completion_tokens or 0,
                                   a.response.cache_read_tokens, record not in alone)
                                  for record, a in found.items() if a.response is not None])


def submit_kept(settings: RunSettings, run_dir: Path, run_id: str, context: ModelContext, cassettes: Any,
                spent: Callable[[], float] = lambda: 0.0) -> list[str]:
    """Controller, at the end of a submit run: every kept call sent as batch jobs (one engine a model; a model's calls
    fewer than its engine's least job sent online, one by one, each answer recorded as that call's in the judge's
    online cassette of its case, :func:`online_path`), the jobs kept (:func:`state_path`: each record's case, role and
    model - what was sent stays at the provider, which collect reads back); what was done, in lines. With
    ``--max-cost``, nothing is sent that the budget left (``spent``: what the run's ledger holds) could not pay for
    at most. Sending that stops part way (a provider's error, an interrupt) keeps the jobs already made."""
    from ..costs.prices import format_cost

    kept = []
    for path in sorted((run_dir / REQUESTS).glob("*.jsonl")):
        kept += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not kept:
        return ["--judge-batch submit: no judge call was kept, no job sent"]
    path = state_path(settings)
    uncollected(path)  # never send jobs whose answers could not be collected
    ids = record_ids(len(kept))
    records = {record: {"case": e["case"], "role": e["role"], "spec": e["spec"]} for record, e in zip(ids, kept)}
    requests = {record: e["request"] for record, e in zip(ids, kept)}
    engines = {key: _engine(*key, context, settings) for key in _by_model(records)}
    jobs: list[dict[str, Any]] = []
    online: dict[str, tuple[Any, BatchAnswer]] = {}
    try:
        alone = {record for key, chunk in _by_model(records).items() for record in _alone(chunk, engines[key])}
        cost = kept_cost(settings, kept, frozenset(n for n, record in enumerate(ids) if record in alone))
        if settings.max_cost is not None and (cost is None or spent() + cost > settings.max_cost):
            at_most = "a cost not known" if cost is None else f"at most {format_cost(cost)}"
            return [f"--max-cost {format_cost(settings.max_cost)}: the {len(kept)} kept judge call(s) would cost "
                    f"{at_most}, {format_cost(spent())} spent already: no job sent; the kept calls are in "
                    f"{run_dir / REQUESTS}"]
        try:
            _send(records, engines, lambda engine, r: engine.call.body(request_of(requests[r])),
                  name=f"personalens-{run_id}-{secrets.token_hex(2)}", jobs=jobs, online=online)
        except BaseException as exc:  # what was sent is kept (paid for: never lost), then the failure said
            if not (jobs or online):
                raise
            _keep_sent(path, settings, run_id, jobs, online, records, engines, cassettes)
            if not isinstance(exc, PersonalensError):
                raise
            return [f"--judge-batch submit: sending stopped part way ({exc}); the {len(jobs)} batch job(s) sent "
                    f"({', '.join(j['job']['job_id'] for j in jobs) or 'none'}) and {len(online)} call(s) answered "
                    f"online are kept in {path}: collect them (--judge-batch collect); the kept calls are in "
                    f"{run_dir / REQUESTS}"]
        _keep_sent(path, settings, run_id, jobs, online, records, engines, cassettes)
    finally:
        for engine in engines.values():
            engine.close()
    cases = len({entry["case"] for entry in kept})
    priced = "" if cost is None else (f", at most {format_cost(cost)} at the batch price"
                                      + (" and the full price online" if online else ""))
    return [f"the judge's {len(kept)} call(s) of {cases} case(s) sent as {len(jobs)} batch job(s) "
            f"({', '.join(j['job']['job_id'] for j in jobs) or 'none'}{priced}); kept in {path}",
            *_online_line(settings, online, records, engines),
            "collect their answers (within 24 h): the same command with --judge-batch collect [--batch-wait]"]


def online_path(cassettes: Any, case: str) -> Path:
    """Where the answers of a case's judge calls sent online at submit wait for collect: a cassette beside the judge's
    re-judging one (the answer kept with the very call it answers, as any recording)."""
    final = cassettes.judge_path(case)
    return final.parent / "batch-online" / final.name


def _keep_sent(path: Path, settings: RunSettings, run_id: str, jobs: list[dict[str, Any]],
               online: dict[str, tuple[Any, BatchAnswer]], records: dict[str, dict[str, Any]],
               engines: dict[tuple[str, str], BatchEngine], cassettes: Any) -> None:
    """What was sent, kept: the online answers in their cases' online cassettes, the jobs and the online calls in the
    jobs file (only the records sent: a submit stopped part way keeps what it paid for)."""
    by_case: dict[str, list[str]] = {}
    for record in online:
        by_case.setdefault(records[record]["case"], []).append(record)
    for case, ids in by_case.items():
        with cassettes.use(online_path(cassettes, case), "all") as cassette:
            for record in ids:
                call = engines[(records[record]["spec"], records[record]["role"])].call
                body, answer = online[record]
                cassette.record(Request(*call.request(body), {"content-type": "application/json"}), call.stored(answer))
    sent = {record for j in jobs for record in j["job"]["record_ids"]} | set(online)
    _keep_jobs(path, settings, run_id, jobs, {record: {"sent": body} for record, (body, _) in online.items()},
               {record: entry for record, entry in records.items() if record in sent})


def _alone(chunk: list[str], engine: BatchEngine) -> list[str]:
    """The records of one model that go online: the last part of its calls when fewer than its engine's least job."""
    rest = len(chunk) % engine.maximum
    return chunk[len(chunk) - rest:] if 0 < rest < engine.minimum else []


def _online_line(settings: RunSettings, online: dict[str, tuple[Any, BatchAnswer]], records: dict[str, dict[str, Any]],
                 engines: dict[tuple[str, str], BatchEngine]) -> list[str]:
    """One line for the calls of a model sent online: how many, why, and what they cost (by the tokens each answer
    reports, at the full price)."""
    from ..costs.prices import format_cost

    lines = []
    for (spec, role), engine in engines.items():
        mine = {r: answer for r, (_, answer) in online.items() if (records[r]["spec"], records[r]["role"]) == (spec, role)}
        if mine:
            cost = answered_cost(settings, records, mine, mine)
            priced = "" if cost is None else f" ({format_cost(cost)})"
            lines.append(f"{len(mine)} call(s) of the {role}'s model {spec}: fewer than its batch engine's least job "
                         f"({engine.minimum} records), sent online at the full price{priced}; their answers kept for "
                         "collect")
    return lines


def uncollected(path: Path) -> None:
    """A UsageError when an earlier submit's jobs for this judge wait to be collected: a second submit would lose them."""
    if path.exists():
        raise UsageError(f"--judge-batch submit: the batch jobs of an earlier submit for this judge are not collected "
                         f"yet ({path}): collect them first (--judge-batch collect), or remove that file to give them up")


def submit_at_end(settings: RunSettings, run_dir: Path, run_id: str, context: Callable[[], ModelContext],
                  cassettes: Any, *, sent: bool, spent: Callable[[], float] = lambda: 0.0) -> list[str]:
    """Controller, at the end of a submit run: its kept judge calls sent as batch jobs (``sent``: the run ended as it
    should; one interrupted or stopped early sends nothing - its kept calls stay in its folder)."""
    if not sent:
        return [f"--judge-batch submit: no batch job sent (the run did not finish); its kept judge calls are in "
                f"{run_dir / REQUESTS}"]
    return submit_kept(settings, run_dir, run_id, context(), cassettes, spent)


def _send(records: dict[str, dict[str, Any]], engines: dict[tuple[str, str], BatchEngine],
          body_of: Callable[[BatchEngine, str], Any], *, name: str, jobs: list[dict[str, Any]],
          online: dict[str, tuple[Any, BatchAnswer]]) -> None:
    """The records sent as batch jobs, one engine a model and at most its maximum a job (``body_of(engine, record)``:
    the request body a record sends), those a job would be too small for sent online; each job, as the jobs file
    keeps it, added to ``jobs`` once made, and each online call's body and answer to ``online`` (so that a failure part
    way leaves what was sent in the caller's hands)."""
    for (spec, role), chunk in _by_model(records).items():
        engine = engines[(spec, role)]
        alone = _alone(chunk, engine)
        batched = chunk[:len(chunk) - len(alone)]
        for n in range(0, len(batched), engine.maximum):
            job = engine.submit_bodies([(r, body_of(engine, r)) for r in batched[n:n + engine.maximum]],
                                       name=f"{name}-{len(jobs) + 1}")
            jobs.append({"spec": spec, "role": role, "job": job.as_dict()})
        for record in alone:
            body = body_of(engine, record)
            online[record] = (body, engine.online(record, body))


def _keep_jobs(path: Path, settings: RunSettings, run_id: str, jobs: list[dict[str, Any]], online: dict[str, Any],
               records: dict[str, dict[str, Any]]) -> None:
    """The jobs to collect next, written whole (:func:`read_state` reads them back)."""
    state = {"version": STATE_VERSION, "run_id": run_id, "judge": settings.judge_model, "jobs": jobs,
             "online": online, "records": records}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(path, redact_json(json.dumps(state, ensure_ascii=False)).encode("utf-8"))


def _by_model(records: dict[str, dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for record, entry in records.items():
        found.setdefault((entry["spec"], entry["role"]), []).append(record)
    return found


STATE_VERSION = 3
#: a case id as a cassette's file is named by it (never a path)
_CASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")


def read_state(settings: RunSettings) -> dict[str, Any]:
    """A submit run's jobs, read back and checked whole: each record once, in one job of its role and model or sent
    online (what was sent), its case a case id; a UsageError naming the file and what is wrong with it."""
    path = state_path(settings)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--judge-batch collect: no batch jobs wait to be collected for the judge "
                         f"{settings.judge_model} (no {path}): run --judge-batch submit first") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"--judge-batch collect: {path} cannot be read ({exc})") from None
    try:
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"version {STATE_VERSION} expected")
        jobs = [(j["spec"], j["role"], BatchJob.from_dict(j["job"])) for j in state["jobs"]]
        records, online = state["records"], state["online"]
        owner = {record: (spec, role) for spec, role, job in jobs for record in job.record_ids}
        if not isinstance(records, dict) or not isinstance(online, dict) or set(records) != set(owner) | set(online) \
                or len(owner) != sum(len(job.record_ids) for *_, job in jobs) or set(owner) & set(online):
            raise ValueError("its records are not its jobs' and its online calls' records, each once")
        for record, entry in records.items():
            if not isinstance(entry, dict) or entry.get("role") not in JUDGING_ROLES or not isinstance(
                    entry.get("spec"), str) or (record in owner and (entry["spec"], entry["role"]) != owner[record]):
                raise ValueError(f"record {record}: not of its job's model and role")
            if not isinstance(entry.get("case"), str) or not _CASE.match(entry["case"]):
                raise ValueError(f"record {record}: its case is not a case id")
        for record, entry in online.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("sent"), dict):
                raise ValueError(f"online record {record}: what was sent expected")
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"--judge-batch collect: {path} is not a submit run's jobs ({exc})") from None
    return {"jobs": jobs, "online": online, "records": records, "path": path}


def collect(settings: RunSettings, context: ModelContext, cassettes: Any, *, say: Callable[[str], None],
            sleep: Callable[[float], None] = time.sleep) -> str:
    """Controller, before any case of a collect run: the jobs' answers into the judge's cassettes (waiting for the
    jobs with ``--batch-wait``); a UsageError, saying how far they are, when they still run. Each answer is recorded
    as the answer to the request the provider holds for its record (its copy of what was sent; an online call's
    answer, as recorded with that call at submit): a request the judge no longer sends - another model, another
    dialogue - is a miss, never another request's answer. Every record's call is built before any cassette is
    written. Returns what was done; the jobs' file is then kept as collected."""
    judging_models(settings)
    state = read_state(settings)
    records = state["records"]
    engines = {key: _engine(*key, context, settings) for key in {(e["spec"], e["role"]) for e in records.values()}}
    try:
        _wait(state, engines, settings, say, sleep)
        sent, found = _gathered(state, engines)
        sent.update((record, entry["sent"]) for record, entry in state["online"].items())
        calls = _calls(records, sent, found, engines, cassettes, state["online"])
        errors = _record(records, calls, cassettes)
        state["path"].replace(state["path"].with_name(f"batch-jobs.collected-{time.strftime('%Y%m%d-%H%M%S')}.json"))
        failed = sorted({entry["case"] for record, entry in records.items() if not found[record].ok})
        again = _resend(settings, state, failed, sent, engines, cassettes) if failed and settings.batch_resend else ""
    finally:
        for engine in engines.values():
            engine.close()
    from ..costs.prices import format_cost

    cost = answered_cost(settings, records, found, state["online"])
    priced = "" if cost is None else f"; they cost {format_cost(cost)}"
    resend = "" if not failed or again else f" - to send their {len(failed)} case(s)' calls again: --batch-resend"
    online = f" and {len(state['online'])} sent online" if state["online"] else ""
    return (f"--judge-batch collect: {len(found)} answer(s) of {len(state['jobs'])} batch job(s){online} read into the "
            f"judge's cassettes ({errors} in error, each its case's error with the provider's code{resend}){priced}"
            + again)


def _gathered(state: dict[str, Any], engines: dict[tuple[str, str], BatchEngine]) -> tuple[dict[str, Any],
                                                                                          dict[str, BatchAnswer]]:
    """What was sent with each record of the jobs (the provider's copy) and its answer - an error for a record no
    result holds."""
    sent: dict[str, Any] = {}
    found: dict[str, BatchAnswer] = {}
    for spec, role, job in state["jobs"]:
        engine = engines[(spec, role)]
        held = engine.sent(job)
        missing = [record for record in job.record_ids if record not in held]
        if missing:
            raise UsageError(f"--judge-batch collect: {state['path']} names record {missing[0]} of job "
                             f"{job.job_id}, which the provider's copy of that job does not hold")
        sent.update((record, held[record]) for record in job.record_ids)
        found.update({a.record_id: a for a in engine.answers(job)})
    return sent, found


def _calls(records: dict[str, dict[str, Any]], sent: dict[str, Any], found: dict[str, BatchAnswer],
           engines: dict[tuple[str, str], BatchEngine], cassettes: Any, online: dict[str, Any]) -> dict[str, Any]:
    """Every record's call - the request its judge sends, and its answer - built before anything is written (a record
    whose input is no request of its model is one line, and no cassette is touched). An online call's answer is the
    one recorded with that very request at submit (none: the record's error, never another call's answer); ``found``
    gets it."""
    calls: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    try:
        for record, entry in records.items():
            call = engines[(entry["spec"], entry["role"])].call
            request = Request(*call.request(sent[record]), {"content-type": "application/json"})
            if record not in online:
                calls[record] = (request, call.stored(found[record]))
                continue
            if entry["case"] not in kept:
                kept[entry["case"]] = _answers_kept(cassettes, entry["case"])
            answers = kept[entry["case"]].answers_to(request)
            found[record] = _read_stored(call, record, answers[0] if answers else None)
            calls[record] = (request, answers[0] if answers else call.stored(found[record]))
    except ModelError as exc:
        raise UsageError(f"--judge-batch collect: record {record} of case {entry['case']}: {exc}") from None
    return calls


def _answers_kept(cassettes: Any, case: str) -> Any:
    """A case's online cassette, read (never written)."""
    with cassettes.use(online_path(cassettes, case), "none") as cassette:
        return cassette


def _read_stored(call: Any, record: str, stored: dict[str, Any] | None) -> BatchAnswer:
    """An online call's recorded answer as a record's answer (none recorded: an error)."""
    if stored is None:
        return BatchAnswer(record, error_code="missing", error="no answer recorded with this online call")
    if stored["status"]["code"] != 200:
        return BatchAnswer(record, error_code="online", error=f"HTTP {stored['status']['code']}")
    try:
        return call.read(record, json.loads(stored["body"]["string"]))
    except ValueError:
        return BatchAnswer(record, error_code="unreadable", error="the recorded answer is not JSON")


def _resend(settings: RunSettings, state: dict[str, Any], failed: list[str], sent: dict[str, Any],
            engines: dict[tuple[str, str], BatchEngine], cassettes: Any) -> str:
    """``--batch-resend``: every call of each case a record of which failed, sent again as it was sent (the provider's
    copy of it) in new jobs (or online, too few for a job), kept as the jobs to collect next (a case's answers are
    always written whole)."""
    resent = [record for record, entry in state["records"].items() if entry["case"] in failed]
    back = dict(zip(record_ids(len(resent), prefix="S"), resent))  # each new record id: the record it sends again
    records = {new: state["records"][old] for new, old in back.items()}
    jobs: list[dict[str, Any]] = []
    online: dict[str, tuple[Any, BatchAnswer]] = {}
    try:
        _send(records, engines, lambda engine, r: sent[back[r]], name=f"personalens-resend-{secrets.token_hex(3)}",
              jobs=jobs, online=online)
    finally:
        if jobs or online:
            _keep_sent(state["path"], settings, "resent", jobs, online, records, engines, cassettes)
    alone = f" and {len(online)} call(s) online" if online else ""
    return (f"; the calls of the {len(failed)} case(s) in error sent again as {len(jobs)} batch job(s) "
            f"({', '.join(j['job']['job_id'] for j in jobs) or 'none'}){alone}: collect again later")


def _wait(state: dict[str, Any], engines: dict[tuple[str, str], Any], settings: RunSettings,
          say: Callable[[str], None], sleep: Callable[[float], None]) -> None:
    """Until every job has ended (``--batch-wait``), or a UsageError saying how far they are."""
    try:
        while True:
            states = [engines[(spec, role)].state(job) for spec, role, job in state["jobs"]]
            running = [s for s in states if not s.finished]
            if not running:
                return
            where = (f"{len(running)} of {len(states)} batch job(s) still running, "
                     f"{sum(s.answered or 0 for s in states)} of {len(state['records'])} record(s) answered so far")
            if not settings.batch_wait:
                raise UsageError(f"--judge-batch collect: {where}; run it again later, or with --batch-wait")
            say(f"{where}; looking again in {settings.batch_poll_s:g} s")
            sleep(settings.batch_poll_s)
    except KeyboardInterrupt:
        raise UsageError("--judge-batch collect: interrupted while waiting; the jobs go on at the provider: collect "
                         "them again later") from None


def _record(records: dict[str, dict[str, Any]], calls: dict[str, Any], cassettes: Any) -> int:
    """Each case's calls written into its re-judging cassette, in the order its judging asked (the cassette written
    whole); how many answers in error."""
    by_case: dict[str, list[str]] = {}
    for record, entry in records.items():
        by_case.setdefault(entry["case"], []).append(record)
    errors = 0
    for case, ids in by_case.items():
        with cassettes.use(cassettes.judge_path(case), "all") as cassette:
            for record in ids:
                request, stored = calls[record]
                errors += stored["status"]["code"] != 200
                cassette.record(request, stored)
    return errors
