"""The judge's four dimensions as deepeval ``BaseConversationalMetric`` subclasses.

The only module that imports deepeval (the rest of the testkit never does), so teams can
reuse the PersonaLens judge in their own deepeval code (without deepeval installed, importing this module is one
ImportError saying so)::

    from personalens_testkit.integrations.deepeval_metrics import PersonalizationMetric
    metric = PersonalizationMetric("openai:gpt-4o", threshold=0.5)
    case = ConversationalTestCase(turns=[Turn(role="user", content=...), ...],
                                  metadata={"personalens_context": {"user_id": "cust-4711",
                                      "preferences": {"Restaurants": {"Cuisine": "Thai"}}, "goal": "..."}})
    metric.measure(case)
    metric.raw_score   # on the benchmark's 1-4 scale
    metric.score       # the same, mapped to 0-1 for deepeval's thresholds only

The user context comes from each test case's ``metadata`` - ``personalens_context`` (a
:class:`~personalens_testkit.data.user_context.UserContext` as a dict: demographics, preferences,
interactions, situation, task, goal; all optional) or ``scenario_id`` (a benchmark scenario) - so one
``evaluate()`` covers many users; a ``context`` given to the metric (a UserContext, a dict, a scenario id
or a ScenarioContext) is used for every test case instead.

The judge model is a chat model of ours or a spec string / ``[models]`` name, resolved as a run
resolves it (the project config, ``OPENAI_BASE_URL``; see :func:`judge_model`). The metrics
survive deepeval's own copying in ``evaluate()``, ``assert_test()`` and ``deepeval test run``
(every constructor argument is kept under its own name), start every measurement from a
clean state (a failure never leaves an earlier score, success or reason behind), retry a
failed call like a run does, and show the judge the dialogue as a run does (exact imitations
of the judge's answer format taken out, see :mod:`personalens_testkit.agents.injection`).

Importing this module changes no environment variable: deepeval reads its own (its telemetry,
``DEEPEVAL_DISABLE_DOTENV``) when it is first imported - set them in your environment.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import ValidationError

try:
    from deepeval.metrics import BaseConversationalMetric
    from deepeval.test_case import ConversationalTestCase, Turn
except ModuleNotFoundError as missing:  # an environment without deepeval (a dependency, yet removable)
    if (missing.name or "").partition(".")[0] != "deepeval":
        raise
    raise ImportError("personalens_testkit.integrations.deepeval_metrics needs deepeval: "
                      "pip install 'deepeval>=3.0'", name=__name__) from None

from ..agents.calls import CallLog
from ..agents.injection import neutralise
from ..agents.judge import Judge
from ..data.context import ScenarioContext, build_context
from ..data.loader import Dataset, open_dataset
from ..data.user_context import UserContext
from ..errors import UsageError
from ..llm.base import ChatModel, Message
from ..llm.local_settings import LocalServerSettings
from ..llm.registry import create_model
from ..llm.retry import RetryPolicy
from ..scales import (
    COHERENCE_ASSISTANT, COHERENCE_USER, NATURALNESS_ASSISTANT, NATURALNESS_USER, PERSONALIZATION,
    TASK_COMPLETION, Metric,
)
from ..settings import resolve_settings

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


ContextLike = Union[ScenarioContext, UserContext, dict, str]


def as_context(given: ContextLike) -> Any:
    """What the judge reads, from a scenario context, a UserContext, its dict form, or a benchmark scenario id."""
    if isinstance(given, ScenarioContext):
        return given
    if isinstance(given, str):
        return scenario_context(given)
    try:
        context = given if isinstance(given, UserContext) else UserContext.model_validate(given)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"personalens_context: {'.'.join(map(str, first['loc'])) or 'context'}: "
                         f"{str(first['msg']).removeprefix('Value error, ')}") from None
    return context.judged()


def to_messages(test_case: ConversationalTestCase) -> list[Message]:
    return [Message(turn.role, turn.content) for turn in test_case.turns]


def to_test_case(messages: list[Message], scenario_id: str | None = None) -> ConversationalTestCase:
    return ConversationalTestCase(
        turns=[Turn(role=m.role, content=m.content) for m in messages if m.role in ("user", "assistant")],
        name=scenario_id,
    )


def judge_model(spec: str, *, project: str | Path | None = None) -> ChatModel:
    """The chat model a spec string (``openai:gpt-4o``, ``bedrock:...``) or a ``[models]`` entry name stands
    for, resolved by the settings as a run resolves it: the project's config (``project``, default the current
    folder; its ``[models]``, ``[local]`` and OpenAI endpoint), then the environment (``OPENAI_BASE_URL``, the key
    variable the config names). The embedded model needs a running server: ``personalens serve-model``, then
    ``PERSONALENS_LOCAL_URL``."""
    settings = resolve_settings({"judge_model": spec}, Path(project or "."), os.environ)

    def local_url_for(local: LocalServerSettings, role: str) -> str:
        if not settings.local_url:
            raise UsageError("the embedded judge needs a running server: start `personalens serve-model` and set "
                             "PERSONALENS_LOCAL_URL to the address it prints")
        return settings.local_url.rstrip("/")

    return create_model(settings.judge_model, settings.model_context(local_url_for), "judge")


class _PersonaLensMetric(BaseConversationalMetric):
    metric: Metric

    def __init__(self, model: ChatModel | str, context: ContextLike | None = None, threshold: float = 0.5,
                 retries: int = 3) -> None:
        # every argument is kept under its own name: deepeval rebuilds a metric from them (copy_metrics)
        self.model = model
        self.context = context
        self.threshold = threshold
        self.retries = retries
        self._chat = judge_model(model) if isinstance(model, str) else model
        self.include_reason = True
        self.async_mode = True
        self.strict_mode = False
        self.verbose_mode = False
        self.evaluation_model = self._chat.spec
        self._reset()

    def _reset(self) -> None:
        """A measurement starts clean: nothing of an earlier one (a score, a success, an error) remains."""
        self.score: float | None = None
        self.raw_score: int | bool | None = None
        self.success: bool | None = None
        self.reason: str | None = None
        self.error: str | None = None
        self.input_tokens = self.output_tokens = 0
        self.evaluation_cost = None
        self.verbose_logs = None

    def _judge(self, judge: Judge, context: Any, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        raise NotImplementedError

    def context_for(self, test_case: ConversationalTestCase) -> Any:
        """The user context of this test case: the metric's own, else the test case's metadata."""
        given = self.context
        if given is None:
            metadata = getattr(test_case, "metadata", None) or vars(test_case).get("additional_metadata") or {}
            given = metadata.get("personalens_context") or metadata.get("scenario_id")
        if given is None:
            raise UsageError("no user context for this test case: give the metric a context, or put one in the test "
                             "case's metadata['personalens_context'] (or its 'scenario_id')")
        return as_context(given)

    def measure(self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any) -> float:
        self._reset()
        log = CallLog(retry=RetryPolicy(attempts=self.retries + 1))
        try:
            context = self.context_for(test_case)
            raw, reason = self._judge(Judge(self._chat), context, neutralise(to_messages(test_case)), log)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.success = False
            raise
        finally:
            self.input_tokens = sum(r.prompt_tokens or 0 for r in log.records)
            self.output_tokens = sum(r.completion_tokens or 0 for r in log.records)
        self.raw_score = raw
        self.score = normalise(self.metric, raw)
        self.reason = reason
        self.success = self.score >= self.threshold
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

    def _judge(self, judge: Judge, context: Any, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        answer = judge.task_completion(context, messages, log)
        return answer.verdict, answer.explanation


class PersonalizationMetric(_PersonaLensMetric):
    """The paper's 1-4 personalization scale (poor, basic, strong, exceptional)."""

    metric = PERSONALIZATION

    def _judge(self, judge: Judge, context: Any, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        answer = judge.personalization(context, messages, log)
        return answer.score, answer.justification


class _RatedSide(_PersonaLensMetric):
    sides: dict[str, Metric]

    def __init__(self, model: ChatModel | str, context: ContextLike | None = None, side: Side = "assistant",
                 threshold: float = 0.5, retries: int = 3) -> None:
        if side not in self.sides:
            raise UsageError(f"side must be 'user' or 'assistant' (got {side!r})")
        super().__init__(model, context, threshold, retries)
        self.side = side  # kept: deepeval's copy passes it back, so the copy judges the same side
        self.metric = self.sides[side]

    def _judge(self, judge: Judge, context: Any, messages: list[Message], log: CallLog) -> tuple[int | bool, str]:
        answer = judge.rating(self.metric, messages, log)
        return answer.score, answer.justification


class NaturalnessMetric(_RatedSide):
    """1-5 naturalness of one side's messages (``side="assistant"`` or ``"user"``)."""

    sides = {"user": NATURALNESS_USER, "assistant": NATURALNESS_ASSISTANT}


class CoherenceMetric(_RatedSide):
    """1-5 coherence of one side's messages (``side="assistant"`` or ``"user"``)."""

    sides = {"user": COHERENCE_USER, "assistant": COHERENCE_ASSISTANT}


__all__ = [
    "CoherenceMetric", "NaturalnessMetric", "PersonalizationMetric", "TaskCompletionMetric", "UserContext", "as_context",
    "judge_model", "normalise", "scenario_context", "to_messages", "to_test_case",
]
