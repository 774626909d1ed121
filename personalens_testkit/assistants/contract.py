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

A reply that is missing, not a string, empty, not valid Unicode (a lone surrogate), or longer
than the entry's ``max_reply_chars`` (default 20,000 characters) is the bot's error, reported
with what it sent; so is an HTTP status other than 200, and a body that is not UTF-8 JSON
(or JSON in the charset its Content-Type names).

Command bots: each request line also carries ``"id"``, an opaque string. Echo it in the
response (``{"id": "...", "reply": "..."}``): a response whose ``id`` is not the request's
is refused. Lines on stdout that are not JSON objects (say, a log line) are skipped and
noted in the row; a response that breaks the contract, a line that is not UTF-8 or a reply
that does not come in time restarts the bot, so no later request can read an answer meant
for an earlier one. Log to stderr: its last lines are shown when the bot fails.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ContractError
from ..llm.base import token_count
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


#: The longest reply a bot may give, in characters, unless its entry says otherwise.
DEFAULT_MAX_REPLY_CHARS = 20_000


def max_reply_bytes(max_chars: int) -> int:
    """The most bytes a response may take on the wire for a reply of ``max_chars`` characters
    (JSON may escape a character as ``\\uXXXX``: six bytes), plus room for the rest of the object."""
    return 6 * max_chars + 65_536


def check_text(text: str, max_chars: int, *, what: str = "the reply") -> str:
    """Text a bot gave, refused if it is longer than ``max_chars`` or is not valid Unicode."""
    if len(text) > max_chars:
        raise ContractError(f"{what} has {len(text):,} characters: more than the limit of {max_chars:,} "
                            "(max_reply_chars in the assistant's entry)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ContractError(f"{what} is not valid Unicode text: a lone surrogate {text[exc.start]!r} at "
                            f"character {exc.start}") from None
    return text


def parse_reply(answer: Any, max_chars: int = DEFAULT_MAX_REPLY_CHARS) -> AssistantReply:
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
    check_text(reply, max_chars)
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
    return AssistantReply(
        text=reply.strip(),
        prompt_tokens=token_count(usage.get("prompt_tokens")),
        completion_tokens=token_count(usage.get("completion_tokens")),
    )


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
