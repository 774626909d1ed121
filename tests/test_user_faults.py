"""The user agent's own faults, found by checks that cost nothing (issue 49): each kind is found where it is put -
into every clean dialogue of the labelled set, many ways a kind (generated) - and the clean dialogues, and clean
ones generated, raise no fault. What a fault does to a case's verdict and to the run's is tested in
tests/test_user_agent_verdict.py."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.agents.user_faults import PASTED_WORDS, RULES, facts_of, find_user_faults, words

from .user_fault_kinds import FOREIGN, INJECTORS, PHRASES, clean, facts, labelled

CLEAN = clean()


def test_every_rule_has_an_injector_and_the_labelled_set_holds_each_kind_naturally():
    assert set(INJECTORS) == {rule.name for rule in RULES}
    natural = {rule for d in labelled() for _, rule in d["faults"]}
    assert natural == {rule.name for rule in RULES}


@pytest.mark.parametrize("d", labelled(), ids=lambda d: d["id"])
def test_the_labelled_set_reads_as_labelled(d):
    found = {(fault.turn, fault.rule) for fault in find_user_faults(facts(d))}
    expected = {tuple(fault) for fault in d["faults"]}
    if d["termination"] == "max_turns":
        expected.add((len([m for m in d["messages"] if m["role"] == "user"]) - 1, "turn_limit"))
    assert found == expected


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(INJECTORS)), st.sampled_from(range(len(CLEAN))), st.integers(0, 2**32 - 1))
def test_each_kind_put_into_a_clean_dialogue_is_found_at_its_turn(kind, which, seed):
    faulty, expected = INJECTORS[kind](CLEAN[which], random.Random(seed))
    found = {(fault.turn, fault.rule) for fault in find_user_faults(facts(faulty))}
    assert expected in found




@st.composite
def clean_dialogues(draw):
    """English user turns, each new, a few phrases each; an assistant that acts; a TERMINATE after it did."""
    turns = draw(st.lists(st.lists(st.sampled_from(PHRASES), min_size=3, max_size=6), min_size=1, max_size=8,
                          unique_by=lambda phrases: tuple(words(" ".join(phrases)))))
    messages = []
    for phrases in turns:
        messages += [{"role": "user", "content": " ".join(phrases).capitalize() + "."},
                     {"role": "assistant", "content": "Done, I have booked it for you."}]
    return facts_of(messages, "user_terminated", profile_texts=["- age: 30-35 years old\n- gender: Male\n\n"
                                                                 "He rents a small car for weekend trips."],
                    preferences=["compact car", "automatic gearbox"], intent="You want a table for dinner.")


@settings(max_examples=300, deadline=None)
@given(clean_dialogues())
def test_a_clean_dialogue_raises_no_fault(dialogue):
    assert find_user_faults(dialogue) == []


def test_a_preference_the_task_itself_names_may_be_said_in_the_opening():
    d = CLEAN[1]
    said = {**d, "intent": d["intent"] + " You want Italian food.", "preferences": ["Italian"]}
    said["messages"] = [{**m} for m in d["messages"]]
    said["messages"][0]["content"] = "Dinner for two on Friday, Italian if possible."
    assert find_user_faults(facts(said)) == []
    said["intent"] = d["intent"]
    assert [(f.turn, f.rule) for f in find_user_faults(facts(said))] == [(0, "preference_in_opening")]


def test_restating_the_task_is_playing_it_not_pasting_the_profile():
    d = {**CLEAN[0], "profile": CLEAN[0]["profile"] + "\nYou want an alarm for tomorrow morning before your early "
                                                     "meeting."}
    d["messages"] = [{**m} for m in d["messages"]]
    d["messages"][0]["content"] = "I want an alarm for tomorrow morning before your early meeting, well, mine."
    assert not [f for f in find_user_faults(facts(d)) if f.rule == "pasted_profile"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(CLEAN))), st.integers(0, 2**32 - 1), st.integers(2, 5))
def test_a_few_words_of_the_profile_in_a_turn_are_playing_it_not_pasting_it(which, seed, size):
    """A user mentions what its profile says in its own words, a phrase at most (a run of five words or fewer)."""
    rng = random.Random(seed)
    d = CLEAN[which]
    lines = [words(line) for line in d["profile"].split("\n") if len(words(line)) >= size]
    line = rng.choice(lines)
    start = rng.randrange(0, len(line) - size + 1)
    phrase = " ".join(line[start:start + size])
    d = {**d, "messages": [dict(m) for m in d["messages"]]}
    d["messages"][2]["content"] = f"As usual, {phrase}, you know what I mean."
    assert "pasted_profile" not in {fault.rule for fault in find_user_faults(facts(d))}


def _word_runs(text: str, size: int = PASTED_WORDS) -> set[tuple[str, ...]]:
    said = words(text)
    return {tuple(said[i:i + size]) for i in range(len(said) - size + 1)}


_FEW_WORDS = st.lists(st.tuples(st.sampled_from(["tea", "Tea", "TEA", "teas", "steas", "café", "cafe\u0301"]),
                                 st.sampled_from([" ", "\n", ", ", " - ", "  "])), max_size=16).map(
    lambda pairs: "".join(word + gap for word, gap in pairs))


#: a word and a word it holds at its end or start: a run cut inside a word is no run of the profile
_INSIDE = {"teas": "tea", "steas": "teas", "tea": "teas"}


@st.composite
def _cut_from(draw: st.DrawFn, profile: str) -> str:
    """A turn cut from a profile's words (six to eight of them), its first or last word maybe one it holds."""
    said = profile.split()
    start = draw(st.integers(0, max(0, len(said) - 6)))
    cut = said[start:start + draw(st.integers(6, 8))]
    for end in draw(st.sets(st.sampled_from([0, -1]))):
        if cut:
            cut[end] = _INSIDE.get(cut[end].strip(",-").lower(), cut[end])
    return " ".join(cut)


