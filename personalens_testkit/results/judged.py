"""What a row may hold as a judgement: scores on the benchmark's scales, and a second judgement of the dialogue."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..scales import METRICS, Scores


def _check_scales(scores: Any, *, missing_allowed: bool) -> Any:
    if scores is None:
        return None
    values = scores.model_dump() if isinstance(scores, BaseModel) else scores
    if not isinstance(values, dict):
        raise ValueError("expected an object of scores, one per metric")
    for metric in METRICS:
        value = values.get(metric.name)
        if value is None and missing_allowed:
            continue
        if metric.kind == "bool":
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and metric.low <= value <= metric.high
        if not ok:
            scale = "true or false" if metric.kind == "bool" else f"an integer {metric.low}-{metric.high}"
            raise ValueError(f"{metric.name}: expected {scale}, got {value!r}")
    return scores


def on_the_scales(scores: Any) -> Any:
    """Scores as a row may hold them: every metric on its own scale (a yes/no verdict a bool, a rating an integer
    from its scale's low to its high end); anything else is refused, never read as a score."""
    return _check_scales(scores, missing_allowed=False)


def in_part_on_the_scales(scores: Any) -> Any:
    """The readable part of a judgement: each metric on its scale, or None where its answer was unreadable."""
    return _check_scales(scores, missing_allowed=True)


def missing(scores: Any) -> set[str]:
    """The dimensions without a score."""
    return set() if scores is None else {m.name for m in METRICS if getattr(scores, m.name) is None}


def check_partial(status: str, scores: Any, partial: Any, unreadable: dict[str, str], error_kind: str | None) -> None:
    """Unreadable answers and the readable part of a judgement go together, only on the judge's error of a case
    (never beside scores), and a dimension is missing from that part exactly where its answer was unreadable."""
    if partial is None and not unreadable:
        return
    if partial is None or not unreadable:
        raise ValueError("partial_scores: stand with unreadable, and unreadable with partial_scores")
    if status != "error" or error_kind != "JudgeAnswerError" or scores is not None:
        raise ValueError("partial_scores: only on the judge's error of a case (kind JudgeAnswerError), never beside "
                         "scores")
    if missing(partial) != set(unreadable):
        raise ValueError(f"partial_scores: missing {sorted(missing(partial)) or 'none'}, but unreadable names "
                         f"{sorted(unreadable) or 'none'} (a score is missing exactly where the answer was unreadable)")


class RetestRow(BaseModel):
    """A second judgement of a row's dialogue (``--judge-retest``): its scores or why it failed, and whether each
    of the two judgements was drawn now (live) or played back from a recording (replayed). Never a score."""

    model_config = ConfigDict(extra="ignore")

    scores: Optional[Scores] = None
    error: Optional[str] = None
    first: Optional[Literal["live", "replayed"]] = None
    second: Optional[Literal["live", "replayed"]] = None

    _scales = field_validator("scores", mode="before")(on_the_scales)

    @model_validator(mode="after")
    def _one_outcome(self) -> "RetestRow":
        if (self.scores is None) == (self.error is None):  # every score present: on_the_scales
            raise ValueError("expected either scores or an error")
        return self


class ConfirmationRow(BaseModel):
    """A floor missed on a live judgement, judged again (:mod:`~personalens_testkit.run.confirmation`): the floors
    missed, those the new judgements confirm ([]: cleared), how many judgements of each dialogue confirm, each new
    judgement's answers for the case's dialogue and the base's (None: the base's was not judged), what failed, and
    why the base's dialogue was not judged. Never a score."""

    model_config = ConfigDict(extra="ignore")

    missed: list[str] = []
    confirmed: list[str] = []
    judgements: int = 0
    case: list[Optional[dict[str, Optional[Union[bool, int]]]]] = []
    base: Optional[list[Optional[dict[str, Optional[Union[bool, int]]]]]] = None
    errors: list[str] = []
    without_base: Optional[str] = None

    @model_validator(mode="after")
    def _confirmed_were_missed(self) -> "ConfirmationRow":
        if not set(self.confirmed) <= set(self.missed):
            raise ValueError("confirmed: only floors the first judgement missed can be confirmed")
        return self
