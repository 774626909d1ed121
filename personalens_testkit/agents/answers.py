"""Judge answers: pydantic models, their JSON schemas, and the parser that reads the judge's final answer.

A backend that can constrain output gets the schema, and its answer is one JSON object.
Any other answer is read for its *final* answer, never its first: the JSON objects that
carry the answer's key (``score``, ``verdict``) and the paper's labels (``Personalization
Score: 3``, ``VERDICT: True``) outside them, in the order they appear.

- One value throughout (however often it is repeated): that is the answer.
- Different values (a judge that thinks aloud, or quotes the assistant's own
  ``{"score": 4}`` before its answer): the last one counts only when it is marked final
  ("Final answer: Score: 1", "Final VERDICT: no"); otherwise the answer is ambiguous.
- A hedged value ("3 or 4", "3-4", "3.5", "3/5" on a 1-4 scale), a value of the wrong type
  (``{"score": true}``, ``"3"``, ``3.0``), two ``score`` keys in one object: not an answer.

Whatever does not yield one valid score raises :class:`JudgeAnswerError` with the raw answer:
never a guessed, first-found or default score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import JudgeAnswerError, dotted


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    #: the key that holds the answer itself
    KEY: ClassVar[str] = "score"

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
}


def turn_scores_schema(turns: int) -> dict[str, Any]:
    """The schema of a turn-level answer for a dialogue of ``turns`` assistant replies: exactly that many scores."""
    schema = json.loads(json.dumps(SCHEMAS[TurnScoresAnswer]))
    schema["properties"]["scores"].update(minItems=turns, maxItems=turns)
    return schema

A = TypeVar("A", bound=_Answer)
#: a longer answer is not read (a judge answers in at most a few thousand tokens)
MAX_ANSWER_CHARS = 100_000
#: at most this many places are tried as the start of a JSON object (bounds the work on hostile text)
MAX_JSON_STARTS = 2_000

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", flags=re.DOTALL)
#: a labelled score: "Score: 3", "score 3", "Personalization Score = 3", "rating is 3", "score of 3"
_SCORE = re.compile(r"\b(?:score|rating)\b\s*(?:[:=]|\bis\b|\bof\b)?\s*\**\s*([+-]?[0-9]+(?:[.,][0-9]+)?)", re.I)
#: what may follow a labelled number and make it a hedge or a range: "3 or 4", "3-4", "3 to 4", "3/5"
_AFTER = re.compile(r"\s*(?:(or|to|-|–|—|~|/|out of)\s*([0-9]+))?", re.I)
_VERDICT = re.compile(r"\bverdict\b\W{0,5}(true|false|yes|no)\b", re.I)
_FINAL = re.compile(r"\bfinal\b[^\n.]{0,30}$", re.I)
_REASON = re.compile(r"\b(?:justification|explanation)\b\s*[:=]\s*(.+)", flags=re.I | re.DOTALL)


@dataclass(frozen=True)
class _Candidate:
    """One place in the answer that gives its value: a JSON object with the key, or a label."""

    value: Any
    payload: dict[str, Any]
    final: bool
    where: str


def parse_answer(raw: str, model: type[A], dimension: str) -> A:
    """Parse one judge answer into ``model``; raise :class:`JudgeAnswerError` unless it has one clear answer."""
    text = raw or ""
    if not text.strip():
        raise JudgeAnswerError(dimension, raw, "the answer is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise JudgeAnswerError(dimension, raw, f"the answer has {len(text):,} characters: more than any judge answer "
                                               f"({MAX_ANSWER_CHARS:,})")
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        whole = json.loads(body, object_pairs_hook=_no_duplicate(model.KEY))
    except _DuplicateKey as exc:
        raise JudgeAnswerError(dimension, raw, str(exc)) from None
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict):  # the whole answer is one JSON object (a constrained backend's answer)
        return _validated(whole, model, dimension, raw)
    candidates = _candidates(text, model, dimension, raw)
    if not candidates:
        word, label = ("verdict", "VERDICT: true") if model is TaskCompletionAnswer else ("score", "Score: N")
        raise JudgeAnswerError(dimension, raw, f'no JSON object and no labelled {word} (expected a JSON object with '
                                               f'"{model.KEY}", or "{label}")')
    values = [c.value for c in candidates]
    last = candidates[-1]
    if any(_differ(value, last.value) for value in values[:-1]) and not last.final:
        shown = ", ".join(json.dumps(v) if _jsonable(v) else repr(v) for v in values)
        raise JudgeAnswerError(dimension, raw, f"the answer gives different values ({shown}) and marks none as final")
    return _validated(last.payload, model, dimension, raw)


def _differ(a: Any, b: Any) -> bool:
    return type(a) is not type(b) or a != b


class _DuplicateKey(ValueError):
    pass


def _no_duplicate(key: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if names.count(key) > 1:
            raise _DuplicateKey(f'one JSON object gives "{key}" {names.count(key)} times')
        return dict(pairs)

    return hook


def _validated(candidate: dict[str, Any], model: type[A], dimension: str, raw: str) -> A:
    try:
        if model is TurnScoresAnswer:
            candidate = {**candidate, "raw": raw}
        return model.model_validate(candidate)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        raise JudgeAnswerError(dimension, raw, f"{dotted(first['loc']) or 'answer'}: {message}") from None


def _candidates(text: str, model: type[_Answer], dimension: str, raw: str) -> list[_Candidate]:
    """Every place that gives the answer, in order: JSON objects with its key, and labels outside them."""
    found: list[tuple[int, _Candidate]] = []
    prose: list[tuple[int, str]] = []  # (offset, text) of the parts outside JSON objects
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicate(model.KEY))
    position, tries = 0, 0
    start = text.find("{")
    while start != -1 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except _DuplicateKey as exc:
            raise JudgeAnswerError(dimension, raw, str(exc)) from None
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        prose.append((position, text[position:start]))
        if isinstance(value, dict) and model.KEY in value:
            final = bool(_FINAL.search(text[max(0, start - 40):start]))
            found.append((start, _Candidate(value[model.KEY], value, final, "JSON")))
        position = end
        start = text.find("{", end)
    prose.append((position, text[position:]))
    reason_match = _REASON.search(text)
    reason = reason_match.group(1).strip() if reason_match else ""
    reason_key = "explanation" if model is TaskCompletionAnswer else "justification"
    for offset, part in prose:
        for at, value in _labels(part, model):
            final = bool(_FINAL.search(part[max(0, at - 40):at]))
            found.append((offset + at, _Candidate(value, {model.KEY: value, reason_key: reason}, final, "label")))
    return [candidate for _, candidate in sorted(found, key=lambda item: item[0])]


def _labels(part: str, model: type[_Answer]) -> list[tuple[int, Any]]:
    """(offset, value) of each labelled answer in plain text. A hedged or fractional number is kept as
    text, so it can never validate as a score."""
    if model is TaskCompletionAnswer:
        return [(m.start(), m.group(1).lower() in ("true", "yes")) for m in _VERDICT.finditer(part)]
    if model is TurnScoresAnswer:
        return []  # a list of scores is read from JSON only
    top = 4 if model is PersonalizationAnswer else 5
    labels: list[tuple[int, Any]] = []
    for match in _SCORE.finditer(part):
        number = match.group(1)
        after = _AFTER.match(part, match.end())
        joiner, other = (after.group(1), after.group(2)) if after else (None, None)
        if joiner and joiner.lower() in ("/", "out of") and other is not None and int(other) == top:
            joiner = None  # "3/4", "3 out of 4": a score on the rubric's own scale
        value: Any = int(number) if number.lstrip("+-").isdigit() else number
        if joiner:
            value = f"{number} {joiner} {other}"  # "3 or 4": a hedge, never a score
        labels.append((match.start(), value))
    return labels
