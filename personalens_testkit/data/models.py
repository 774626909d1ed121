"""Pydantic models of the benchmark's data: profiles, tasks, situations and scenarios.

Field names are ours (snake_case); aliases are the upstream JSON keys, so a model
validates the upstream files directly and a validation error names the upstream key.
"""

from __future__ import annotations

import functools
import operator
import re
from enum import Enum
from typing import Annotated, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

DOMAINS: tuple[str, ...] = (
    "Alarm", "Books", "Buses", "Calendar", "Events", "Finance", "Flights", "Games",
    "Hotels", "Media", "Messaging", "Movies", "Music", "Rental Cars", "Restaurants",
    "Services", "Shopping", "Sports", "Train", "Travel",
)

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
PreferenceValue = Union[str, list[str]]


class TaskKind(str, Enum):
    """Single-domain (SD) or multi-domain (MD) task."""

    SD = "sd"
    MD = "md"

    @property
    def label(self) -> str:
        return self.value.upper()


class _Upstream(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class Situation(_Upstream):
    """The situational context of one user-task pair."""

    location: NonEmpty = Field(alias="Location")
    device: NonEmpty = Field(alias="Device")
    time_of_day: NonEmpty = Field(alias="Time of Day")
    day_of_week: NonEmpty = Field(alias="Day of the Week")
    environment: NonEmpty = Field(alias="Environment")

    def as_pairs(self) -> list[tuple[str, str]]:
        """The situation as (upstream label, value) pairs, in upstream order."""
        return [(field.alias or name, getattr(self, name)) for name, field in type(self).model_fields.items()]

    def as_values(self) -> tuple[str, ...]:
        """Its values, in upstream order (equal situations have equal values)."""
        return _situation_values(self)


#: a situation's fields in upstream order, read at once (a dataset reads them for each of its scenarios)
_situation_values = operator.attrgetter(*Situation.model_fields)


class Task(_Upstream):
    """One task definition as a user sees it (without the user's situation)."""

    task_id: Annotated[str, StringConstraints(pattern=r"^(SD-[A-Za-z ]+|MD)-task-\d+$")]
    description: NonEmpty = Field(alias="Task Description")
    user_intent: NonEmpty = Field(alias="User Intent")
    goal: NonEmpty = Field(alias="Task Goal")
    preference_types: tuple[str, ...] = Field(alias="Relevant Affinity Types")
    domains: tuple[NonEmpty, ...] = Field(alias="Relevant Domains", min_length=1)

    @property
    def kind(self) -> TaskKind:
        return TaskKind.MD if self.task_id.startswith("MD-") else TaskKind.SD

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("-", 1)[1])


class UserTask(Task):
    """A task as listed in a user's tasks.json / tasks_md.json: the task plus a situation."""

    situation: Situation = Field(alias="situations")


class Profile(_Upstream):
    """A user profile: demographics, preferences per domain, interest mask, past interactions."""

    demographics: dict[str, str]
    preferences: dict[str, dict[str, PreferenceValue]] = Field(alias="affinities")
    interests: dict[str, Annotated[int, Field(ge=0, le=1)]]
    interactions: dict[str, str]

    @property
    def user_id(self) -> str:
        return self.demographics["user_id"]

    def public_demographics(self) -> dict[str, str]:
        """Demographics without the dataset's own user id (it means nothing to a model)."""
        return {k: v for k, v in self.demographics.items() if k != "user_id"}


class Scenario(BaseModel):
    """One benchmark case: a user and one of the tasks in that user's interest mask."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    task: Task
    situation: Situation

    @property
    def kind(self) -> TaskKind:
        return self.task.kind

    @property
    def domains(self) -> tuple[str, ...]:
        return self.task.domains

    @property
    def scenario_id(self) -> str:
        """Stable readable id: ``user7-SD-Movies-task-3``, ``user7-MD-task-12``."""
        return f"{self.user_id}-{id_safe(self.task.task_id)}"

    @property
    def user_number(self) -> int:
        return int(self.user_id.removeprefix("user"))


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@functools.lru_cache(maxsize=4096)  # a run's task ids are few and read many times a case (``scenario_id``)
def id_safe(text: str) -> str:
    """Make a task id safe for pytest ids and ``-k``: ``SD-Rental Cars-task-1`` -> ``SD-RentalCars-task-1``."""
    return _UNSAFE.sub("", text)


def case_id(scenario_id: str, repeat: int | None = 1) -> str:
    """A case's id: the scenario id, with ``-r<N>`` for the N-th try when a run repeats scenarios (N > 1)."""
    return scenario_id if not repeat or repeat == 1 else f"{scenario_id}-r{repeat}"
