"""A ``kind = "python"`` bot in a process of its own: ``python -m personalens_testkit.assistants.python_host
TARGET [FOLDER...]`` imports ``TARGET`` (``module:function``, each FOLDER on ``sys.path`` first) and answers
the command kind's JSON lines: one request object a line on stdin, one response line on stdout echoing its
``id``. The function sees the request exactly as in-process (without the ``id``).

``--isolate-bot`` (and ``personalens gate``, always) runs a python bot this way, so the bot's code - a pull
request's - shares no memory with the user agent, the judge and the gate: it cannot patch them. Whatever the
function prints goes to stderr, so it cannot forge a response line; an exception ends the process with its
traceback on stderr, and the command kind reports the turn as the bot's error, with those lines.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any


def _answer(function: Any, request: dict[str, Any], loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    answer = function(request)
    if inspect.isawaitable(answer):
        answer = loop.run_until_complete(answer)
    return {"reply": answer} if isinstance(answer, str) else answer


def serve(target: str, folders: list[str]) -> int:
    # the responses get the real stdout; anything the bot prints goes to stderr
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr
    from .python_bot import load_callable
    from .setup_check import AssistantSetupError

    try:
        function = load_callable(target, [Path(folder) for folder in folders])
    except AssistantSetupError as exc:
        print(f"personalens python host: {exc}", file=sys.stderr)
        return 3
    loop = asyncio.new_event_loop()
    for line in sys.stdin:
        request = json.loads(line)
        request_id = request.pop("id", None)
        answer = _answer(function, request, loop)
        if isinstance(answer, dict):
            answer = {**answer, "id": request_id}
        out.write(json.dumps(answer, ensure_ascii=False, default=str) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], sys.argv[2:]))
