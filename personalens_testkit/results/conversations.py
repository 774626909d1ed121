"""A team's own conversations, judged the way the benchmark judges a simulated dialogue: the same six calls,
prompts and answer parsing, and the same rows, so the same reports and gates (``personalens judge``).

A conversations file is JSON lines, one conversation a line::

    {"id": "cust-4711", "messages": [{"role": "user", "content": "..."}, {"role": "assistant", ...}],
     "context": {... a UserContext: demographics, preferences, interactions, situation, task, goal ...}}

``context`` is optional; a contexts file (``--context``) may give it instead, by conversation id, or one
context for every conversation (a JSON object with no ``id`` keys). A conversation is judged as it is:
nothing is simulated, so it needs no cassette and no user agent.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..agents.calls import CallLog
from ..agents.judge import Judge
from ..data.jsonlines import read_models
from ..data.user_context import UserContext
from ..errors import DataError, dotted
from ..evaluation import ErrorInfo
from ..llm.base import Message
from ..llm.retry import RetryPolicy
from .rows import CallRow, ResultRow, RowError, RunInfo


class Conversation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    messages: list[dict[str, str]]
    context: UserContext | None = None

    def chat(self) -> list[Message]:
        return [Message(m["role"], m["content"]) for m in self.messages]  # type: ignore[arg-type]


def _turns_wrong(conversation: Conversation) -> tuple[str, str] | None:
    roles = [m.get("role") for m in conversation.messages]
    if not roles or any(r not in ("user", "assistant") for r in roles) or "assistant" not in roles:
        return "messages", "expected turns of role user or assistant, with at least one assistant reply"
    return None


def load_conversations(path: Path) -> list[Conversation]:
    return read_models(path, Conversation, "conversation", _turns_wrong)


def load_contexts(path: Path) -> Callable[[str], UserContext | None]:
    """The contexts of a --context file: by conversation id, or one for all."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(path, None, f"cannot be read as JSON ({getattr(exc, 'msg', None) or exc})") from None
    if not isinstance(data, dict):
        raise DataError(path, None, "expected a JSON object: one context, or contexts by conversation id")
    try:
        if set(data) <= set(UserContext.model_fields):
            one = UserContext.model_validate(data)
            return lambda _id: one
        by_id = {key: UserContext.model_validate(value) for key, value in data.items()}
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(path, dotted(first["loc"]) or None, str(first["msg"]).removeprefix("Value error, ")) from None
    return by_id.get


def judge_conversation(judge: Judge, conversation: Conversation, context: UserContext, run: RunInfo, *,
                       retry: RetryPolicy) -> ResultRow:
    """One conversation's row: its six scores, or its error with the cause (never a guessed score)."""
    log = CallLog(retry=retry)
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    messages = conversation.chat()
    base: dict[str, Any] = dict(
        run=run, run_id=run.run_id, scenario_id=conversation.id, user_id=context.user_id, task_id="conversation",
        task_kind="md" if len(context.domains) > 1 else "sd", domains=context.domains or ["General"],
        transcript=[{"role": m.role, "content": m.content} for m in messages], started_at=started_at,
        turns=sum(1 for m in messages if m.role == "assistant"), termination="recorded",
    )
    try:
        verdict = judge.judge(context.judged(), messages, log)
    except Exception as exc:  # every failure is the conversation's error, with its cause
        info = ErrorInfo.of(exc, "judging")
        partial = getattr(exc, "partial", None)  # the dimensions the judge answered readably (JudgeAnswerError.partial)
        row = ResultRow(**base, status="error", error=RowError(**info.__dict__),
                        **({} if partial is None else {"partial_scores": partial.scores, "reasons": partial.reasons,
                                                       "unreadable": partial.unreadable}))
    else:
        row = ResultRow(**base, status="passed", scores=verdict.scores, reasons=verdict.reasons,
                        observations=verdict.observations, suggestions=verdict.suggestions)
    return row.model_copy(update={
        "calls": [CallRow(**r.as_dict()) for r in log.records], "seconds": round(time.perf_counter() - started, 3),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def context_of(conversation: Conversation, contexts: Callable[[str], UserContext | None] | None) -> UserContext:
    given = contexts(conversation.id) if contexts is not None else None
    return conversation.context or given or UserContext(user_id=conversation.id)

