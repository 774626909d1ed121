"""A team's own user context, for judging its real conversations: our schema, every part optional.

    {"user_id": "cust-4711",
     "demographics": {"age": "35-44 years old", "reside_country": "Canada"},
     "preferences": {"Restaurants": {"Cuisine": "Thai", "Budget": "$$"}},   # by domain, or one flat mapping
     "interactions": {"Restaurants": "Orders Thai most Fridays ..."},       # past-interaction summaries by domain
     "situation": {"Location": "Toronto", "Time of Day": "Evening"},
     "task": "Book a table for Friday",                                     # what the user set out to do
     "goal": "A table is booked for Friday evening"}                        # what task completion checks

It gives the judge what a benchmark scenario gives it (see :class:`.context.ScenarioContext`): what is
missing is said to be unknown. Without a goal, task completion asks whether the assistant fully resolved
what the user asked for in the conversation.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

UNKNOWN = "(not known)"
DEFAULT_GOAL = "The assistant fully resolves what the user asks for in this conversation."
DEFAULT_TASK = "Get help from the assistant with what the conversation is about."


class UserContext(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str = "user"
    demographics: dict[str, str] = Field(default_factory=dict)
    #: by domain (``{"Music": {...}}``), or one flat mapping of preferences (kept under "General")
    preferences: dict[str, Any] = Field(default_factory=dict)
    interactions: dict[str, str] = Field(default_factory=dict)
    situation: dict[str, str] = Field(default_factory=dict)
    task: str | None = None
    goal: str | None = None

    @field_validator("preferences")
    @classmethod
    def _by_domain(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value and not all(isinstance(v, dict) for v in value.values()):
            if any(isinstance(v, dict) for v in value.values()):
                raise ValueError("either preferences by domain ({domain: {name: value}}) or one flat mapping, not both")
            return {"General": value}
        return value

    @property
    def situation_pairs(self) -> list[tuple[str, str]]:
        return list(self.situation.items()) or [("Situation", UNKNOWN)]

    @property
    def intent(self) -> str:
        return self.task or DEFAULT_TASK

    @property
    def domains(self) -> list[str]:
        return sorted(set(self.preferences) | set(self.interactions))

    def judged(self) -> "UserContext":
        """The context as the judge reads it: every block present, unknown parts said to be unknown."""
        return self.model_copy(update={
            "demographics": self.demographics or {"Demographics": UNKNOWN},
            "preferences": self.preferences or {"General": {"Preferences": UNKNOWN}},
            "interactions": self.interactions or {"General": UNKNOWN},
            "goal": self.goal or DEFAULT_GOAL,
        })
