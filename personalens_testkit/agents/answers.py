"""Judge answers: pydantic models, their JSON schemas, and a tolerant parser.

A backend that can constrain output gets the schema; any other answer is read
leniently (a JSON object anywhere in the text, or the paper's ``Score: N`` /
``VERDICT: True`` labels). What still does not yield a valid score raises
:class:`JudgeAnswerError` with the raw answer: never a guessed or default score.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import JudgeAnswerError, dotted


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TaskCompletionAnswer(_Answer):
    verdict: bool
    explanation: str = ""


class PersonalizationAnswer(_Answer):
    score: Literal[1, 2, 3, 4]
    observations: list[str] = Field(default_factory=list)
    justification: str = ""
    suggestions: list[str] = Field(default_factory=list)


class RatingAnswer(_Answer):
    score: Literal[1, 2, 3, 4, 5]
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
}

_FENCE = re.compile(r"```(?:json)?", flags=re.IGNORECASE)
_SCORE = re.compile(r"\bscore\b\W{0,5}([0-9]+(?:\.[0-9]+)?)", flags=re.IGNORECASE)
_VERDICT = re.compile(r"\bverdict\b\W{0,5}(true|false|yes|no)\b", flags=re.IGNORECASE)
_REASON = re.compile(r"\b(?:justification|explanation)\b\s*[:=]\s*(.+)", flags=re.IGNORECASE | re.DOTALL)


A = TypeVar("A", bound=_Answer)


def parse_answer(raw: str, model: type[A], dimension: str) -> A:
    """Parse one judge answer into ``model``; raise :class:`JudgeAnswerError` if that is impossible."""
    text = _FENCE.sub("", raw or "").strip()
    if not text:
        raise JudgeAnswerError(dimension, raw, "the answer is empty")
    problem = "no JSON object and no labelled score in the answer"
    for candidate in (_first_json_object(text), _labelled_fields(text, model)):
        if candidate is None:
            continue
        try:
            return model.model_validate(candidate)
        except ValidationError as exc:
            first = exc.errors()[0]
            problem = f"{dotted(first['loc']) or 'answer'}: {first['msg']}"
    raise JudgeAnswerError(dimension, raw, problem)


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first balanced ``{...}`` in the text that decodes to a JSON object."""
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _labelled_fields(text: str, model: type[BaseModel]) -> dict[str, Any] | None:
    """The paper's plain-text answer format: ``... Score: 3`` / ``VERDICT: True`` plus a justification."""
    reason_match = _REASON.search(text)
    reason = reason_match.group(1).strip() if reason_match else ""
    if model is TaskCompletionAnswer:
        verdict = _VERDICT.search(text)
        if verdict is None:
            return None
        return {"verdict": verdict.group(1).lower() in ("true", "yes"), "explanation": reason}
    score = _SCORE.search(text)
    if score is None:
        return None
    value = float(score.group(1))
    return {"score": int(value) if value.is_integer() else value, "justification": reason}
