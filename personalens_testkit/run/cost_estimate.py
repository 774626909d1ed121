"""A run's cost estimate from its settings: the cases it selects, the recording beside its cassettes, the
record mode, the roles' models and the price table (``personalens estimate``, and a live run's header)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

from ..costs.estimate import Options, RunEstimate, estimate
from ..costs.prices import load_prices
from ..data.loader import Dataset
from ..data.models import Scenario
from ..llm.registry import describe
from ..replay.store import assistant_dir, recorded_cases
from ..results.recorded import RESULTS_NAME, load_recorded
from ..settings import RunSettings
from .assistant import AssistantUnderTest

if TYPE_CHECKING:
    from .state import Run


def priced_spec(settings: RunSettings, name_or_spec: str | None) -> str | None:
    """The spec a role's model is priced by: a [models] name resolved to its spec."""
    if name_or_spec is None:
        return None
    entry = settings.models.get(name_or_spec)
    return entry.spec() if entry is not None else name_or_spec


def run_estimate(settings: RunSettings, dataset: Dataset, cases: Sequence[tuple[Scenario, int]]) -> RunEstimate:
    assistant = AssistantUnderTest(settings)
    specs = settings.model_specs()
    variant = settings.assistant_prompt or "claude"
    if not assistant.is_bot and specs.get("assistant"):
        from ..assistants.reference import variant_for

        variant = settings.assistant_prompt or variant_for(describe(specs["assistant"], settings.models))
    options = Options(
        record_mode=settings.record_mode, rejudge=settings.rejudge, bot=assistant.is_bot, max_turns=settings.max_turns,
        turn_level=settings.turn_level, turn_method=settings.turn_level_method, leak_check=settings.leak_check,
        retest_share=settings.judge_retest, context=assistant.context, variant=variant,
        models={role: priced_spec(settings, specs.get(role)) for role in ("user_agent", "assistant", "judge")},
    )
    recorded = load_recorded(assistant_dir(settings.cassette_dir, settings.assistant) / RESULTS_NAME)

    cassettes = recorded_cases(assistant_dir(settings.cassette_dir, settings.assistant))
    return estimate(dataset, cases, options, load_prices(settings.prices), recorded=recorded,
                    has_cassette=cassettes.__contains__)


@lru_cache(maxsize=4)
def of_run(run: "Run") -> RunEstimate:
    """What the cases this run executes will cost (no model called): worked out once, for the header and the budget."""
    return run_estimate(run.settings, run.cases.dataset, run.recording.plan.runnable)
