"""The calibration set: dialogues on scenarios of the 50-profile sample whose correct scores are known by
construction. For each scenario, variants that differ only in what one dimension measures: the same task
served ignoring the user's stored preferences, using them only once stated, using them proactively, or
proactively and fitted to the situation (personalization 1-4); completed, abandoned or refused (task
completion); natural, stilted or robotic (naturalness of the assistant, 5 / 3 / 1); coherent, with a lapse,
or self-contradicting (coherence of the assistant, 5 / 3 / 1). Each label comes with its reason.

The set ships as ``dialogues.jsonl`` in this package; ``--calibration-set PATH`` judges another file of the
same form (one JSON object a line: id, scenario_id, variant, messages, labels, reasons).
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..data.jsonlines import read_models
from ..llm.base import Message
from ..scales import HEADLINE, METRIC_BY_NAME

#: the dimensions calibration measures: the paper's headline ones (the user side rates the simulator)
DIMENSIONS = HEADLINE


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    content: str

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        if value not in ("user", "assistant"):
            raise ValueError(f"must be user or assistant (got {value!r})")
        return value


class CalibrationDialogue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    scenario_id: str
    variant: str
    messages: tuple[Turn, ...]
    #: the correct score of each dimension this dialogue calibrates, known by construction
    labels: dict[str, Any]
    #: why each label holds
    reasons: dict[str, str]

    @field_validator("messages")
    @classmethod
    def _turns(cls, value: tuple[Turn, ...]) -> tuple[Turn, ...]:
        if len(value) < 2 or value[0].role != "user" or value[-1].role != "assistant":
            raise ValueError("must start with the user and end with the assistant")
        if any(a.role == b.role for a, b in zip(value, value[1:])):
            raise ValueError("user and assistant must take turns")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("at least one label")
        for name, label in value.items():
            if name not in DIMENSIONS:
                raise ValueError(f"{name!r} is not a calibrated dimension ({', '.join(DIMENSIONS)})")
            metric = METRIC_BY_NAME[name]
            ok = isinstance(label, bool) if metric.kind == "bool" else (
                type(label) is int and metric.low <= label <= metric.high)
            if not ok:
                scale = "true or false" if metric.kind == "bool" else f"a whole number from {metric.low} to {metric.high}"
                raise ValueError(f"{name} must be {scale} (got {label!r})")
        return value

    @model_validator(mode="after")
    def _reasons(self) -> "CalibrationDialogue":
        if set(self.reasons) != set(self.labels):
            raise ValueError("reasons: one reason for every label, and no other")
        return self

    @property
    def chat(self) -> tuple[Message, ...]:
        return tuple(Message(turn.role, turn.content) for turn in self.messages)  # type: ignore[arg-type]


def shipped_set() -> Path:
    return Path(str(resources.files("personalens_testkit.calibration") / "dialogues.jsonl"))


def load_set(path: Path | None = None) -> list[CalibrationDialogue]:
    """The dialogues of a calibration set (the shipped one by default); a bad line is one error naming it."""
    return read_models(path or shipped_set(), CalibrationDialogue, "dialogue")


def fingerprint(path: Path | None = None) -> str:
    """The set's SHA-256 (a report names the exact set it was measured on)."""
    return hashlib.sha256((path or shipped_set()).read_bytes()).hexdigest()
