"""The judge: scores one finished dialogue on the benchmark's dimensions.

One call per dimension, as in the paper: task completion (against the task goal),
personalization (with everything known about the user), and naturalness and coherence
of the user's and of the assistant's messages. Every call starts with the same system
prompt and conversation, so a prefix cache serves all six from one prefill.

The six calls are independent: with ``parallel`` above 1 (a remote judge) they are made
at once, so judging takes one call's time instead of six; an embedded judge takes them
one after the other (its server answers one request at a time, from the shared prefix).
"""

from __future__ import annotations

from concurrent.futures import wait
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Callable, Collection, Sequence, TypeVar

from pydantic import BaseModel

from ..data.context import ScenarioContext
from ..llm.base import ChatModel, ChatRequest, Message
from ..timebox import DaemonPool
from ..scales import METRIC_NAMES, METRICS, PERSONALIZATION, TASK_COMPLETION, Metric, Scores
from ..errors import JudgeAnswerError
from .answers import (
    SCHEMAS, PersonalizationAnswer, RatingAnswer, TaskCompletionAnswer, TurnScoresAnswer, UserReviewAnswer, answer_model,
    parse_answer, review_schema, turn_scores_schema,
)
from .calls import CallLog
from .injection import neutralise
from ..prompts.render import (
    bullet_pairs, demographics_block, dialogue_block, fill, interactions_block, preferences_block, situation_block,
    template,
)

JUDGE_TEMPERATURE = 0.0
#: the paper's answer budget for its judge
JUDGE_MAX_TOKENS = 4000
#: the order of a dialogue's judge calls (and of their entries in the call log): every dimension of
#: :data:`~personalens_testkit.scales.METRICS`, in its order
JUDGED_ORDER = METRIC_NAMES
#: what a call's label ends with when the judge is asked again, once, after a free-text answer the grammar refused
ASKED_AGAIN = " (asked again)"

A = TypeVar("A", bound=BaseModel)


class Verdict(BaseModel):
    scores: Scores
    #: the judge's reason for each metric, keyed by metric name
    reasons: dict[str, str]
    observations: list[str] = []
    suggestions: list[str] = []
    #: the dimensions whose answer could not be read, and why (their score is None)
    unreadable: dict[str, str] = {}


def _readable_or_why(ask: Callable[[], A]) -> Callable[[], A | JudgeAnswerError]:
    def answer() -> A | JudgeAnswerError:
        try:
            return ask()
        except JudgeAnswerError as exc:
            return exc
    return answer


