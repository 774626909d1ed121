"""The turn contract shared by ``http``, ``python`` and ``command`` assistants.

Request - one JSON object per assistant turn (HTTP: the POST body; python: the callable's
one argument, a dict; command: one line on the bot's stdin)::

    {
      "scenario_id": "user7-SD-Alarm-task-1",      # stable id of the dialogue: key a bot's memory on it
      "turn": 1,                                  # 1 for the first reply, then 2, 3, ...
      "messages": [                               # the dialogue so far, oldest first,
        {"role": "user", "content": "..."},       # always ending with the user's latest message
        {"role": "assistant", "content": "..."},
        {"role": "user", "content": "..."}
      ],
      "context": {                                # only the parts the entry declares ({} by default)
        "demographics": {"age": "18-24 years old", "gender": "Female", ...},
        "interactions": {"Alarm": "The user, a university student ..."},   # summary per task domain
        "situation": {"Location": "Toronto, Canada", "Device": "Smartphone", ...}
      }
    }

Response - one JSON object (HTTP: the 200 response body; python: a dict, or just the reply
string; command: one line on the bot's stdout)::

    {"reply": "Sure - 7:30 with birdsong, as usual?",
     "usage": {"prompt_tokens": 812, "completion_tokens": 41}}   # optional, for the ledger

A reply that is missing, not a string, or empty is the bot's error, reported with what it
sent; so is an HTTP status other than 200.
"""

from __future__ import annotations

import json
from typing import Any

from .base import AssistantInput, AssistantReply


def request_payload(turn: AssistantInput) -> dict[str, Any]:
    context: dict[str, Any] = {}
    if turn.demographics is not None:
        context["demographics"] = turn.demographics
    if turn.interactions is not None:
        context["interactions"] = turn.interactions
    if turn.situation is not None:
        context["situation"] = turn.situation
    return {
        "scenario_id": turn.scenario_id,
        "turn": turn.turn,
        "messages": [m.as_dict() for m in turn.messages],
        "context": context,
    }


class ContractError(ValueError):
    """A bot's answer breaks the turn contract."""


def parse_reply(answer: Any) -> AssistantReply:
    """A bot's answer (a dict, or a bare string from a python callable) as a reply."""
    if isinstance(answer, str):
        answer = {"reply": answer}
    if not isinstance(answer, dict):
        raise ContractError(f"expected a JSON object with a \"reply\" string, got {_shown(answer)}")
    reply = answer.get("reply")
    if not isinstance(reply, str):
        raise ContractError(f"the answer has no \"reply\" string: {_shown(answer)}")
    if not reply.strip():
        raise ContractError("the reply is empty")
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    return AssistantReply(
        text=reply.strip(),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
