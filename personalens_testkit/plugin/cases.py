"""The suite cases: parametrized one scenario (and try) each, ordered, marked as expected, evaluated ahead
with ``--concurrency``, and not started once the run is told to stop. Hooks: ``pytest_generate_tests``,
``pytest_collection_modifyitems``, ``pytest_collection_finish``, ``pytest_runtest_protocol``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from ..data.models import Scenario, TaskKind, case_id
from ..errors import PersonalensError
from ..results.rows import CaseVerdict
from ..run.lanes import of_run
from ..run.state import Run
from ..secrets import redact
from .project import MARKER

if TYPE_CHECKING:  # the dialogue and judging machinery loads with the first case, not with pytest
    from ..evaluation import Evaluation

#: the run of this process (settings, dataset, models)
STATE = pytest.StashKey[Run]()


@dataclass
class CaseRecord:
    """What a case's fixtures found, for its row (:mod:`.rows`): the evaluation, the floors its own check found
    it missed (its row reports exactly those), and its verdict against its expectation
    (:func:`~personalens_testkit.gating.expectations.case_verdict`; None: decided by pytest's outcome)."""

    evaluation: Evaluation
    shortfalls: list[Any] = field(default_factory=list)
    verdict: CaseVerdict | None = None


#: a case's record, on its item
CASE = pytest.StashKey[CaseRecord]()


class KnownFailure(Exception):
    """Never raised: the xfail marker of a case expected to fail names it, so only pytest.xfail() makes the case
    xfail (a regression still fails, and a pass shows as XPASS)."""


def is_case(item: pytest.Item) -> tuple[Scenario, int] | None:
    """(scenario, try) of a suite case; None for any other item."""
    callspec = getattr(item, "callspec", None)
    scenario = callspec.params.get("scenario") if callspec is not None else None
    if not isinstance(scenario, Scenario):
        return None
    return scenario, callspec.params.get("personalens_repeat", 1)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "scenario" not in metafunc.fixturenames:
        return
    kind = TaskKind(marker.kwargs.get("task_kind", marker.args[0] if marker.args else "sd"))
    run = metafunc.config.stash[STATE]
    try:
        cases = run.cases_of(kind)
        run.thresholds  # noqa: B018 - a broken thresholds or expectations file stops the run before any case
        run.expectations  # noqa: B018
    except PersonalensError as exc:
        pytest.fail(redact(str(exc)), pytrace=False)
    if run.settings.repeat == 1:
        metafunc.parametrize("scenario", [s for s, _ in cases], ids=[s.scenario_id for s, _ in cases])
    else:
        metafunc.parametrize(("scenario", "personalens_repeat"), cases,
                             ids=[case_id(s.scenario_id, r) for s, r in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A suite with no scenario selected (e.g. ``--task-kind sd`` for the multi-domain file) is deselected, not
    skipped, and so is a case the ``--resume`` results scored (a node id that names one is found, and its kept row
    stands for it); with ``--stop-when-decided`` the cases run in the decision's order; a case expected to fail is
    marked so (a pass shows as XPASS)."""
    def empty(item: pytest.Item) -> bool:
        return item.get_closest_marker(MARKER) is not None and is_case(item) is None

    run = config.stash.get(STATE, None)

    def left_out(item: pytest.Item) -> bool:  # no scenario, or one the --resume results scored already
        case = is_case(item)
        return empty(item) or (run is not None and case is not None and run.cases.is_done(*case))

    dropped = [item for item in items if left_out(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not left_out(item)]
    if run is not None and run.settings.stop_when_decided:  # every process sorts alike: xdist sees one order
        from ..run.early_stop import order_key  # --stop-when-decided only: loaded for it

        items.sort(key=order_key([case for item in items if (case := is_case(item))], run.settings.order_seed, is_case))
    # a whole-run replay checks that each case reproduces its recording, whatever it scored: no expectation applies
    reproducing = run is None or run.recording.plan.checks_reproduction
    expectations = None if reproducing else run.expectations
    for item in items if expectations is not None else ():
        case = is_case(item)
        expectation = expectations.of(case[0].scenario_id) if case else None
        if expectation is not None and expectation.outcome == "fail":
            item.add_marker(pytest.mark.xfail(raises=KnownFailure, strict=False, reason=f"expected: {expectation}"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """With --concurrency K, evaluate the cases ahead, K at a time (in each xdist worker, from its own queue)."""
    config = session.config
    run = config.stash.get(STATE, None)
    if run is None or of_run(run) < 2 or config.option.collectonly:
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # the xdist controller runs no case: its workers evaluate ahead, each from its own queue
    from .xdist_queue import worker_queue  # xdist's scheduler module: loaded by a run that evaluates ahead only

    upcoming = worker_queue(session, run.run_dir, written=run.queue_written) if hasattr(config, "workerinput") else None
    if hasattr(config, "workerinput") and upcoming is None:
        return  # another scheduler (worksteal takes queued cases back): no case is evaluated before it is run
    cases = [(item.nodeid, *is_case(item)) for item in session.items if is_case(item)]
    run.runner.evaluate_ahead(cases, upcoming, lanes=of_run(run))  # type: ignore[arg-type]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A run told to stop (a full disk, a dead endpoint, its budget) starts no further case, in any process; a case
    already started ahead (``--concurrency``) still runs to its row, wherever it stands in the order. With
    ``--max-cost`` a case starts only once the budget's ledger holds its expected spend."""
    run = item.config.stash.get(STATE, None)
    if run is None or item.get_closest_marker(MARKER) is None:
        return None
    reason = run.stop_signal.reason()
    if run.runner.started(item.nodeid):  # a case already under way ahead keeps its row (and has its reservation)
        return None
    case = is_case(item)
    if reason is None and case is not None:  # --max-cost: the case's expected spend reserved before it starts
        reason = run.runner.reserve(*case)
    if reason is None or run.runner.started(item.nodeid):  # started ahead meanwhile: it runs to its row
        return None
    if not run.runner.waiting_ahead():  # pytest's loop ends here, once no case started ahead waits for its row
        item.session.shouldstop = f"personalens: stopped: {reason}"
    return True  # not run: no report, no row
