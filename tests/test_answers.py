"""Judge answers: JSON or the paper's labelled text parse; anything else is an error with the raw answer."""

from __future__ import annotations

import json

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
