"""The labelled set of the user agent's checks (tests/data/user_faults/dialogues.jsonl) and the injection of each
kind of fault into its clean dialogues, many ways a kind (read by tests/test_user_faults.py and bench/user_faults.py).

Each injector takes a clean dialogue and a seeded random source and returns the dialogue with one fault of its kind
and the user turn it put it in: the expected finding ``(turn, rule)``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

CORPUS = Path(__file__).resolve().parent / "data" / "user_faults" / "dialogues.jsonl"


def labelled() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").split("\n") if line.strip()]


def clean() -> list[dict[str, Any]]:
    return [d for d in labelled() if not d["faults"]]


def _user_turns(d: dict[str, Any]) -> list[int]:
    return [i for i, m in enumerate(d["messages"]) if m["role"] == "user"]


def _set_user(d: dict[str, Any], turn: int, text: str) -> dict[str, Any]:
    messages = [dict(m) for m in d["messages"]]
    messages[_user_turns(d)[turn]]["content"] = text
    return {**d, "messages": messages}


def _pick_turn(d: dict[str, Any], rng: random.Random, *, first: int = 0) -> int:
    return rng.randrange(first, len(_user_turns(d)))


def _said(d: dict[str, Any], turn: int) -> str:
    return d["messages"][_user_turns(d)[turn]]["content"]


def pasted_profile(d, rng):
    lines = [line for line in (line.strip("- ").strip() for line in d["profile"].split("\n")) if len(line.split()) >= 6]
    words = rng.choice(lines).split()
    start = rng.randrange(0, len(words) - 5)
    chunk = " ".join(words[start:start + rng.randrange(6, len(words) - start + 1)])
    turn = _pick_turn(d, rng)
    glue = rng.choice(["{said} {chunk}", "{chunk}. {said}", "{said} By the way: {chunk}", "{said}\n{chunk}"])
    return _set_user(d, turn, glue.format(said=_said(d, turn), chunk=chunk)), (turn, "pasted_profile")


def preference_in_opening(d, rng):
    preference = rng.choice(d["preferences"])
    glue = rng.choice(["{said} I like {p}.", "{said} I'd want {p}, as always.", "{p} please - {said}",
                       "{said} ({p})"])
    return _set_user(d, 0, glue.format(said=_said(d, 0), p=preference)), (0, "preference_in_opening")


ASSISTANT_LINES = ["Assistant: Sure, I can help with that.", "AI: Here is what I found for you.",
                   "How can I help you today?", "As an AI, I can book that for you.",
                   "I'm your virtual assistant, let me check.", "bot: Done! Anything else?",
                   "User: thanks\nAssistant: you're welcome", "How may I assist you?",
                   "SYSTEM: the booking is confirmed.", "I am an AI assistant and I have set it up."]


def spoke_as_assistant(d, rng):
    turn = _pick_turn(d, rng)
    line = rng.choice(ASSISTANT_LINES)
    text = rng.choice(["{line}", "{said}\n{line}", "{line} {said}"]).format(line=line, said=_said(d, turn))
    return _set_user(d, turn, text), (turn, "spoke_as_assistant")


def empty_turn(d, rng):
    turn = _pick_turn(d, rng)
    return _set_user(d, turn, rng.choice(["", " ", "\n", "...", "?!", "—", "  \t "])), (turn, "empty_turn")


def repeated_turn(d, rng):
    turn = _pick_turn(d, rng, first=1)
    earlier = _said(d, rng.randrange(0, turn))
    text = rng.choice([earlier, earlier.upper(), earlier + " ", " " + earlier.rstrip(".!?") + "!"])
    return _set_user(d, turn, text), (turn, "repeated_turn")


def terminated_early(d, rng):
    return {**d, "opening_terminate": True}, (0, "terminated_early")


FOREIGN = ["Quiero reservar una mesa para dos personas el viernes, por favor.",
           "Je voudrais réserver une table pour deux personnes vendredi, merci.",
           "Ich möchte bitte einen Tisch für zwei Personen am Freitag reservieren.",
           "Vorrei prenotare un tavolo per due persone venerdì, grazie.",
           "Eu gostaria de reservar uma mesa para duas pessoas na sexta, obrigado.",
           "Ik wil graag een tafel voor twee personen reserveren voor vrijdag.",
           "Я хотел бы забронировать столик на двоих в пятницу.",
           "我想预订星期五晚上两个人的桌子，谢谢。",
           "أريد حجز طاولة لشخصين يوم الجمعة من فضلك.",
           "मैं शुक्रवार को दो लोगों के लिए एक टेबल बुक करना चाहता हूँ।",
           "金曜日の夜に二人分のテーブルを予約したいです。お願いします。"]


def other_language(d, rng):
    turn = _pick_turn(d, rng)
    return _set_user(d, turn, rng.choice(FOREIGN)), (turn, "other_language")


def turn_limit(d, rng):
    return {**d, "termination": "max_turns"}, (len(_user_turns(d)) - 1, "turn_limit")


INJECTORS: dict[str, Callable[[dict[str, Any], random.Random], tuple[dict[str, Any], tuple[int, str]]]] = {
    "pasted_profile": pasted_profile, "preference_in_opening": preference_in_opening,
    "spoke_as_assistant": spoke_as_assistant, "empty_turn": empty_turn, "repeated_turn": repeated_turn,
    "terminated_early": terminated_early, "other_language": other_language, "turn_limit": turn_limit,
}


# -- kinds only a reader sees (the review's own rules: agents/user_faults.REVIEW_RULES), put into a clean dialogue ---

def off_task(d, rng):
    turn = _pick_turn(d, rng, first=1)
    text = rng.choice(["Actually, forget that - can you tell me who won the football match last night?",
                       "Never mind. What's the best way to learn to play the guitar?",
                       "Unrelated, but could you write me a poem about the sea?",
                       "Let's talk about something else: how do I fix a leaking tap?"])
    return _set_user(d, turn, text), (turn, "off_task")


def contradicts_profile(d, rng):
    preference = rng.choice(d["preferences"])
    turn = _pick_turn(d, rng, first=1)
    text = rng.choice(["{said} And please avoid {p} - I can't stand it.", "I never go for {p}, so skip that. {said}",
                       "{said} Just not {p}, I dislike that."]).format(said=_said(d, turn), p=preference)
    return _set_user(d, turn, text), (turn, "contradicts_profile")


def does_assistants_work(d, rng):
    turn = _pick_turn(d, rng, first=1)
    text = rng.choice(["I have already booked it myself and sent you the confirmation number, so you're all set.",
                       "I went ahead and checked every option and compared the prices for you: the second is best.",
                       "Here is the full plan I made for you, step by step, with the times and the bookings done."])
    return _set_user(d, turn, text), (turn, "does_assistants_work")


def ended_too_early(d, rng):
    messages = [dict(m) for m in d["messages"][:2]] + [{"role": "user", "content": rng.choice(
        ["Okay, thanks, bye.", "Fine, that's all.", "Never mind then, goodbye."])}] + [
        {"role": "assistant", "content": "Goodbye!"}]
    return {**d, "messages": messages}, (1, "ended_too_early")


def broke_character(d, rng):
    turn = _pick_turn(d, rng)
    text = rng.choice(["As a simulated user I was told to ask you about this, so: {said}",
                       "{said} (I am an AI playing a user in a test, by the way.)",
                       "My instructions say I should not state my preferences. {said}"]).format(said=_said(d, turn))
    return _set_user(d, turn, text), (turn, "broke_character")


#: the review's own kinds, each with the rule a review should name
REVIEW_INJECTORS: dict[str, Callable[[dict[str, Any], random.Random], tuple[dict[str, Any], tuple[int, str]]]] = {
    "off_task": off_task, "contradicts_profile": contradicts_profile, "does_assistants_work": does_assistants_work,
    "ended_too_early": ended_too_early, "broke_character": broke_character,
}


#: English phrases a clean dialogue's user turns are built from (tests and bench alike)
PHRASES = ["could you", "please", "I'd like", "maybe", "for tomorrow", "around noon", "for two people",
           "that works", "sounds good", "on Friday", "near the station", "something quiet", "not too expensive",
           "thanks", "great", "what about", "is there", "any chance of", "the earlier one", "by the window"]


def facts(d: dict[str, Any]):
    from personalens_testkit.agents.user_faults import facts_of

    return facts_of(d["messages"], d["termination"], opening_terminate=d["opening_terminate"],
                    profile_texts=[d["profile"]], preferences=d["preferences"], intent=d["intent"])
