"""The judge's answer by structure: exactly one answer, standing last, and reasons that give no other value -
proved on answers composed by the thousand (tests/support/answer_corpus.py: value x connector x position x
separator x language x wrapper), both ways; a free-text answer refused is asked again once, never more."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personalens_testkit.agents.answer_reasons import DETERMINERS, LEADS
from personalens_testkit.agents.answers import (
    PersonalizationAnswer, RatingAnswer, TaskCompletionAnswer, parse_answer, rating_answer,
)
from personalens_testkit.agents.calls import CallLog
from personalens_testkit.agents.judge import ASKED_AGAIN, Judge
from personalens_testkit.errors import JudgeAnswerError
from personalens_testkit.llm.base import Message
from personalens_testkit.scales import PERSONALIZATION

from .support import answer_corpus
from .support.scripted import ScriptedModel
from .test_prompts import DIALOGUE, dataset, sd  # noqa: F401  (fixtures)

MODELS = {"personalization": PersonalizationAnswer, "task_completion": TaskCompletionAnswer}


def read(kind: str, raw: str):
    model = MODELS.get(kind, rating_answer(1, 5))
    answer = parse_answer(raw, model, kind)
    return answer.verdict if model is TaskCompletionAnswer else answer.score


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_second_answer_anywhere_after_the_first_is_never_a_score(data):
    kind, raw = answer_corpus.hostile(lambda options: data.draw(st.sampled_from(list(options))))
    with pytest.raises(JudgeAnswerError) as err:
        read(kind, raw)
    assert err.value.raw == raw


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reasoning_and_reasons_full_of_numbers_leave_the_one_answer_as_given(data):
    kind, raw, value = answer_corpus.benign(lambda options: data.draw(st.sampled_from(list(options))))
    assert read(kind, raw) == value


#: a word that describes a thing: any lower-case word the grammar does not read as leading to a value
DESCRIBING = st.from_regex(r"[a-z]{3,10}", fullmatch=True).filter(
    lambda word: word not in LEADS | DETERMINERS | {"one", "two", "three", "four", "five", "true", "false", "yes"})
WITH_REASONS = [form for form in answer_corpus.FORMS if form != "label"]  # a bare answer line has no reason
SCORED = [kind for kind, (key, _, _) in answer_corpus.KINDS.items() if key == "score"]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_one_naming_a_thing_at_a_statements_end_leaves_the_answer_as_given(data):
    """ "the previous one.", "this one!", "a better one." (a judge of the shipped recording wrote the first): the word
    names a thing, and the answer's own value is read - never refused as a second answer."""
    kind = data.draw(st.sampled_from(SCORED))
    _, scale, _ = answer_corpus.KINDS[kind]
    value = data.draw(st.sampled_from([v for v in scale if v != 1]))  # "one" would be another value of the scale
    determiner = data.draw(st.sampled_from(sorted(DETERMINERS)))
    phrase = data.draw(st.sampled_from([f"{determiner} one", f"{determiner} {{}} one", "a {} one", "an {} one"]))
    phrase = phrase.format(data.draw(DESCRIBING))
    reason = data.draw(st.sampled_from(answer_corpus.REASONS)) + f" It compared it with {phrase}"
    reason += data.draw(st.sampled_from([".", "!", "?", " .", ")"]))
    raw = answer_corpus.answer_text(kind, value, data.draw(st.sampled_from(WITH_REASONS)), reason)
    assert read(kind, raw) == value


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_one_led_to_as_a_value_is_still_a_second_answer(data):
    """ "... to one.", "possibly one)", "make it one.", "a one.", "Scratch that, one.": a value, refused - also after
    a determiner two words back ("this to one.") or across punctuation ("that, one.")."""
    kind = data.draw(st.sampled_from(SCORED))
    _, scale, _ = answer_corpus.KINDS[kind]
    value = data.draw(st.sampled_from([v for v in scale if v != 1]))
    lead = data.draw(st.sampled_from(sorted(LEADS)))
    before = data.draw(st.sampled_from(["", *sorted(DETERMINERS)]))
    phrase = data.draw(st.sampled_from([f"{before} {lead} one", f"Scratch {before or 'that'}, one",
                                        f"{before}. One", f"({lead} one"])).strip()
    reason = data.draw(st.sampled_from(answer_corpus.REASONS)) + " " + phrase
    reason += data.draw(st.sampled_from([".", "!", "?", ")"]))
    raw = answer_corpus.answer_text(kind, value, data.draw(st.sampled_from(WITH_REASONS)), reason)
    with pytest.raises(JudgeAnswerError):
        read(kind, raw)


