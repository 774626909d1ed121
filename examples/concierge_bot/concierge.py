"""A small, complete example bot for personalens-testkit: a rule-based "concierge".

It speaks the testkit's turn contract (see personalens_testkit/assistants/contract.py):
``reply(request)`` takes the request dict - scenario_id, turn, messages, context - and
returns ``{"reply": "..."}``. The same logic is served four ways in this folder:

- python:  concierge:reply            (sync) or concierge:areply (async)
- http:    python http_server.py --port 8080    POST /reply
- openai:  the same server's POST /v1/chat/completions
- command: python jsonl_bot.py                   JSON lines on stdin/stdout

It is deliberately simple, but it personalizes the way the benchmark rewards: when the
testkit gives it the user's past-interaction summaries (``context = ["interactions"]``),
it proposes what the user usually prefers instead of asking for it.

``CONCIERGE_VARIANT`` changes it, for the worked example of expectations in docs/gates-and-reports.md: ``forgetful``
never recalls a preference (a regression), ``attentive`` recalls the first thing a summary says
when no sentence states a habit (it newly passes scenarios the plain bot fails).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

_DONE = re.compile(r"\b(thanks|thank you|perfect|great|that's all|sounds good|cheers)\b", re.IGNORECASE)
_HABIT = re.compile(r"[^.]*\b(prefer|prefers|usually|typically|often|favou?rite|likes?|enjoys?)\b[^.]*\.", re.IGNORECASE)


def remembered_habit(context: dict[str, Any]) -> str | None:
    """The first sentence of the past-interaction summaries that states a preference or habit."""
    variant = os.environ.get("CONCIERGE_VARIANT", "")
    if variant == "forgetful":
        return None
    summaries = [s for s in (context.get("interactions") or {}).values() if s]
    for summary in summaries:
        match = _HABIT.search(summary)
        if match:
            return match.group(0).strip()
    if variant == "attentive" and summaries:
        return summaries[0].split(". ")[0].strip().rstrip(".") + "."
    return None


def reply(request: dict[str, Any]) -> dict[str, Any]:
    messages = request["messages"]
    last = messages[-1]["content"] if messages else ""
    context = request.get("context") or {}
    where = (context.get("situation") or {}).get("Location")
    if request["turn"] == 1:
        habit = remembered_habit(context)
        if habit:
            text = f'Happy to help! I remember from our past chats: "{habit}" Shall I go with that?'
        else:
            text = "Happy to help! Could you tell me a bit more about what you'd like?"
        if where:
            text += f" (I'll keep it around {where}.)"
    elif _DONE.search(last):
        text = "You're welcome - it's all set. Anything else I can do for you?"
    else:
        text = "Done - I've set that up just as you described. Would you like any changes?"
    return {"reply": text, "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in messages),
                                     "completion_tokens": len(text.split())}}


async def areply(request: dict[str, Any]) -> dict[str, Any]:
    """The same bot as a coroutine (the python kind awaits async callables)."""
    await asyncio.sleep(0)
    return reply(request)
