"""The four dimensions as deepeval conversational metrics, judged over real HTTP."""

from __future__ import annotations

import asyncio

import pytest

from personalens_testkit.agents.deepeval_metrics import (
    CoherenceMetric, NaturalnessMetric, PersonalizationMetric, TaskCompletionMetric, scenario_context, to_test_case,
)
from personalens_testkit.errors import JudgeAnswerError, UsageError
from personalens_testkit.llm.base import Message
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat

from .support.fake_llm import FakeLLM, Script

DIALOGUE = [Message("user", "Set my alarm, please."), Message("assistant", "Done: 7:00 with birdsong, as usual.")]


@pytest.fixture
def judge_model(fake_llm):
    model = OpenAICompatibleChat(spec="openai:fake-judge", base_url=fake_llm.url, model="fake-judge")
    yield model
    model.close()


def test_metrics_are_deepeval_conversational_metrics_on_the_benchmark_scales(judge_model, fake_llm):
    from deepeval.metrics import BaseConversationalMetric

    context = scenario_context("user7-SD-Alarm-task-1")
    case = to_test_case(DIALOGUE, "user7-SD-Alarm-task-1")
    metrics = [
        TaskCompletionMetric(judge_model, context), PersonalizationMetric(judge_model, context, threshold=0.7),
        NaturalnessMetric(judge_model, context, side="user"), CoherenceMetric(judge_model, context, side="assistant"),
    ]
    for metric in metrics:
        assert isinstance(metric, BaseConversationalMetric)
        metric.measure(case)
    tc, pers, nat, coh = metrics
    assert (tc.raw_score, tc.score, tc.success) == (True, 1.0, True)
    assert (pers.raw_score, pers.score) == (3, pytest.approx(2 / 3))
    assert pers.success is False  # 0.667 < 0.7
    assert (nat.raw_score, nat.score, nat.reason) == (4, 0.75, "naturalness_user looks fine")
    assert (coh.raw_score, coh.score) == (4, 0.75)
    assert pers.input_tokens > 0 and pers.__name__ == "PersonaLens Personalization"
    # the judge saw the deepeval turns as the conversation, and the scenario's goal
    tc_prompt = fake_llm.requests[0]["messages"][1]["content"]
    assert "[ASSISTANT]: Done: 7:00 with birdsong, as usual." in tc_prompt and context.scenario.task.goal in tc_prompt


def test_deepeval_writes_nothing_into_the_working_tree(judge_model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    PersonalizationMetric(judge_model, scenario_context("user7-SD-Alarm-task-1")).measure(to_test_case(DIALOGUE))
    assert list(tmp_path.iterdir()) == []


def test_async_measure(judge_model):
    metric = PersonalizationMetric(judge_model, scenario_context("user7-SD-Alarm-task-1"))
    assert asyncio.run(metric.a_measure(to_test_case(DIALOGUE))) == pytest.approx(2 / 3)


def test_unparseable_answer_is_an_error_not_a_score():
    with FakeLLM(Script(judge_text="no idea")) as fake:
        model = OpenAICompatibleChat(spec="openai:x", base_url=fake.url, model="x")
        metric = CoherenceMetric(model, scenario_context("user7-SD-Alarm-task-1"))
        with pytest.raises(JudgeAnswerError):
            metric.measure(to_test_case(DIALOGUE))
    assert metric.score is None and metric.error and not metric.is_successful()


def test_bad_arguments(judge_model):
    with pytest.raises(UsageError, match="no scenario 'user7-SD-Alarm-task-9'"):
        scenario_context("user7-SD-Alarm-task-9")
    with pytest.raises(UsageError, match="side must be"):
        NaturalnessMetric(judge_model, scenario_context("user7-SD-Alarm-task-1"), side="bot")  # type: ignore[arg-type]