@dataclass
class Judge:
    model: ChatModel
    #: how many of a dialogue's six judge calls are made at once (1: one after the other)
    parallel: int = 1
    #: how turn-level personalization is judged: ``chain`` (the paper's one chain-of-turn call) or ``per-turn`` (one
    #: call per assistant reply); the choices are the ``turn_level_method`` setting's
    turn_method: str = "chain"

    def ask(self, metric: Metric, ctx: ScenarioContext | None, messages: Sequence[Message], log: CallLog, *,
            label: str | None = None, turn: int = 0, conversation: str | None = None) -> Any:
        """One dimension's answer (:func:`~.answers.answer_model`): its prompt template, filled with what it uses,
        after the conversation (``conversation``: :func:`judged_conversation` of ``messages``, made by the caller
        that asks several dimensions about them)."""
        return self._ask(messages, metric, answer_model(metric), rubric(metric, ctx), log, label=label, turn=turn,
                         conversation=conversation)

    def task_completion(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog) -> TaskCompletionAnswer:
        return self.ask(TASK_COMPLETION, ctx, messages, log)

    def personalization(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog, *,
                        label: str | None = None, turn: int = 0) -> PersonalizationAnswer:
        return self.ask(PERSONALIZATION, ctx, messages, log, label=label, turn=turn)

    def rating(self, metric: Metric, messages: Sequence[Message], log: CallLog) -> RatingAnswer:
        """A rated side (naturalness, coherence): its prompt reads nothing of the scenario."""
        return self.ask(metric, None, messages, log)

    def judge(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog) -> Verdict:
        """The six scores. The judge reads the dialogue with assistant text addressed to it removed
        (see :mod:`.injection`): a bot cannot talk its way to a better score. Every dimension is asked; when
        any answer is unreadable, the first unreadable one's :class:`JudgeAnswerError` is raised with the readable ones attached
        (its ``partial``)."""
        answers = self._answers(JUDGED_ORDER, ctx, messages, log)
        failed = {name: a for name, a in answers.items() if isinstance(a, JudgeAnswerError)}
        read = {name: a for name, a in answers.items() if name not in failed}
        pers = read.get(PERSONALIZATION.name)
        reasons = {name: a.reason for name, a in read.items()}
        scores = Scores(**{name: None if name in failed else a.value for name, a in answers.items()})
        verdict = Verdict(scores=scores, reasons=reasons, observations=pers.observations if pers else [],
                          suggestions=pers.suggestions if pers else [],
                          unreadable={name: str(exc) for name, exc in failed.items()})
        if failed:
            first = next(iter(failed.values()))
            first.partial = verdict
            raise first
        return verdict

    def dimensions(self, names: Collection[str], ctx: ScenarioContext, messages: Sequence[Message],
                   log: CallLog) -> dict[str, Any]:
        """Only these dimensions, asked as :meth:`judge` asks them: each one's value, or its
        :class:`JudgeAnswerError` when its answer was unreadable; any other failure is raised."""
        return {name: a if isinstance(a, JudgeAnswerError) else a.value
                for name, a in self._answers(names, ctx, messages, log).items()}

    def _answers(self, names: Collection[str], ctx: ScenarioContext, messages: Sequence[Message],
                 log: CallLog) -> dict[str, Any]:
        """These dimensions' answers (an unreadable one as its :class:`JudgeAnswerError`), in the judged order, about
        the dialogue with assistant text addressed to the judge removed."""
        messages = neutralise(messages)
        conversation = judged_conversation(messages)  # the same for every dimension: made once
        chosen = [metric for metric in METRICS if metric.name in names]
        asks: list[Callable[[], Any]] = [
            lambda metric=metric: self.ask(metric, ctx, messages, log, conversation=conversation) for metric in chosen]
        return {metric.name: answer for metric, answer in zip(chosen, self._all(asks, log))}

    def _all(self, asks: Sequence[Callable[[], Any]], log: CallLog) -> list[Any]:
        """Every ask's answer, in order - an unreadable one as its :class:`JudgeAnswerError`, so every dimension
        is asked whatever another answered; at most ``parallel`` at once, each in a copy of this thread's
        context (its cassette, its error explainer). The log keeps the calls in the order asked
        (:data:`JUDGED_ORDER`), and the first other failure in that order is raised once all are done."""
        asks = [_readable_or_why(ask) for ask in asks]
        if self.parallel <= 1:
            return [ask() for ask in asks]
        first = len(log.records)
        pool = DaemonPool(min(self.parallel, len(asks)), name="judge")
        try:
            futures = [pool.submit(ask) for ask in asks]
            wait(futures)
        finally:
            pool.close()
        rank = {label: i for i, label in enumerate(JUDGED_ORDER)}
        log.records[first:] = sorted(log.records[first:], key=lambda record: rank.get(record.label.removesuffix(ASKED_AGAIN), len(rank)))
        return [future.result() for future in futures]

    def turn_level(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog) -> list[int]:
        """Personalization after each assistant reply (the paper's turn-level curve): by default in one call
        that scores every prefix of the dialogue (the paper's chain-of-turn prompt), or one call per reply."""
        messages = neutralise(messages)
        replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
        if not replies:
            return []
        if self.turn_method == "chain":
            return self._chain_of_turns(ctx, messages, len(replies), log)
        scores = []
        for turn, index in enumerate(replies, start=1):
            answer = self.personalization(ctx, messages[: index + 1], log, label=f"personalization after turn {turn}", turn=turn)
            scores.append(answer.score)
        return scores

    def _chain_of_turns(self, ctx: ScenarioContext, messages: Sequence[Message], turns: int, log: CallLog) -> list[int]:
        rubric = fill("judge_personalization_turns", scale=personalization_scale(ctx), turns=str(turns))
        schema = turn_scores_schema(turns)
        answer = self._ask(messages, PERSONALIZATION, TurnScoresAnswer, rubric, log, label="personalization by turn",
                           schema=schema)
        if len(answer.scores) != turns:
            raise JudgeAnswerError("personalization by turn", answer.raw, f"{len(answer.scores)} scores for {turns} "
                                                                          "assistant replies (one per reply expected)")
        return list(answer.scores)

    def preference_leak(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog) -> TaskCompletionAnswer:
        """Whether the user agent's opening message states preferences it should leave implicit (verdict true = leaked).
        The judge reads the whole conversation, as upstream's prompt gives it (``util/evaluation_prompts.py:165``), and is
        told to weigh the user's first message only."""
        conversation = judged_conversation(messages)
        prompt = fill("judge_preference_leak", preferences=preferences_block(ctx), intent=ctx.intent)
        request = judge_request(conversation, prompt, SCHEMAS[TaskCompletionAnswer], "preference_leak")
        response = log.chat(self.model, request, role="judge", label="preference leak", turn=0)
        return parse_answer(response.text, TaskCompletionAnswer, "preference_leak")

    def review_user(self, ctx: ScenarioContext, messages: Sequence[Message], log: CallLog) -> UserReviewAnswer:
        """A review of the user agent's turns (``--review-user``): its faults against the profile it was given (its
        demographics, the task's preferences and past interactions, its situation), its task and the protocol, each
        with its direction, and the side that made the first critical error. A call of the reviewer's role (its model:
        ``--review-user-model``), asked through the judge's answer grammar."""
        conversation = judged_conversation(messages)
        profile = (f"Demographics:\n{demographics_block(ctx)}\n\nPreferences:\n{preferences_block(ctx)}\n\n"
                   f"Past interactions:\n{interactions_block(ctx.interactions)}\n\nSituation:\n{situation_block(ctx)}")
        prompt = fill("judge_user_review", profile=profile, intent=ctx.intent)
        request = judge_request(conversation, prompt, review_schema(sum(m.role == "user" for m in messages)),
                                "user_review")
        response = log.chat(self.model, request, role="reviewer", label="user review", turn=0)
        return parse_answer(response.text, UserReviewAnswer, "user_review")

    def _ask(self, messages: Sequence[Message], metric: Metric, answer: type[A], rubric: str, log: CallLog, *,
             label: str | None = None, turn: int = 0, schema: dict[str, Any] | None = None,
             conversation: str | None = None) -> A:
        if conversation is None:
            conversation = judged_conversation(messages)
        request = judge_request(conversation, rubric, schema or SCHEMAS[answer], metric.name)
        label = label or metric.name
        response = log.chat(self.model, request, role="judge", label=label, turn=turn)
        try:
            return parse_answer(response.text, answer, label)
        except JudgeAnswerError as exc:
            if not exc.free_text:
                raise
            # free text the grammar refused: asked once more, with the refused answer and the format restated
            again = replace(request, messages=request.messages + (
                Message("assistant", response.text), Message("user", fill("judge_ask_again", problem=exc.problem))))
            response = log.chat(self.model, again, role="judge", label=label + ASKED_AGAIN, turn=turn)
            return parse_answer(response.text, answer, label)


