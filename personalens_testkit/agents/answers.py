"""Judge answers: pydantic models, their JSON schemas, and the parser that reads the judge's one answer.

A backend that can constrain output gets the schema, and its answer is one JSON object. Any
answer is read by one structural grammar (:mod:`.answer_grammar`): exactly one answer - one JSON
object, or the paper's one label line (``Personalization Score: 3``, ``VERDICT: True``) - standing
last, after any reasoning, with reasons that give no value. The object then holds exactly the
schema's keys, with a value of the exact type: a score is a JSON integer on the rubric's scale (not
``true``, ``"3"`` or ``3.0``), a verdict a JSON boolean.

Whatever does not yield one valid score raises :class:`JudgeAnswerError` with the raw answer:
never a guessed, first-found, last-found or default score.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from ..errors import JudgeAnswerError, dotted
from ..scales import METRICS, PERSONALIZATION, Metric
from .answer_grammar import GrammarError, Shape, payload
from .user_faults import REVIEW_KINDS


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    #: the key that holds the answer itself, and the one that holds the judge's reason for it
    KEY: ClassVar[str] = "score"
    REASON: ClassVar[str] = "justification"

    @property
    def value(self) -> Any:
        """The answer itself: the score, or the verdict."""
        return getattr(self, self.KEY)

    @property
    def reason(self) -> str:
        return getattr(self, self.REASON)

    @field_validator("explanation", "justification", mode="before", check_fields=False)
    @classmethod
    def _reason_text(cls, value: Any) -> str:
        return _text(value)  # a reason never decides a score: any JSON value is kept as text

    @field_validator("observations", "suggestions", mode="before", check_fields=False)
    @classmethod
    def _notes(cls, value: Any) -> list[str]:
        if value is None:
            return []
        return [_text(item) for item in value] if isinstance(value, list) else [_text(value)]


def _whole_number(value: Any) -> int:
    """A score must be a JSON integer: not a boolean, a float or a string."""
    if type(value) is not int:
        raise ValueError(f"must be a whole number (got {json.dumps(value) if _jsonable(value) else repr(value)})")
    return value


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class TaskCompletionAnswer(_Answer):
    KEY: ClassVar[str] = "verdict"
    REASON: ClassVar[str] = "explanation"

    verdict: bool
    explanation: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _boolean(cls, value: Any) -> bool:
        if type(value) is not bool:
            raise ValueError(f"must be true or false (got {json.dumps(value) if _jsonable(value) else repr(value)})")
        return value


class PersonalizationAnswer(_Answer):
    score: Literal[1, 2, 3, 4]
    observations: list[str] = Field(default_factory=list)
    justification: str = ""
    suggestions: list[str] = Field(default_factory=list)

    @field_validator("score", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> int:
        return _whole_number(value)


class RatingAnswer(_Answer):
    #: the top of its scale (a dimension rated on another scale has a model of its own: :func:`rating_answer`)
    TOP: ClassVar[int] = 5

    score: Literal[1, 2, 3, 4, 5]
    justification: str = ""

    @field_validator("score", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> int:
        return _whole_number(value)


class TurnScoresAnswer(_Answer):
    """Turn-level personalization in one answer: one score per assistant reply, in order."""

    KEY: ClassVar[str] = "scores"

    scores: list[int]
    justification: str = ""
    #: the raw answer, for an error that is found after parsing (a wrong number of scores)
    raw: str = ""

    @field_validator("scores", mode="before")
    @classmethod
    def _each_a_score(cls, value: Any) -> list[int]:
        if not isinstance(value, list) or not value:
            raise ValueError(f"must be a list of whole numbers from 1 to 4 (got {json.dumps(value) if _jsonable(value) else repr(value)})")
        for item in value:
            if _whole_number(item) not in (1, 2, 3, 4):
                raise ValueError(f"every score must be 1, 2, 3 or 4 (got {item})")
        return value


class ReviewFault(BaseModel):
    """One fault a review found in the user agent's turns: the user turn (0: the opening query), what it broke and
    which way it moved the verdict on the bot."""

    model_config = ConfigDict(extra="forbid")

    turn: int = Field(ge=0)
    rule: Literal[tuple(REVIEW_KINDS)]  # type: ignore[valid-type]
    direction: Literal["hindered", "helped"]


class UserReviewAnswer(_Answer):
    """A review of the user agent's turns (``--review-user``): its faults, and which side made the first critical
    error of the dialogue (``user``, ``assistant`` or ``none``)."""

    KEY: ClassVar[str] = "faults"

    faults: list[ReviewFault]
    first_error: Literal["user", "assistant", "none"]
    justification: str = ""


def _strict_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_TEXT = {"type": "string"}
_NOTES = {"type": "array", "items": {"type": "string"}, "maxItems": 3}

SCHEMAS: dict[type[_Answer], dict[str, Any]] = {
    TaskCompletionAnswer: _strict_schema({"verdict": {"type": "boolean"}, "explanation": _TEXT}),
    PersonalizationAnswer: _strict_schema({
        "score": {"type": "integer", "enum": [1, 2, 3, 4]},
        "observations": _NOTES, "justification": _TEXT, "suggestions": _NOTES,
    }),
    RatingAnswer: _strict_schema({"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}, "justification": _TEXT}),
    TurnScoresAnswer: _strict_schema({"scores": {"type": "array", "items": {"type": "integer", "enum": [1, 2, 3, 4]}},
                                      "justification": _TEXT}),
    UserReviewAnswer: _strict_schema({
        "faults": {"type": "array", "maxItems": 30, "items": _strict_schema({
            "turn": {"type": "integer", "minimum": 0}, "rule": {"type": "string", "enum": list(REVIEW_KINDS)},
            "direction": {"type": "string", "enum": ["hindered", "helped"]}})},
        "first_error": {"type": "string", "enum": ["user", "assistant", "none"]}, "justification": _TEXT}),
}


@cache
def rating_answer(low: int, high: int) -> type[RatingAnswer]:
    """The answer of a dimension rated from ``low`` to ``high`` (the benchmark's ratings are 1-5: :class:`RatingAnswer`)."""
    if (low, high) == (1, 5):
        return RatingAnswer
    levels = tuple(range(low, high + 1))
    model = create_model(f"RatingAnswer{low}to{high}", __base__=RatingAnswer, score=(Literal[levels], ...))
    model.TOP = high
    SCHEMAS[model] = _strict_schema({"score": {"type": "integer", "enum": list(levels)}, "justification": _TEXT})
    return model


def answer_model(metric: Metric) -> type[_Answer]:
    """How the judge answers for ``metric``: a verdict, the personalization answer (with its observations and
    suggestions), or a rating on the metric's scale."""
    if metric.kind == "bool":
        return TaskCompletionAnswer
    if metric.name == PERSONALIZATION.name:
        return PersonalizationAnswer
    return rating_answer(metric.low, metric.high)


def turn_scores_schema(turns: int) -> dict[str, Any]:
    """The schema of a turn-level answer for a dialogue of ``turns`` assistant replies: exactly that many scores."""
    schema = json.loads(json.dumps(SCHEMAS[TurnScoresAnswer]))
    schema["properties"]["scores"].update(minItems=turns, maxItems=turns)
    return schema

def review_schema(user_turns: int) -> dict[str, Any]:
    """The schema of a review of a dialogue of ``user_turns`` user turns: each fault names one of them (0 to
    ``user_turns - 1``), at most two faults a turn (and at most the grammar's 30): a model that lists faults on and on
    ends its answer within its token budget instead of being cut off."""
    schema = json.loads(json.dumps(SCHEMAS[UserReviewAnswer]))
    faults = schema["properties"]["faults"]
    faults["maxItems"] = min(faults["maxItems"], 2 * max(1, user_turns))
    faults["items"]["properties"]["turn"] = {"type": "integer", "enum": list(range(max(1, user_turns)))}
    return schema


A = TypeVar("A", bound=_Answer)
#: a longer answer is not read (a judge answers in at most a few thousand tokens)
MAX_ANSWER_CHARS = 100_000


def parse_answer(raw: str, model: type[A], dimension: str) -> A:
    """Parse one judge answer into ``model``; raise :class:`JudgeAnswerError` unless it has one clear answer."""
    text = raw or ""
    if not text.strip():
        raise JudgeAnswerError(dimension, raw, "the answer is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise JudgeAnswerError(dimension, raw, f"the answer has {len(text):,} characters: more than any judge answer "
                                               f"({MAX_ANSWER_CHARS:,})")
    try:
        found = payload(text, _shape(model, dimension))
    except GrammarError as exc:
        error = JudgeAnswerError(dimension, raw, str(exc))
        error.free_text = exc.free_text
        raise error from None
    return _validated(found, model, dimension, raw)


@cache
def _shape(model: type[_Answer], dimension: str) -> Shape:
    """What the grammar reads for ``model``: its key, the names its label may carry, its scale's top, its reasons
    (made once for each model and dimension)."""
    reasons = frozenset(SCHEMAS[model]["properties"]) - {model.KEY}
    if model is TaskCompletionAnswer:
        return Shape(key="verdict", names=frozenset(), top=1, reason_key="explanation", reasons=reasons)
    if model is TurnScoresAnswer:
        return Shape(key="scores", names=frozenset(), top=4, labelled=False, reasons=reasons)
    if model is UserReviewAnswer:  # a list of faults, never a number on a scale: its reason may name turns
        return Shape(key="faults", names=frozenset(), top=0, labelled=False, reasons=reasons)
    if model is PersonalizationAnswer:
        return Shape(key="score", names=frozenset({"personalization", "personalisation"}), top=4,
                     level_scale="personalization", reasons=reasons)
    rated = _RATED_WORDS
    word = dimension.replace("_", " ").split()[0].lower() if dimension.strip() else ""
    top = model.TOP if issubclass(model, RatingAnswer) else 5
    return Shape(key="score", names=frozenset({word} if word in rated else rated), top=top, level_scale=word,
                 reasons=reasons)


#: the names a rating's label may carry (``Naturalness Score: 4``): the first word of each rated dimension's name
_RATED_WORDS = frozenset(m.name.split("_")[0] for m in METRICS if m.kind == "int" and m.name != PERSONALIZATION.name)


def _validated(candidate: dict[str, Any], model: type[A], dimension: str, raw: str) -> A:
    known = set(SCHEMAS[model]["properties"])
    unknown = [key for key in candidate if key not in known]
    if unknown:
        raise JudgeAnswerError(dimension, raw, f"unexpected key {unknown[0]!r} (an answer holds "
                                               f"{', '.join(repr(k) for k in SCHEMAS[model]['properties'])})")
    try:
        if model is TurnScoresAnswer:
            candidate = {**candidate, "raw": raw}
        return model.model_validate(candidate)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        raise JudgeAnswerError(dimension, raw, f"{dotted(first['loc']) or 'answer'}: {message}") from None
