"""The fixtures a suite test asks for: the run, the floors, the judged dialogue of its case and the check of
its floors. What a case's fixtures find is kept on its item (:data:`~.cases.CASE`) for its row. Hooks:
``pytest_runtest_setup``, ``pytest_runtest_call`` (wrappers: which item this thread is running, for the fixtures)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Generator

import pytest

from ..data.models import Scenario
from ..errors import PersonalensError
from ..gating.expectations import case_verdict
from ..gating.thresholds import ScenarioFloors, shortfalls
from ..gating.user_agent import user_agent_verdict, why
from ..results.rows import CaseVerdict
from ..run.confirmation import unconfirmed_why
from ..run.state import Run, expected_of, user_agent_gated
from ..secrets import redact
from ..transcripts import describe_replay_change, describe_shortfalls
from .cases import CASE, STATE, CaseRecord

if TYPE_CHECKING:  # the dialogue and judging machinery loads with the first case, not with pytest
    from ..evaluation import Evaluation


class _Running(threading.local):
    """The item this thread is running a phase of, for the fixtures below: they read it rather than ask for
    pytest's ``request``, which pytest builds afresh, a signature read and all, each time a fixture asks for it
    (the parametrized ``scenario`` still does). Set for the set-up and the call of every item (a
    fixture asked for inside a test is made in its call), in the thread that runs them; a run nested in one
    (pytester's in-process runs) puts the outer item back when it ends."""

    item: pytest.Item | None = None


_RUNNING = _Running()


def _as_running(item: pytest.Item) -> Generator[None, Any, Any]:
    outer, _RUNNING.item = _RUNNING.item, item
    try:
        return (yield)
    finally:
        _RUNNING.item = outer


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _as_running(item))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _as_running(item))


def _running() -> pytest.Item:
    if _RUNNING.item is None:
        raise RuntimeError("the personalens fixtures are read while pytest sets up or runs a test, not outside one")
    return _RUNNING.item


@pytest.fixture(scope="session")
def personalens_run(request: pytest.FixtureRequest) -> Run:
    """The run in this process (settings, dataset, models)."""
    return request.config.stash[STATE]


@pytest.fixture(scope="session")
def score_floors(personalens_run: Run) -> ScenarioFloors:
    """The per-scenario floors from thresholds.yaml."""
    try:
        return personalens_run.thresholds.scenario
    except PersonalensError as exc:
        pytest.fail(redact(str(exc)), pytrace=False)


@pytest.fixture
def personalens_repeat() -> int:
    """Which try of its scenario a case is (parametrized by ``--repeat K``; 1 otherwise)."""
    return 1


@pytest.fixture
def judged_dialogue(scenario: Scenario, personalens_repeat: int, personalens_run: Run) -> Evaluation:
    """Run the scenario's dialogue and judge it. A model or parsing failure is an error of the case."""
    item = _running()
    evaluation = personalens_run.runner.evaluate_case(item.nodeid, scenario, personalens_repeat)
    record = item.stash[CASE] = CaseRecord(evaluation)
    path = personalens_run.recording.transcript_shown(evaluation.transcript_at)
    if evaluation.error is not None:
        raw = f"\nraw judge answer: {evaluation.error.raw_answer!r}" if evaluation.error.raw_answer is not None else ""
        message = redact(f"{evaluation.error.describe()}{raw}\ntranscript so far: {path}")
        verdict = case_verdict(expected_of(personalens_run, scenario.scenario_id), [], evaluation.error.source,
                               evaluation.error.kind)
        record.verdict = verdict
        if verdict == "not scored":  # the benchmark's models failed, not the bot: counted apart
            pytest.skip(f"not scored (infrastructure): {message}")
        if verdict == "reply changed":  # the bot changed and no model may be called: honest, not a failure of it
            pytest.skip(f"not scored: {message}")
        if verdict == "expected failure":
            pytest.xfail(f"expected failure: {message}")
        pytest.fail(message, pytrace=False)
    return evaluation


def _weigh_user_agent(record: CaseRecord, verdict: CaseVerdict, evaluation: Evaluation, is_gated: bool) -> None:
    """A case whose user agent spoiled its dialogue (hindered the bot, or helped it to a pass) is inconclusive (user
    agent): skipped, with the faults that decided it."""
    weighed = user_agent_verdict(verdict, evaluation.user_faults, is_gated=is_gated)
    if weighed != verdict:
        record.verdict = weighed
        pytest.skip(redact(f"{weighed}: {why(evaluation.user_faults)}"))


@pytest.fixture
def check_floors(score_floors: ScenarioFloors, personalens_run: Run) -> Any:
    """``check_floors(evaluation)``: fail the case, with scores, reasons and transcript path, if a floor is missed.
    The floors are the ``score_floors`` fixture's (override it to change them): the row reports what it found."""

    item = _running()

    def check(evaluation: Evaluation) -> None:
        assert evaluation.verdict is not None
        record = item.stash.get(CASE, None) or CaseRecord(evaluation)  # kept only if judged_dialogue made it
        is_gated = user_agent_gated(personalens_run)
        changed = personalens_run.recording.differences(evaluation)
        if changed is not None:  # an offline replay of a recording: it must reproduce the recorded scores
            if changed:
                record.verdict = "regression"
                pytest.fail(redact(describe_replay_change(evaluation, changed)), pytrace=False)
            _weigh_user_agent(record, "pass", evaluation, is_gated)
            return
        found = record.shortfalls = shortfalls(score_floors, evaluation.verdict.scores.model_dump())
        expectation = expected_of(personalens_run, evaluation.scenario.scenario_id)
        rule = personalens_run.thresholds.aggregate.live_judged_floors
        missed = [s.metric for s in found]
        verdict = case_verdict(expectation, missed, judged_live=evaluation.judged_live and rule != "gate")
        _weigh_user_agent(record, verdict, evaluation, is_gated)  # before judging again: a spoiled case is judged no more
        if verdict == "unconfirmed" and rule == "confirm":  # judged again, beside the base's dialogue
            confirmed = personalens_run.runner.confirm(
                evaluation, score_floors, missed, confidence=personalens_run.thresholds.aggregate.confidence).confirmed
            verdict = case_verdict(expectation, missed, judged_live=not confirmed)
        record.verdict = verdict
        if found:
            path = personalens_run.recording.transcript_shown(evaluation.transcript_at)
            missed_text = "; ".join(f"{s.metric} {str(s.value).lower()} below {str(s.floor).lower()}" for s in found)
            if verdict == "expected failure":  # one line: what it missed, as expected, and where to read it
                pytest.xfail(redact(f"expected failure ({expectation}): {missed_text}; transcript {path}"))
            if verdict == "unconfirmed":  # a live judgement's miss the judge's noise can explain: not a verdict
                why = unconfirmed_why(evaluation.confirmation)
                pytest.xfail(redact(f"unconfirmed: {missed_text} on a live judgement ({why}; the run's gates and "
                                    f"baseline decide); transcript {path}"))
            message = redact(describe_shortfalls(evaluation, found, path))
            known = personalens_run.expectations is not None  # without an expectations file, as before: a plain failure
            pytest.fail(message + (f"\nREGRESSION: expected {expectation}" if known else ""), pytrace=False)

    return check
