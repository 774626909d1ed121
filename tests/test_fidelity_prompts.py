"""Every prompt a ``--preset paper`` run sends, rendered through the real agents for one scenario, has its row in
docs/fidelity.md with the digest of what it sends: a prompt that changes - its text, its layout, its sampling, its
stop sequences - fails here until its row says so (and gives the new digest), so no change of meaning reaches the
benchmark unstated."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from personalens_testkit.agents.calls import CallLog
from personalens_testkit.agents.judge import Judge
from personalens_testkit.agents.user_agent import UserAgent
from personalens_testkit.assistants.base import AssistantInput, ContextSwitches
from personalens_testkit.assistants.reference import ReferenceAssistant
from personalens_testkit.data import open_dataset
from personalens_testkit.data.context import build_context
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.settings.presets import PAPER

from .support.scripted import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "fidelity.md"
DIALOGUE = (Message("user", "Could you set my alarm for tomorrow?"), Message("assistant", "Sure - for when?"),
            Message("user", "The usual time, please."), Message("assistant", "Done: 6:45, soft piano."))
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([0-9a-f]{12})`\s*\|", re.M)


def digest(request: ChatRequest) -> str:
    sent = {"messages": [[m.role, m.content] for m in request.messages], "temperature": request.temperature,
            "max_tokens": request.max_tokens, "stop": list(request.stop), "schema": request.json_schema}
    return hashlib.sha256(json.dumps(sent, sort_keys=True).encode()).hexdigest()[:12]


def sent(call) -> list[ChatRequest]:
    """The requests ``call(model)`` sends to a model that answers anything with a readable verdict."""
    model = ScriptedModel(lambda request: '{"verdict": false, "explanation": "e", "score": 2, "scores": [2, 2]}')
    try:
        call(model)
    except Exception:  # noqa: BLE001 - an answer the agent cannot read: its request is what is wanted here
        pass
    return model.requests


def rendered_calls() -> dict[str, str]:
    """Each call of a --preset paper dialogue and its judging, by name: its digest."""
    dataset = open_dataset()
    ctx = build_context(dataset, next(s for s in dataset.scenarios_for(7) if s.task.task_id == "SD-Alarm-task-1"))
    cut = PAPER["reply_cut"]
    calls: dict[str, ChatRequest] = {}
    opening, follow_up = sent(lambda m: (UserAgent(m, reply_cut=cut).opening(ctx, CallLog()),
                                         UserAgent(m, reply_cut=cut).follow_up(ctx, DIALOGUE, CallLog(), turn=2)))
    calls.update({"user agent: opening": opening, "user agent: follow-up": follow_up})
    for variant in ("claude", "llama", "mistral"):
        for context in ("", "D,I,S"):
            parts = ContextSwitches.parse(context) if context else ContextSwitches()
            turn = AssistantInput.build(ctx, parts, DIALOGUE, 3)
            (request,) = sent(lambda m: ReferenceAssistant(m, context=parts, variant=variant, reply_cut=cut).reply(turn))
            calls[f"assistant: {variant}" + (f", context {context}" if context else "")] = request
    for request in sent(lambda m: Judge(m, turn_method=PAPER["turn_level_method"]).judge(ctx, DIALOGUE, CallLog())):
        calls[f"judge: {request.schema_name}"] = request
    (chain,) = sent(lambda m: Judge(m, turn_method="chain").turn_level(ctx, DIALOGUE, CallLog()))
    (leak,) = sent(lambda m: Judge(m).preference_leak(ctx, DIALOGUE, CallLog()))
    calls.update({"judge: turn-level chain": chain, "judge: preference leak": leak})
    return {name: digest(request) for name, request in calls.items()}


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return rendered_calls()


def test_every_prompt_of_the_papers_preset_has_its_row_with_its_digest(rendered):
    page = dict(ROW.findall(PAGE.read_text(encoding="utf-8")))
    changed = [f"{name}: now {now}, docs/fidelity.md says {page.get(name, 'nothing')}"
               for name, now in rendered.items() if page.get(name) != now]
    assert changed == [], ("a prompt of --preset paper changed: say what changed in its row of docs/fidelity.md and "
                           "give its new digest")
    assert sorted(set(page) - set(rendered)) == []  # no row for a call that is gone


def test_the_digest_sees_every_part_of_a_request():
    base = ChatRequest(messages=(Message("system", "s"), Message("user", "u")), purpose="judge", temperature=0.0,
                       max_tokens=10)
    variants = [ChatRequest(messages=(Message("system", "s "), Message("user", "u")), purpose="judge", temperature=0.0,
                            max_tokens=10),
                ChatRequest(messages=base.messages, purpose="judge", temperature=0.5, max_tokens=10),
                ChatRequest(messages=base.messages, purpose="judge", temperature=0.0, max_tokens=11),
                ChatRequest(messages=base.messages, purpose="judge", temperature=0.0, max_tokens=10, stop=("\nUser:",))]
    assert len({digest(r) for r in (base, *variants)}) == 5
