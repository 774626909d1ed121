"""What a row may hold as a judgement: scores on the benchmark's scales, and a second judgement of the dialogue."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..agents.judge import Scores
from ..scales import METRICS


def on_the_scales(scores: Any) -> Any:
    """Scores as a row may hold them: each metric on its own scale (a yes/no verdict a bool, a rating an integer
    from its scale's low to its high end); anything else is refused, never read as a score."""
    if scores is None:
        return None
    values = scores.model_dump() if isinstance(scores, BaseModel) else scores
    if not isinstance(values, dict):
        raise ValueError("expected an object of scores, one per metric")
    for metric in METRICS:
        value = values.get(metric.name)
        if metric.kind == "bool":
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and metric.low <= value <= metric.high
        if not ok:
            scale = "true or false" if metric.kind == "bool" else f"an integer {metric.low}-{metric.high}"
            raise ValueError(f"{metric.name}: expected {scale}, got {value!r}")
    return scores


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
        if (self.scores is None) == (self.error is None):
            raise ValueError("expected either scores or an error")
        return self
