"""The benchmark's judged metrics and their scales, named once for every module.

Scores keep these scales everywhere (results, reports, thresholds); any 0-1
normalisation happens only inside the deepeval adapter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    low: int
    high: int
    #: "bool" for the task-completion verdict, "int" for rated scales
    kind: Literal["bool", "int"]
    #: whose messages the metric rates ("dialogue" for task completion and personalization)
    side: Literal["dialogue", "user", "assistant"]


TASK_COMPLETION = Metric("task_completion", "Task completion", 0, 1, "bool", "dialogue")
PERSONALIZATION = Metric("personalization", "Personalization", 1, 4, "int", "dialogue")
NATURALNESS_USER = Metric("naturalness_user", "Naturalness (user)", 1, 5, "int", "user")
NATURALNESS_ASSISTANT = Metric("naturalness_assistant", "Naturalness (assistant)", 1, 5, "int", "assistant")
COHERENCE_USER = Metric("coherence_user", "Coherence (user)", 1, 5, "int", "user")
COHERENCE_ASSISTANT = Metric("coherence_assistant", "Coherence (assistant)", 1, 5, "int", "assistant")

METRICS: tuple[Metric, ...] = (
    TASK_COMPLETION, PERSONALIZATION, NATURALNESS_USER, NATURALNESS_ASSISTANT, COHERENCE_USER, COHERENCE_ASSISTANT,
)
METRIC_BY_NAME = {m.name: m for m in METRICS}
