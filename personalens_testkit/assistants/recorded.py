"""A bot under test, called live in every record mode; each of its turns is also written to the
scenario's cassette (or, when re-judging, read back from it).

A bot's code may change behind an unchanged request, so its replies are never replayed in
place of calling it - except by ``--rejudge``, which replays a recorded dialogue to judge it
again. Its turns are stored as ``ASSISTANT_URI`` interactions of the cassette.

In an offline replay (``none``), a reply that differs from the recorded one for the same turn
ends the case at once with :class:`~personalens_testkit.errors.ReplyChangedError`: the rest of the
dialogue was never recorded, so no model can answer it offline, and the case is *not scored* -
the bot's doing, not the benchmark's models'. With ``new_episodes`` the models are called live
from that turn on, and the new turns join the cassette.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import replace
from typing import Any

from ..errors import ReplyChangedError
from ..replay.cassette import Cassette, Request
from ..replay.cassettes import ASSISTANT_URI
from ..replay.router import ACTIVE
from ..replay.scrub import scrub_response
from ..secrets import secret_values
from .base import Assistant, AssistantInput, AssistantReply
from .contract import parse_reply, request_payload


def _as_stored(text: str) -> str:
    """A reply as its cassette stores it: every secret in it scrubbed (:func:`~..replay.scrub.scrub_response`)."""
    answer = json.dumps({"reply": text}, ensure_ascii=False).encode("utf-8")
    stored = scrub_response({"headers": {}, "body": {"string": answer}}, secret_values())
    return json.loads(stored["body"]["string"])["reply"]


class RecordedBot:
    """A bot under test, called live; each turn is also written to (or, re-judging, read from) the cassette."""

    def __init__(self, inner: Assistant, *, replay: bool) -> None:
        self.inner = inner
        self.name = inner.name
        self.context = inner.context
        self.replay = replay
        #: per cassette, how often this run gave each reply to each request (:meth:`_stored_fewer`)
        self._met: weakref.WeakKeyDictionary[Cassette, dict[tuple[Any, str], int]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def reply(self, turn: AssistantInput) -> AssistantReply:
        cassette = ACTIVE.get()
        if cassette is None:
            return self.inner.reply(turn)
        body = json.dumps(request_payload(turn), sort_keys=True, ensure_ascii=False).encode("utf-8")
        request = Request("POST", ASSISTANT_URI, body, {"content-type": "application/json"})
        if self.replay:
            return parse_reply(json.loads(cassette.play(request)["body"]["string"]))
        reply = self.inner.reply(turn)
        recorded = self._recorded_replies(cassette, request)
        same = not recorded or reply.text in recorded or _as_stored(reply.text) in recorded  # stored with no secret
        if cassette.write_protected:
            if not same:
                raise ReplyChangedError(turn.turn, recorded[-1], reply.text)
            return reply
        if not same:  # new_episodes: the dialogue goes on live from this turn
            reply = replace(reply, recorded=recorded[-1])
        if self._stored_fewer(cassette, request, reply.text):  # a reply the file holds already is not stored twice
            usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
            answer = json.dumps({"reply": reply.text, "usage": usage}, ensure_ascii=False).encode("utf-8")
            cassette.record(request, {
                "status": {"code": 200, "message": "OK"},
                "headers": {"content-type": ["application/json"]},
                "body": {"string": answer},
            })
        return reply

    @staticmethod
    def _recorded_replies(cassette: Cassette, request: Request) -> list[str]:
        """The replies the cassette's file holds for this very turn (the same request), read without playing them -
        never one this run recorded (a scenario's second dialogue, ``--rerun-user-faults``, meets its first's
        requests again: those are no recording to compare with)."""
        if cassette.record_mode == "all":
            return []
        return [json.loads(found["body"]["string"]).get("reply") for found in cassette.answers_to(request, read=True)]

    def _stored_fewer(self, cassette: Cassette, request: Request, text: str) -> bool:
        """Whether the cassette holds this reply to this request fewer times than this run has now given it: then it
        is stored, so that a replay (``--rejudge``) plays as many as the run met - a second dialogue that meets the
        first's request again gets its own answer. In ``new_episodes``, a reply the file holds already is not stored
        twice."""
        key = (request.key(), text)
        with self._lock:
            met = self._met.setdefault(cassette, {})
            met[key] = met.get(key, 0) + 1
            given = met[key]
        if cassette.record_mode != "new_episodes":
            return True
        stored = [json.loads(found["body"]["string"]).get("reply") for found in cassette.answers_to(request)]
        return sum(reply in (text, _as_stored(text)) for reply in stored) < given

    def check(self) -> None:
        if not self.replay:
            self.inner.check()

    def close(self) -> None:
        self.inner.close()
