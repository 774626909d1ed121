"""A bot under test, called live in every record mode; each of its turns is also written to the
scenario's cassette (or, when re-judging, read back from it).

A bot's code may change behind an unchanged request, so its replies are never replayed in
place of calling it - except by ``--rejudge``, which replays a recorded dialogue to judge it
again. Its turns are stored as ``ASSISTANT_URI`` interactions of the cassette.
"""

from __future__ import annotations

import json
from typing import Any

from ..replay.cassettes import ASSISTANT_URI
from ..replay.router import ACTIVE
from .base import Assistant, AssistantInput, AssistantReply
from .contract import parse_reply, request_payload


class RecordedBot:
    """A bot under test, called live; each turn is also written to (or, re-judging, read from) the cassette."""

    def __init__(self, inner: Assistant, *, replay: bool) -> None:
        self.inner = inner
        self.name = inner.name
        self.context = inner.context
        self.replay = replay

    def reply(self, turn: AssistantInput) -> AssistantReply:
        from vcr.errors import CannotOverwriteExistingCassetteException
        from vcr.request import Request

        cassette = ACTIVE.get()
        if cassette is None:
            return self.inner.reply(turn)
        body = json.dumps(request_payload(turn), sort_keys=True, ensure_ascii=False).encode("utf-8")
        request = Request("POST", ASSISTANT_URI, body, {"content-type": "application/json"})
        if self.replay:
            if not cassette.can_play_response_for(request):
                raise CannotOverwriteExistingCassetteException(cassette=cassette, failed_request=request)
            return parse_reply(json.loads(cassette.play_response(request)["body"]["string"]))
        reply = self.inner.reply(turn)
        if not cassette.write_protected and not self._recorded_already(cassette, request, reply):
            usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
            answer = json.dumps({"reply": reply.text, "usage": usage}, ensure_ascii=False).encode("utf-8")
            cassette.append(request, {
                "status": {"code": 200, "message": "OK"},
                "headers": {"content-type": ["application/json"]},
                "body": {"string": answer},
            })
        return reply

    @staticmethod
    def _recorded_already(cassette: Any, request: Any, reply: AssistantReply) -> bool:
        """new_episodes: the same turn with the same reply is in the cassette already (not stored twice)."""
        if cassette.record_mode != "new_episodes" or not cassette.can_play_response_for(request):
            return False
        stored = json.loads(cassette.play_response(request)["body"]["string"])
        return stored.get("reply") == reply.text

    def check(self) -> None:
        if not self.replay:
            self.inner.check()

    def close(self) -> None:
        self.inner.close()
