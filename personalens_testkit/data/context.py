"""Everything known about one scenario's user, restricted to the task's domains.

The user agent and the judge see all of it; an assistant sees only the parts its
configuration allows (see ``assistants``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DataError
from .loader import Dataset
from .models import PreferenceValue, Profile, Scenario


@dataclass(frozen=True)
class ScenarioContext:
    scenario: Scenario
    demographics: dict[str, str]
    #: preferences of each of the task's domains, in the task's domain order
    preferences: dict[str, dict[str, PreferenceValue]]
    #: the past-interaction summary of each of the task's domains
    interactions: dict[str, str]

    @property
    def situation_pairs(self) -> list[tuple[str, str]]:
        return self.scenario.situation.as_pairs()

    # what the judge reads (a team's own conversation gives the same through :class:`.user_context.UserContext`)
    @property
    def user_id(self) -> str:
        return self.scenario.user_id

    @property
    def intent(self) -> str:
        return self.scenario.task.user_intent

    @property
    def goal(self) -> str:
        return self.scenario.task.goal


def build_context(dataset: Dataset, scenario: Scenario) -> ScenarioContext:
    profile: Profile = dataset.profile(scenario.user_id)
    path = dataset.data_dir / "profile" / scenario.user_id / "profile.json"
    preferences: dict[str, dict[str, PreferenceValue]] = {}
    interactions: dict[str, str] = {}
    for domain in scenario.domains:
        if domain not in profile.preferences:
            raise DataError(path, f"affinities.{domain}", f"missing, but task {scenario.task.task_id} needs it")
        if domain not in profile.interactions:
            raise DataError(path, f"interactions.{domain}", f"missing, but task {scenario.task.task_id} needs it")
        preferences[domain] = profile.preferences[domain]
        interactions[domain] = profile.interactions[domain]
    return ScenarioContext(
        scenario=scenario, demographics=profile.public_demographics(), preferences=preferences,
        interactions=interactions,
    )
