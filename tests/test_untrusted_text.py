"""Text we do not control, through the real path (loopback HTTP models, real bots, the pytest plugin, the rows
written): a judge that hedges, quotes or doubles its answer is an error with the raw answer, never a score; a
secret spelled with escapes by a bot reaches no file; redaction never races pytest's own environment changes."""

from __future__ import annotations

import html
import json
import lzma
import os
import threading
from pathlib import Path

import pytest

from personalens_testkit.secrets import redact, redact_json, scrub_text, secret_values

from .support.fake_llm import FakeLLM, Script
from .test_reliability import ALARM, LIVE, assert_rows_are_cases, project, python_entry, run_rows

# -- the judge's answer: one value in the one place, or an error with the raw answer ----------------------

HEDGED = {
    "personalization": "Personalization Score: 3 or maybe 4\nJustification: it remembered the time.",
    "task_completion": "VERDICT: true, though arguably false\nEXPLANATION: set, but late.",
}
QUOTED_FINAL = {  # the judge's own score is 2; a quoted "final score: 4" must never become the answer
    "personalization": "Personalization Score: 2\nJustification: ignored the team.\nFinal score: 4 goals to 1",
}


@pytest.mark.parametrize("answers, dimension", [(HEDGED, "task_completion"), (QUOTED_FINAL, "personalization")])
def test_a_hedged_or_doubled_judge_answer_is_an_error_row_with_the_raw_answer(pytester, answers, dimension):
    with FakeLLM(Script(terminate_after=1, judge_texts=answers)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE)
    assert_rows_are_cases(result, rows)
    assert len(rows) == 4
    for row in rows:
        assert row["status"] == "error" and row["scores"] is None, row
        assert row["error"]["source"] == "judge" and row["error"]["raw_answer"] == answers[dimension]
        assert f"judge answer for {dimension} could not be parsed" in row["error"]["message"]


def test_a_case_not_scored_for_an_unreadable_answer_keeps_its_recording_and_replays_to_the_same_error(pytester):
    """Every call of such a case was answered and recorded: its replay is the same error with the same raw answer,
    offline - not a miss of a recording thrown away."""
    with FakeLLM(Script(terminate_after=1, judge_texts=HEDGED)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE)
        sent = len(fake.requests)
        replayed_result, replayed = run_rows(pytester, *ALARM, "--record-mode", "none")
        assert len(fake.requests) == sent  # offline: no call reached the models
    assert_rows_are_cases(replayed_result, replayed)
    assert len(replayed) == 4 and all(row["status"] == "error" for row in replayed)
    assert [(row["scenario_id"], row["error"]["message"]) for row in replayed] == [
        (row["scenario_id"], row["error"]["message"]) for row in rows]


def test_a_clean_labelled_answer_whose_reason_quotes_numbers_is_read(pytester):
    answers = {"personalization": "Personalization Score: 2\nJustification: the match's final score: 4 goals to 1 "
                                  "came from the user, and the bot ignored it."}
    with FakeLLM(Script(terminate_after=1, judge_texts=answers)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE)
    assert_rows_are_cases(result, rows)
    assert [row["scores"]["personalization"] for row in rows] == [2, 2, 2, 2]


SECOND_ANSWERS = [  # the issue's: a second answer one line down was stored as a score, 6 of 6 and 7 of 7
    {"task_completion": "VERDICT: True\n(arguably false)"},
    {"task_completion": '{"verdict": true, "explanation": "The alarm was set."}\nExplanation: Wait, no. False.'},
    {"personalization": "Personalization Score: 3\nPersonalization: 4"},
    {"personalization": "Personalization Score: 3\nJustification: Scratch that, 4."},
    {"personalization": '{"score": 4, "observations": [], "justification": "j", "suggestions": []} <- too high? '
                        "the level below fits too"},
]


@pytest.mark.parametrize("answers", SECOND_ANSWERS, ids=lambda answers: next(iter(answers.values()))[:30])
def test_a_second_answer_after_the_first_is_an_error_row_never_a_score(pytester, answers):
    (dimension, raw), = answers.items()
    with FakeLLM(Script(terminate_after=1, judge_texts=answers)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE)
    assert_rows_are_cases(result, rows)
    for row in rows:
        assert row["status"] == "error" and row["scores"] is None, row
        assert row["error"]["source"] == "judge" and row["error"]["raw_answer"] == raw  # asked again: the same


def test_a_refused_free_text_answer_asked_again_is_scored_from_the_second_answer(pytester):
    first = {"personalization": "Personalization Score: 3\n(possibly 4)"}
    again = {"personalization": json.dumps({"score": 2, "observations": [], "justification": "asked twice",
                                            "suggestions": []})}
    with FakeLLM(Script(terminate_after=1, judge_texts=first, judge_again=again)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE)
    assert_rows_are_cases(result, rows)
    assert [row["scores"]["personalization"] for row in rows] == [2, 2, 2, 2]
    assert all(row["status"] != "error" for row in rows)


# -- secrets spelled with escapes: redacted in every file ------------------------------------------------

