"""Judge answers: one JSON object (alone, or in words that give no value) or the paper's one label line parse;
anything else - a second candidate, a hedge, a qualifier, an unknown word - is an error with the raw answer."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_json_after_prose_and_in_fences():
    raw = 'Here you go, 2 things to say:\n```json\n{"verdict": false, "explanation": "no booking made"}\n```'
    answer = parse_answer(raw, TaskCompletionAnswer, "task_completion")
    assert answer.verdict is False and answer.explanation == "no booking made"


def test_text_after_the_answer_is_an_error_and_the_judge_may_be_asked_again():
    raw = 'Here you go:\n```json\n{"verdict": false, "explanation": "no booking made"}\n```\nThanks'
    with pytest.raises(JudgeAnswerError, match="text follows the answer") as err:
        parse_answer(raw, TaskCompletionAnswer, "task_completion")
    assert err.value.free_text


def test_a_json_answer_alone_is_never_asked_again():
    raw = '{"verdict": false, "explanation": "Wait, no. True."}'
    with pytest.raises(JudgeAnswerError, match="answers again") as err:
        parse_answer(raw, TaskCompletionAnswer, "task_completion")
    assert not err.value.free_text


@pytest.mark.parametrize("raw", [
    '{"score": 4, "justifi\n{"score": 2, "observations": ["a"], "justification": "j", "suggestions": []}',
    # an answer cut off at its token limit: the object nested in it is not the answer
    '{"observations": [{"score": 2, "justification": "turn one"}], "justification": "Overall the assistant was',
    '```json\n{"observations": [{"score": 2, "justification": "x"}], "score": null, }\n```',
])
def test_broken_or_cut_json_around_an_object_is_an_error(raw):
    with pytest.raises(JudgeAnswerError, match="holds JSON|text follows the answer"):
        parse_answer(raw, PersonalizationAnswer, "personalization")


@pytest.mark.parametrize("raw, score", [
    ("Personalization Score: 3\nKey Observations:\n- x\nJustification: proactive", 3),
    ("<response>\nNaturalness Score: 4\nJustification: fine\n</response>", 4),
])
def test_papers_labelled_text_format(raw, score):
    model = PersonalizationAnswer if raw.startswith("Personalization") else RatingAnswer
    answer = parse_answer(raw, model, "x")
    assert answer.score == score
    assert answer.justification in ("proactive", "fine")


def test_papers_verdict_format():
    answer = parse_answer("VERDICT: True\nEXPLANATION: The alarm was set.", TaskCompletionAnswer, "task_completion")
    assert answer.verdict is True and answer.explanation == "The alarm was set."


@pytest.mark.parametrize("raw, problem", [
    ("", "the answer is empty"),
    ("I cannot rate this.", "no JSON object"),
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


@given(score=st.integers(1, 5), reason=st.text(alphabet="abcxyz ,.\n", max_size=50),
       junk=st.text(alphabet="abc ,.\n12345", max_size=20))
def test_valid_answers_always_parse_whatever_reasoning_comes_before_them(score, reason, junk):
    raw = junk + json.dumps({"score": score, "justification": reason})
    answer = parse_answer(raw, RatingAnswer, "naturalness_user")
    assert answer.score == score and answer.justification == reason


# -- one answer, in the one place the prompt asks for it ---------------------------------------------

CORPUS = Path(__file__).parent / "data" / "judge_answers"
MODELS = {"personalization": PersonalizationAnswer, "task_completion": TaskCompletionAnswer}


def corpus(name: str) -> list[dict]:
    return [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


#: hedged, doubled, qualified or mistyped answers: the issue's own, then more of each kind
HOSTILE = corpus("hostile.jsonl")
#: well-formed answers whose reasons mention numbers, scores, ratings and "final"
BENIGN = corpus("benign.jsonl")


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case["raw"][:40])
def test_hedged_doubled_or_qualified_answers_are_errors_never_scores(case):
    with pytest.raises(JudgeAnswerError) as err:
        parse_answer(case["raw"], MODELS.get(case["answer"], RatingAnswer), case["answer"])
    assert err.value.raw == case["raw"]


@pytest.mark.parametrize("case", [case for case in BENIGN if "lost" not in case], ids=lambda case: case["raw"][:40])
def test_well_formed_answers_are_read_whatever_their_reasons_say(case):
    model = MODELS.get(case["answer"], RatingAnswer)
    answer = parse_answer(case["raw"], model, case["answer"])
    assert (answer.verdict if model is TaskCompletionAnswer else answer.score) == case["value"]


@pytest.mark.parametrize("case", [case for case in BENIGN if "lost" in case], ids=lambda case: case["raw"][:40])
def test_answers_whose_reasons_end_a_statement_with_another_value_are_refused_never_misread(case):
    """Benign to a reader who knows the context, but the grammar cannot tell "at turn 2." from "or 2.": refused
    (the judge is asked again), never read as that other value."""
    with pytest.raises(JudgeAnswerError):
        parse_answer(case["raw"], MODELS.get(case["answer"], RatingAnswer), case["answer"])


def test_the_corpora_cover_each_kind():
    assert len(HOSTILE) >= 50 and len(BENIGN) >= 20
    assert {case["answer"] for case in HOSTILE} >= {"personalization", "task_completion"}


def test_a_verdict_must_be_a_boolean():
    with pytest.raises(JudgeAnswerError, match='verdict: must be true or false \\(got "true"\\)'):
        parse_answer('{"verdict": "true", "explanation": ""}', TaskCompletionAnswer, "task_completion")


def test_a_json_answer_holds_only_the_schemas_keys():
    with pytest.raises(JudgeAnswerError, match="unexpected key 'confidence'"):
        parse_answer('{"score": 3, "confidence": "low", "justification": ""}', RatingAnswer, "naturalness_user")
