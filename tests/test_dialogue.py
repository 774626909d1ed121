"""The dialogue loop: TERMINATE protocol, turn limits, errors keep the transcript."""

from __future__ import annotations

import pytest

from personalens_testkit.agents.dialogue import Dialogue, Termination, run_dialogue, turn_limit
from personalens_testkit.agents.user_agent import UserAgent, split_terminate
from personalens_testkit.assistants.reference import ReferenceAssistant
from personalens_testkit.data import TaskKind, open_dataset
from personalens_testkit.data.context import build_context
from personalens_testkit.errors import ModelError

from .support.scripted import ScriptedModel


@pytest.fixture(scope="module")
def ctx():
    dataset = open_dataset()
    scenario = dataset.scenarios_for(7)[0]
    return build_context(dataset, scenario)


def _agents(user_answers, assistant_answers=None):
    user = ScriptedModel(list(user_answers))
    assistant = ScriptedModel(assistant_answers if assistant_answers is not None else (lambda r: f"reply {len(assistant.requests)}"))
    return UserAgent(user), ReferenceAssistant(assistant), user, assistant


@pytest.mark.parametrize("text, expected", [
    ("All set, thanks! TERMINATE", ("All set, thanks!", True)),
    ("TERMINATE", ("", True)),
    ("Great. TERMINATE.", ("Great.", True)),
    ("Perfect TERMINATE thank you", ("Perfect thank you", True)),
    ("Please terminate my subscription", ("Please terminate my subscription", False)),
    ("It was TERMINATED yesterday", ("It was TERMINATED yesterday", False)),
])
def test_split_terminate(text, expected):
    assert split_terminate(text) == expected


def test_terminate_is_stripped_and_the_assistant_answers_once_more(ctx):
    user, assistant, _, assistant_model = _agents(["Hi, set my alarm", "Hmm, earlier?", "Perfect, thanks! TERMINATE"])
    dialogue = run_dialogue(Dialogue(), ctx, user, assistant, max_turns=20)
    roles = [m.role for m in dialogue.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert dialogue.messages[4].content == "Perfect, thanks!"
    assert all("TERMINATE" not in m.content for m in dialogue.messages)
    assert dialogue.termination is Termination.USER_TERMINATED
    assert dialogue.turns == 3 and len(assistant_model.requests) == 3
    # the assistant's final reply saw the cleaned user message
    assert "Perfect, thanks!" in assistant_model.requests[-1].messages[-1].content
    assert "TERMINATE" not in assistant_model.requests[-1].messages[-1].content
    labels = [(c.role, c.label, c.turn) for c in dialogue.log.records]
    assert labels[-1] == ("assistant", "final reply", 3)


def test_dialogue_stops_at_the_turn_limit_with_the_users_last_message(ctx):
    user, assistant, user_model, _ = _agents(["next?"] * 4)
    dialogue = run_dialogue(Dialogue(), ctx, user, assistant, max_turns=3)
    assert dialogue.termination is Termination.MAX_TURNS
    assert dialogue.turns == 3 and len(dialogue.messages) == 7 and dialogue.messages[-1].role == "user"
    assert len(user_model.requests) == 4


def test_benchmark_turn_limits():
    assert turn_limit(TaskKind.SD) == 20 and turn_limit(TaskKind.MD) == 30 and turn_limit(TaskKind.MD, 4) == 4


def test_terminate_in_the_opening_query_does_not_end_the_dialogue(ctx):
    user, assistant, _, _ = _agents(["Set an alarm TERMINATE", "Thanks TERMINATE"])
    dialogue = run_dialogue(Dialogue(), ctx, user, assistant, max_turns=20)
    assert dialogue.messages[0].content == "Set an alarm"
    assert dialogue.turns == 2 and dialogue.termination is Termination.USER_TERMINATED
    assert dialogue.notes and "opening query contained TERMINATE" in dialogue.notes[0]


def test_a_model_failure_keeps_the_transcript_so_far_and_says_where(ctx):
    user, assistant, _, assistant_model = _agents(["Hi", "More?", "x"])
    assistant_model.fail_on_call = 2
    dialogue = Dialogue()
    with pytest.raises(ModelError) as err:
        run_dialogue(dialogue, ctx, user, assistant, max_turns=5)
    assert str(err.value) == "assistant (reply, turn 2) call to scripted failed: HTTP 503 from scripted: overloaded"
    assert dialogue.termination is Termination.ERROR
    assert [m.content for m in dialogue.messages] == ["Hi", "reply 1", "More?"]


def test_invented_next_turns_and_labels_are_cut_from_replies(ctx):
    user, assistant, _, _ = _agents(
        ["USER: Hi there\n[ASSISTANT]: Sure!\n[USER]: thanks", "ok TERMINATE"],
        ["Assistant: Done.\nUser: great", "Bye"],
    )
    dialogue = run_dialogue(Dialogue(), ctx, user, assistant, max_turns=5)
    assert [m.content for m in dialogue.messages] == ["Hi there", "Done.", "ok", "Bye"]
