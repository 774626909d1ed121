"""The judge's four dimensions as deepeval ``BaseConversationalMetric`` subclasses.

The only module that imports deepeval (the rest of the testkit never does), so teams can
reuse the PersonaLens judge in their own deepeval code::

    from personalens_testkit.agents.deepeval_metrics import PersonalizationMetric, scenario_context
    metric = PersonalizationMetric(model, scenario_context("user7-SD-Alarm-task-1"), threshold=0.5)
    metric.measure(ConversationalTestCase(turns=[Turn(role="user", content=...), ...]))
    metric.raw_score   # on the benchmark's 1-4 scale
    metric.score       # the same, mapped to 0-1 for deepeval's thresholds only

Importing it turns deepeval's telemetry and .env loading off unless the environment
already says otherwise.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Literal

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from deepeval.metrics import BaseConversationalMetric  # noqa: E402
from deepeval.test_case import ConversationalTestCase, Turn  # noqa: E402

from ..data.context import ScenarioContext, build_context  # noqa: E402
from ..data.loader import Dataset, open_dataset  # noqa: E402
from ..errors import JudgeAnswerError, UsageError  # noqa: E402
from ..llm.base import ChatModel, Message  # noqa: E402
from ..scales import (  # noqa: E402
    COHERENCE_ASSISTANT, COHERENCE_USER, NATURALNESS_ASSISTANT, NATURALNESS_USER, PERSONALIZATION,
    TASK_COMPLETION, Metric,
)
from .calls import CallLog  # noqa: E402
from .judge import Judge  # noqa: E402

Side = Literal["user", "assistant"]


def scenario_context(scenario_id: str, dataset: Dataset | None = None) -> ScenarioContext:
    """Everything the judge needs to know about a scenario, by its id (``user7-SD-Alarm-task-1``)."""
    dataset = dataset or open_dataset()
    user_id = scenario_id.split("-", 1)[0]
    number = user_id.removeprefix("user")
    if not number.isdigit():
        raise UsageError(f"{scenario_id!r} is not a scenario id (like user7-SD-Alarm-task-1)")
    for scenario in dataset.scenarios_for(int(number)):
        if scenario.scenario_id == scenario_id:
            return build_context(dataset, scenario)
    raise UsageError(f"no scenario {scenario_id!r} in {dataset.label}")


def to_messages(test_case: ConversationalTestCase) -> list[Message]:
    return [Message(turn.role, turn.content) for turn in test_case.turns]


def to_test_case(messages: list[Message], scenario_id: str | None = None) -> ConversationalTestCase:
    return ConversationalTestCase(
        turns=[Turn(role=m.role, content=m.content) for m in messages if m.role in ("user", "assistant")],
        name=scenario_id,
    )


class _PersonaLensMetric(BaseConversationalMetric):
    metric: Metric

    def __init__(self, model: ChatModel, context: ScenarioContext, threshold: float = 0.5) -> None:
        self.model = model
        self.context = context
        self.threshold = threshold
        self.include_reason = True
        self.async_mode = True
        self.strict_mode = False
        self.verbose_mode = False
        self.evaluation_model = model.spec
        self.raw_score: int | bool | None = None
        self.error = None

    def _judge(self, judge: Judge, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        raise NotImplementedError

    def measure(self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any) -> float:
        log = CallLog()
        try:
            raw, reason = self._judge(Judge(self.model), to_messages(test_case), log)
        except JudgeAnswerError as exc:
            self.error = str(exc)
            self.success = False
            raise
        self.raw_score = raw
        self.score = normalise(self.metric, raw)
        self.reason = reason
        self.success = self.score >= self.threshold
        self.input_tokens = sum(r.prompt_tokens or 0 for r in log.records)
        self.output_tokens = sum(r.completion_tokens or 0 for r in log.records)
        return self.score

    async def a_measure(self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any) -> float:
        return await asyncio.to_thread(self.measure, test_case)

    def is_successful(self) -> bool:
        return bool(self.success) and self.error is None

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return f"PersonaLens {self.metric.title}"


def normalise(metric: Metric, raw: int | bool) -> float:
    """A score on the benchmark's scale mapped to 0-1 (for deepeval's threshold only)."""
    if metric.kind == "bool":
        return 1.0 if raw else 0.0
    return (int(raw) - metric.low) / (metric.high - metric.low)


class TaskCompletionMetric(_PersonaLensMetric):
    """Did the dialogue meet the task's goal? ``raw_score`` is True/False; ``score`` 1.0/0.0."""

    metric = TASK_COMPLETION

    def _judge(self, judge: Judge, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        answer = judge.task_completion(self.context, messages, log)
        return answer.verdict, answer.explanation


class PersonalizationMetric(_PersonaLensMetric):
    """The paper's 1-4 personalization scale (poor, basic, strong, exceptional)."""

    metric = PERSONALIZATION

    def _judge(self, judge: Judge, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        answer = judge.personalization(self.context, messages, log)
        return answer.score, answer.justification


class _RatedSide(_PersonaLensMetric):
    sides: dict[str, Metric]

    def __init__(self, model: ChatModel, context: ScenarioContext, side: Side = "assistant", threshold: float = 0.5) -> None:
        super().__init__(model, context, threshold)
        if side not in self.sides:
            raise UsageError(f"side must be 'user' or 'assistant' (got {side!r})")
        self.metric = self.sides[side]

    def _judge(self, judge: Judge, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        answer = judge.rating(self.metric, messages, log)
        return answer.score, answer.justification


class NaturalnessMetric(_RatedSide):
    """1-5 naturalness of one side's messages (``side="assistant"`` or ``"user"``)."""

    sides = {"user": NATURALNESS_USER, "assistant": NATURALNESS_ASSISTANT}


class CoherenceMetric(_RatedSide):
    """1-5 coherence of one side's messages (``side="assistant"`` or ``"user"``)."""

    sides = {"user": COHERENCE_USER, "assistant": COHERENCE_ASSISTANT}


__all__ = [
    "CoherenceMetric", "NaturalnessMetric", "PersonalizationMetric", "TaskCompletionMetric", "normalise",
    "scenario_context", "to_messages", "to_test_case",
]
