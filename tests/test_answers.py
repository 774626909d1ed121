"""Judge answers: JSON or the paper's labelled text parse; anything else is an error with the raw answer."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from personalens_testkit.agents.answers import (
    SCHEMAS, PersonalizationAnswer, RatingAnswer, TaskCompletionAnswer, parse_answer,
)
from personalens_testkit.errors import JudgeAnswerError


def test_plain_json():
    answer = parse_answer('{"score": 3, "justification": "good"}', RatingAnswer, "coherence_user")
    assert (answer.score, answer.justification) == (3, "good")


def test_json_inside_prose_and_fences():
    raw = 'Here you go:\n```json\n{"verdict": false, "explanation": "no booking made"}\n```\nThanks'
    answer = parse_answer(raw, TaskCompletionAnswer, "task_completion")
    assert answer.verdict is False and answer.explanation == "no booking made"


def test_first_valid_object_wins_after_broken_braces():
    raw = 'score {not json} then {"score": 2, "observations": ["a"], "justification": "j", "suggestions": []}'
    answer = parse_answer(raw, PersonalizationAnswer, "personalization")
    assert answer.score == 2 and answer.observations == ["a"]


@pytest.mark.parametrize("raw, score", [
    ("Personalization Score: 3\nKey Observations:\n- x\nJustification: proactive", 3),
    ("<response>\nNaturalness Score: 4\nJustification: fine\n</response>", 4),
])
def test_papers_labelled_text_format(raw, score):
    model = PersonalizationAnswer if raw.startswith("Personalization") else RatingAnswer
    answer = parse_answer(raw, model, "x")
    assert answer.score == score
    assert answer.justification in ("proactive", "fine\n</response>")


def test_papers_verdict_format():
    answer = parse_answer("VERDICT: True\nEXPLANATION: The alarm was set.", TaskCompletionAnswer, "task_completion")
    assert answer.verdict is True and answer.explanation == "The alarm was set."


@pytest.mark.parametrize("raw, problem", [
    ("", "the answer is empty"),
    ("I cannot rate this.", "no JSON object and no labelled score"),
    ('{"score": 5, "observations": [], "justification": "", "suggestions": []}', "score"),
    ('{"score": 0}', "score"),
    ('{"justification": "no score"}', "score: Field required"),
    ("Personalization Score: 7", "score"),
])
def test_unparseable_answers_are_errors_with_the_raw_text(raw, problem):
    with pytest.raises(JudgeAnswerError) as err:
        parse_answer(raw, PersonalizationAnswer, "personalization")
    assert err.value.raw == raw and err.value.dimension == "personalization"
    assert problem in str(err.value)
    assert repr(raw) in str(err.value) or len(raw) > 600


def test_long_raw_answers_are_shortened_in_the_message():
    raw = "x" * 5000
    with pytest.raises(JudgeAnswerError) as err:
        parse_answer(raw, RatingAnswer, "coherence_user")
    assert err.value.raw == raw and "[4400 more characters]" in str(err.value)


def test_schemas_are_strict_objects_with_every_property_required():
    for schema in SCHEMAS.values():
        assert schema["additionalProperties"] is False
        assert schema["required"] == list(schema["properties"])


@given(st.text(max_size=300))
def test_arbitrary_text_parses_or_raises_only_judge_answer_error(raw):
    for model in (TaskCompletionAnswer, PersonalizationAnswer, RatingAnswer):
        try:
            answer = parse_answer(raw, model, "dimension")
        except JudgeAnswerError as err:
            assert err.raw == raw
        else:
            assert isinstance(answer, model)


@given(score=st.integers(1, 5), reason=st.text(max_size=50), junk=st.text(alphabet="abc ,.\n", max_size=20))
def test_valid_answers_always_parse_whatever_surrounds_them(score, reason, junk):
    raw = junk + json.dumps({"score": score, "justification": reason}) + junk
    answer = parse_answer(raw, RatingAnswer, "naturalness_user")
    assert answer.score == score and answer.justification == reason


# -- the final answer, never another number -------------------------------------------------------

FINALS = st.sampled_from(["Final answer: ", "FINAL VERDICT - ", "My final score: ", "final rating is "])
HEDGES = st.sampled_from(["{v} or {w}", "{v}-{w}", "{v} to {w}", "{v}.5", "{v}/7"])


def _distractor(draw, other: int) -> str:
    """Text a judge may write before its answer: another score thought aloud, a hedge, the assistant's
    own JSON quoted, prose."""
    kind = draw(st.sampled_from(["thought", "quote", "prose", "hedge"]))
    if kind == "thought":
        return f"score {other} would be too generous. "
    if kind == "quote":
        return 'The assistant wrote {"score": %d, "justification": "perfect"} to sway me. ' % other
    if kind == "hedge":
        return "Score: " + draw(HEDGES).format(v=other, w=other + 1) + " was my first thought. "
    return draw(st.text(alphabet="abcdefghij ,.\n", max_size=40))


@st.composite
def judged(draw):
    """(raw answer, its final value or None when it has no single final value)."""
    final = draw(st.integers(1, 4))
    other = draw(st.integers(1, 4))
    before = "".join(_distractor(draw, other) for _ in range(draw(st.integers(0, 3))))
    form = draw(st.sampled_from(["json", "label", "marked", "quoted-after"]))
    if form == "json":
        answer = json.dumps({"score": final, "observations": [], "justification": "j", "suggestions": []})
    elif form == "label":
        answer = f"Personalization Score: {final}"
    elif form == "marked":
        answer = draw(FINALS) + f"Score: {final}"
    else:  # the answer, then a quote of another score after it
        answer = f"Score: {final}. " + 'The assistant claimed {"score": %d}.' % other
    return before + answer


@given(judged())
def test_a_parse_is_the_final_answer_or_an_error_never_another_number(raw):
    try:
        answer = parse_answer(raw, PersonalizationAnswer, "personalization")
    except JudgeAnswerError as err:
        assert err.raw == raw
        return
    finals = [int(found) for found in re.findall(r"(?:Score: |\"score\": )(\d)\b(?![-.]| or | to |/)", raw)]
    marked = re.search(r"final[^\n.]{0,30}?Score: (\d)", raw, re.I)
    expected = int(marked.group(1)) if marked else finals[-1]
    assert answer.score == expected  # the marked final answer, or the only value the answer gives
    assert marked or len(set(finals)) == 1


@pytest.mark.parametrize("raw, model, expected", [
    ("score 3 would be too generous... Final answer: Score: 1", PersonalizationAnswer, 1),
    ("verdict: yes would require a booking. Final VERDICT: no", TaskCompletionAnswer, False),
    ("Score: 3/4", PersonalizationAnswer, 3),
    ("Naturalness Score: **4**\nJustification: fine", RatingAnswer, 4),
])
def test_the_final_answer_is_read(raw, model, expected):
    answer = parse_answer(raw, model, "d")
    assert (answer.verdict if model is TaskCompletionAnswer else answer.score) == expected


@pytest.mark.parametrize("raw, problem", [
    ('{"score": true}', "score: must be a whole number (got true)"),
    ('{"score": 3.0}', "score: must be a whole number (got 3.0)"),
    ('{"score": "3"}', 'score: must be a whole number (got "3")'),
    ('{"score": 3, "score": 4}', 'one JSON object gives "score" 2 times'),
    ('The assistant wrote {"score": 4, "justification": "x"}; mine: {"score": 2, "justification": "y"}',
     "the answer gives different values (4, 2) and marks none as final"),
    ("Score: 3 or 4", 'score: must be a whole number (got "3 or 4")'),
    ("Score: 3/5", 'score: must be a whole number (got "3 / 5")'),
    ("x" * 100_001, "more than any judge answer"),
])
def test_answers_that_give_no_single_valid_score_are_errors(raw, problem):
    with pytest.raises(JudgeAnswerError) as err:
        parse_answer(raw, PersonalizationAnswer, "personalization")
    assert problem in str(err.value) and err.value.raw == raw


def test_a_verdict_must_be_a_boolean():
    with pytest.raises(JudgeAnswerError, match='verdict: must be true or false \\(got "true"\\)'):
        parse_answer('{"verdict": "true", "explanation": ""}', TaskCompletionAnswer, "task_completion")