@pytest.mark.parametrize("kind, raw", [  # the issue's own, through the parser
    ("task_completion", "VERDICT: True\n(arguably false)"),
    ("task_completion", "VERDICT: True\nExplanation: Wait, no. False."),
    ("personalization", "Personalization Score: 3\nor 4"),
    ("personalization", "Personalization Score: 3\n(possibly 4)"),
    ("personalization", "Personalization Score: 3\nPersonalization: 4"),
    ("personalization", "Personalization Score: 3\nJustification: Scratch that, 4."),
    ("personalization", '{"score": 4} <- too high? the level below fits too'),
    ("personalization", 'Personalization Score: 3\u2028or 4'),
    ("personalization", '{"score": 3, "justification": "Good. Oder vielleicht ٤."}'),
    ("task_completion", '{"verdict": true, "explanation": "The alarm was set. \u200bWait, no. FALSE"}'),
    ("coherence_user", 'Coherence Score: 5\nJustification: Fine.\u2029Actually, make it **4**.'),
])
def test_the_issues_second_answers_are_errors(kind, raw):
    with pytest.raises(JudgeAnswerError):
        read(kind, raw)


@pytest.mark.parametrize("raw, value", [
    ("I checked the 6:30 alarm and 2 things the user asked for.\nPersonalization Score: 3", 3),
    ("The user wanted 2 things.\n\nPersonalization Score: 2\nJustification: It kept the 6:30 alarm.", 2),
    ('Weighing 3 against 4 first.\n{"score": 4, "observations": [], "justification": "In turn 2, it used the '
     '5-star hotel.", "suggestions": []}', 4),
])
def test_numbers_in_the_reasoning_before_the_answer_are_the_judges_thinking(raw, value):
    assert read("personalization", raw) == value


def test_a_refused_free_text_answer_is_asked_again_once_with_the_format_restated(sd):  # noqa: F811
    model = ScriptedModel(["Personalization Score: 3\nor 4",
                           '{"score": 3, "observations": [], "justification": "j", "suggestions": []}'])
    log = CallLog()
    answer = Judge(model).personalization(sd, DIALOGUE, log)
    assert answer.score == 3
    first, again = model.requests
    assert again.messages[:2] == first.messages[:2]
    assert again.messages[2] == Message("assistant", "Personalization Score: 3\nor 4")
    assert "could not be read" in again.messages[3].content and "text follows the answer" in again.messages[3].content
    assert [record.label for record in log.records] == [PERSONALIZATION.name, PERSONALIZATION.name + ASKED_AGAIN]


def test_a_second_refusal_is_the_error_and_no_third_call_is_made(sd):  # noqa: F811
    model = ScriptedModel(["Personalization Score: 3\nor 4", "Personalization Score: 3\n(possibly 4)", "unused"])
    with pytest.raises(JudgeAnswerError, match="text follows the answer") as err:
        Judge(model).personalization(sd, DIALOGUE, CallLog())
    assert err.value.raw == "Personalization Score: 3\n(possibly 4)" and len(model.requests) == 2


def test_one_json_object_as_asked_is_never_asked_again(sd):  # noqa: F811
    model = ScriptedModel(['{"score": 3, "observations": [], "justification": "Scratch that, 4.", "suggestions": []}',
                           '{"score": 4, "observations": [], "justification": "j", "suggestions": []}'])
    with pytest.raises(JudgeAnswerError, match="answers again"):
        Judge(model).personalization(sd, DIALOGUE, CallLog())
    assert len(model.requests) == 1


@pytest.mark.parametrize("raw", ["Personalization Score: ３", "Personalization Score: ٣", "Personalization Score: ³"])
def test_the_answer_lines_value_is_ascii(raw):
    with pytest.raises(JudgeAnswerError, match="outside ASCII"):
        read("personalization", raw)


def test_a_rating_on_another_scale_reads_its_own_values(sd):  # noqa: F811
    with pytest.raises(JudgeAnswerError):
        parse_answer('{"score": 2, "justification": "or 7."}', rating_answer(1, 7), "effort")
    assert parse_answer('{"score": 2, "justification": "or 7."}', RatingAnswer, "coherence_user").score == 2