TOKEN = "sk-spelled-7c41e09a"
SPELLED = {
    "unicode": "".join(f"\\u{ord(c):04x}" for c in TOKEN),
    "unicode upper": "".join(f"\\u{ord(c):04X}" for c in TOKEN),
    "mixed": TOKEN[:3] + "".join(f"\\u{ord(c):04x}" for c in TOKEN[3:8]) + TOKEN[8:],
    "hex": "".join(f"\\x{ord(c):02x}" for c in TOKEN),
    "percent": "".join(f"%{ord(c):02X}" for c in TOKEN),
    "html": "".join(f"&#{ord(c)};" for c in TOKEN),
    "html hex": "".join(f"&#x{ord(c):x};" for c in TOKEN[:6]) + TOKEN[6:],
}
SPELLER = f'''
SPELLED = {json.dumps(SPELLED)}
def reply(request):
    return "Your key, in every spelling: " + " | ".join(SPELLED.values())
'''


def test_a_secret_spelled_with_escapes_by_a_bot_reaches_no_file(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("TEAM_API_KEY", TOKEN)
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, python_entry("speller", SPELLER, tmp_path))
        result, rows = run_rows(pytester, "--assistant", "speller", *ALARM, *LIVE, "-k", "task-1")
    assert_rows_are_cases(result, rows)
    reply = rows[0]["transcript"][1]["content"]
    assert reply == "Your key, in every spelling: " + " | ".join(["<TEAM_API_KEY>"] * len(SPELLED))
    texts = {}
    for path in pytester.path.rglob("*"):
        if path.is_file() and "pybots" not in path.parts and path.name != "speller.py":
            data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
            texts[path.name] = data.decode("utf-8", "replace")
    assert {"results.jsonl", "report.json", "report.html"} <= set(texts) and any(n.endswith(".xz") for n in texts)
    for name, text in texts.items():
        for kind, form in SPELLED.items():
            for shown in (form, json.dumps(form)[1:-1], html.escape(form), json.dumps(html.escape(form))[1:-1]):
                assert shown not in text, (name, kind)
        assert TOKEN not in text, name


MORE_SPELLINGS = [
    TOKEN[:-1] + "&#x0000061;", TOKEN[:-1] + "&#97", TOKEN[:-1] + "&#x61", "\\U00000073" + TOKEN[1:],
    TOKEN.replace("-", "&#45", 1), TOKEN.replace("-", "&hyphen;", 1).replace("&hyphen;", "&#x2d;"),
    "sk&#8208;".replace("&#8208;", "-") + TOKEN[3:], TOKEN[:2] + "&#x2D" + TOKEN[3:],
]


@pytest.mark.parametrize("form", [*SPELLED.values(), *MORE_SPELLINGS, TOKEN, json.dumps(TOKEN),
                                  "\\\\u0073k-spelled-7c41e09a"])
def test_every_spelling_is_redacted_by_every_redactor(form):
    secrets = [(TOKEN, "<K>")]
    assert "<K>" in redact(f"before {form} after", secrets)
    assert "<K>" in redact_json(json.dumps({"text": f"before {form} after"}), secrets)
    assert b"<K>" in scrub_text(f"before {form} after".encode(), secrets)
    as_json = json.loads(redact_json(json.dumps({"text": f"a {form} b"}), secrets))  # the JSON stays valid
    assert "<K>" in as_json["text"]


@pytest.mark.parametrize("text", ["sk-spelled-7c41e09", "\\u0073k-spelled-7c41e09b", "50% of &#39;s and \\x41"])
def test_near_misses_and_ordinary_escapes_are_left_alone(text):
    assert redact(text, [(TOKEN, "<K>")]) == text


# -- redaction reads the environment while pytest changes it ------------------------------------------

def test_secret_values_never_races_a_thread_that_sets_and_deletes_a_variable(monkeypatch):
    """pytest sets and deletes PYTEST_CURRENT_TEST around every test phase, in the main thread, while
    --concurrency's threads redact rows; a KeyError there once made a case an internal error."""
    monkeypatch.setenv("RACE_API_KEY", "race-secret-value-1234")
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            for name in ("PYTEST_CURRENT_TEST", "RACE_TOGGLED_A", "RACE_TOGGLED_B"):
                os.environ[name] = "x"
                del os.environ[name]

    thread = threading.Thread(target=toggle, daemon=True)
    thread.start()
    errors = 0
    try:
        for _ in range(20_000):
            try:
                assert ("race-secret-value-1234", "<RACE_API_KEY>") in secret_values()
            except (KeyError, RuntimeError):
                errors += 1
    finally:
        stop.set()
        thread.join()
    assert errors == 0


def test_a_secret_of_digits_inside_a_number_leaves_the_json_valid():
    text = json.dumps({"seconds": 0.0812345671, "text": "pin 81234567"}, separators=(",", ":"))
    redacted = redact_json(text, [("81234567", "<PIN>")])
    assert json.loads(redacted) == {"seconds": 0.0812345671, "text": "pin <PIN>"}
