"""A run's cost estimate from its settings: the cases it selects, the recording beside its cassettes, the
record mode, the roles' models and the price table (``personalens estimate``, and a live run's header)."""

from __future__ import annotations

from typing import Sequence

from ..callsite import ROLES
from ..costs.estimate import Options, RunEstimate, estimate
from ..costs.prices import load_prices
from ..data.loader import Dataset
from ..data.models import Scenario
from ..replay.store import assistant_dir, recorded_cases
from ..results.recorded import RESULTS_NAME, load_recorded
from ..settings import RunSettings
from .assistant import AssistantUnderTest


def run_estimate(settings: RunSettings, dataset: Dataset, cases: Sequence[tuple[Scenario, int]]) -> RunEstimate:
    assistant = AssistantUnderTest(settings)
    roles = settings.role_models
    variant = settings.assistant_prompt or "claude"
    if not assistant.is_bot and "assistant" in roles:
        from ..assistants.reference import variant_for

        variant = settings.assistant_prompt or variant_for(roles["assistant"].label)
    options = Options(
        record_mode=settings.record_mode, rejudge=settings.rejudge, bot=assistant.is_bot, max_turns=settings.max_turns,
        turn_level=settings.turn_level, turn_method=settings.turn_level_method, leak_check=settings.leak_check,
        review_user=settings.review_user,
        retest_share=settings.judge_retest, judge_batch=settings.judge_batch != "off", context=assistant.context,
        variant=variant,
        models={role: roles[role].spec if role in roles else None for role in ROLES},
    )
    recorded = load_recorded(assistant_dir(settings.cassette_dir, settings.assistant) / RESULTS_NAME)

    cassettes = recorded_cases(assistant_dir(settings.cassette_dir, settings.assistant))
    return estimate(dataset, cases, options, load_prices(settings.prices), recorded=recorded,
                    has_cassette=cassettes.__contains__)