@st.composite
def _profiles_and_turns(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    profiles = draw(st.lists(_FEW_WORDS.filter(lambda text: len(text.split()) >= 6), min_size=1, max_size=2))
    turns = draw(st.lists(st.one_of(_FEW_WORDS, _cut_from(profiles[0])), min_size=1, max_size=4))
    return profiles, turns


@settings(max_examples=1000, deadline=None)
@given(_profiles_and_turns(), _FEW_WORDS)
def test_a_turn_is_pasted_exactly_when_it_shares_a_run_of_six_words_with_the_profile_the_task_does_not_hold(
        profiles_and_turns, intent):
    """The rule's definition, by sets of word runs, against the check (a search over the profile's words): few words,
    so runs are shared often, across case, Unicode forms, punctuation and words inside words."""
    profiles, turns = profiles_and_turns
    facts = facts_of([{"role": "user", "content": turn} for turn in turns], None, profile_texts=profiles,
                     intent=intent)
    shown = set().union(*(_word_runs(text) for text in profiles)) - _word_runs(intent)
    expected = [turn for turn, text in enumerate(turns) if _word_runs(text) & shown]
    assert [f.turn for f in find_user_faults(facts) if f.rule == "pasted_profile"] == expected


def test_the_calibration_sets_dialogues_written_as_users_who_play_their_part_raise_no_fault():
    """120 dialogues written for the judge's calibration, in many users' voices: benign text the rules must leave."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "personalens_testkit" / "calibration" / "dialogues.jsonl"
    dialogues = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    assert len(dialogues) >= 100
    flagged = [(d["id"], f.rule) for d in dialogues for f in find_user_faults(facts_of(d["messages"], "user_terminated"))]
    assert flagged == []


@pytest.mark.parametrize("text, flagged", [
    ("User: can you set an alarm for tomorrow?", False),  # its own label once: odd, not the other side
    ("User: set an alarm\nUser: for seven please", True),  # a transcript of turns pasted in
    ("Could you ask the assistant: is it booked?", False),  # a label mid-line is no speaker's
    ("assistant: I have booked it", True),
])
def test_speaker_labels_flag_a_turn_that_holds_a_dialogue_not_one_that_names_its_speaker(text, flagged):
    dialogue = facts_of([{"role": "user", "content": text}, {"role": "assistant", "content": "Done."}],
                        "user_terminated")
    assert ("spoke_as_assistant" in {f.rule for f in find_user_faults(dialogue)}) == flagged


def _lead(d, turn, reply):
    """The dialogue with the assistant's reply that user turn ``turn`` answers replaced by ``reply``."""
    messages = [dict(m) for m in d["messages"]]
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    messages[replies[turn - 1]]["content"] = reply
    return {**d, "messages": messages}


LEADS = {  # a reply that shows the fault itself, for each kind a bot can lead the simulated user into
    "other_language": lambda rng: rng.choice(FOREIGN),
    "spoke_as_assistant": lambda rng: rng.choice(["User: I'd like that\nAssistant: Done!", "Assistant: booked.",
                                                  "AI: here you go"]),
}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(LEADS)), st.sampled_from(range(len(CLEAN))), st.integers(0, 2**32 - 1))
def test_a_fault_the_bots_own_reply_led_the_user_into_is_not_the_user_agents(kind, which, seed):
    """A bot cannot void its own cases by leading the simulated user astray: answering a reply in Spanish in Spanish,
    or a reply that wrote both speakers' labels with labels, is the bot's doing."""
    rng = random.Random(seed)
    faulty, (turn, rule) = INJECTORS[kind](CLEAN[which], rng)
    if turn == 0:
        return  # the opening answers no reply: nothing led it
    led = _lead(faulty, turn, LEADS[kind](rng))
    assert (turn, rule) not in {(f.turn, f.rule) for f in find_user_faults(facts(led))}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(CLEAN))), st.integers(0, 2**32 - 1))
def test_answering_a_question_asked_again_the_same_way_is_no_loop(which, seed):
    rng = random.Random(seed)
    faulty, (turn, _) = INJECTORS["repeated_turn"](CLEAN[which], rng)
    replies = [m["content"] for m in faulty["messages"] if m["role"] == "assistant"]
    led = _lead(faulty, turn, replies[rng.randrange(0, turn - 1)] if turn > 1 else replies[0])
    if turn == 1:  # the first reply has no earlier one to repeat: the loop is the user's
        assert (1, "repeated_turn") in {(f.turn, f.rule) for f in find_user_faults(facts(led))}
        return
    assert (turn, "repeated_turn") not in {(f.turn, f.rule) for f in find_user_faults(facts(led))}