def judge_request(conversation: str, rubric: str, schema: dict[str, Any], name: str) -> ChatRequest:
    """One judge call's request: the conversation (the part a provider may cache), then the rubric; the answer's
    schema by ``name``."""
    return ChatRequest(
        messages=(Message("system", fill("judge_system")),
                  Message("user", conversation + rubric, cache_prefix=len(conversation))),
        purpose="judge", temperature=JUDGE_TEMPERATURE, max_tokens=JUDGE_MAX_TOKENS, json_schema=schema, schema_name=name,
    )


def judged_conversation(messages: Sequence[Message]) -> str:
    """The dialogue as a judge prompt opens with it (the part of the prompt a provider may cache)."""
    return fill("judge_conversation", dialogue=dialogue_block(messages))


#: what a dimension's prompt template may use, each made only when its template uses it
_PROMPT_VALUES: dict[str, Callable[[Metric, ScenarioContext], str]] = {
    "goal": lambda metric, ctx: ctx.goal,
    "scale": lambda metric, ctx: personalization_scale(ctx),
    "side": lambda metric, ctx: metric.side.upper(),
}


@cache
def _uses(prompt: str) -> frozenset[str]:
    """What a judge prompt template uses, read and checked once a process (every judge call fills one)."""
    wanted = frozenset(template(prompt).get_identifiers())
    unknown = sorted(wanted - set(_PROMPT_VALUES))
    if unknown:
        raise ValueError(f"prompt template {prompt}.txt uses ${unknown[0]}: a judge prompt may use "
                         f"{', '.join('$' + name for name in _PROMPT_VALUES)}")
    return wanted


def rubric(metric: Metric, ctx: ScenarioContext | None) -> str:
    """``metric``'s prompt template filled (:attr:`~personalens_testkit.scales.Metric.prompt`); ``ctx`` may be None
    for a template that reads nothing of the scenario."""
    wanted = _uses(metric.prompt)
    return fill(metric.prompt, **{name: make(metric, ctx) for name, make in _PROMPT_VALUES.items()  # type: ignore[arg-type]
                                  if name in wanted})


def judge_demographics_block(ctx: ScenarioContext) -> str:
    """The demographics as the paper's judge reads them: the profile's user id first (upstream's judge
    sees it; its user agent does not)."""
    return bullet_pairs([("user_id", ctx.user_id), *ctx.demographics.items()])


def personalization_scale(ctx: ScenarioContext) -> str:
    """The personalization rubric with its worked examples and everything known about the user."""
    return fill("judge_personalization_scale", demographics=judge_demographics_block(ctx),
                preferences=preferences_block(ctx), task=ctx.intent,
                interactions=interactions_block(ctx.interactions), situation=situation_block(ctx))
