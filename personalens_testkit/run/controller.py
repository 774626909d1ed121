"""The parts of a run that happen per case outside its evaluation: its result row, built in the process
that ran it; and, in the controlling process alone, writing every row and deciding to stop early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from ..errors import StorageError
from ..results.rows import CaseVerdict, ResultRow, Status, build_row, error_row
from ..secrets import redact_json
from .state import Run
from .stop import Breaker, Decision
from .traces import export_case

if TYPE_CHECKING:  # --max-cost and --stop-when-decided load their machinery when a run asks for them
    from ..evaluation import Evaluation
    from .early_stop import EarlyStop


class CaseRow(NamedTuple):
    """A case's row as the process that ran it hands it on (an xdist worker sends it to the controller)."""

    #: the row, one line of JSON with secrets replaced
    line: str
    #: its error (what the circuit breaker reads), or None
    error: dict[str, Any] | None
    #: whether the row is a stand-in for one that could not be built
    stand_in: bool
    #: the case's scenario, and what the progress display shows of it (its verdict, else its status)
    scenario_id: str
    shown: str


def case_row(run: Run, evaluation: Evaluation, status: Status, found: Sequence[Any] = (), *,
             expected: str | None = None, verdict: CaseVerdict | None = None) -> CaseRow:
    """A case's row (:class:`CaseRow`). ``found``: the floors the case's own check found it missed."""
    try:
        row = build_row(run.run_info, evaluation, status=status, found=found,
                        transcript_path=run.recording.transcript_shown(evaluation.transcript_at, missing=None),
                        cassette=run.recording.cassette_of(evaluation.scenario, evaluation.repeat),
                        expected=expected, verdict=verdict)
        stand_in = False
    except Exception as exc:  # the case still gets a row: an error naming what went wrong
        row, stand_in = error_row(run.run_info, evaluation, exc), True
    error = row.error.model_dump() if row.error is not None else None
    line = redact_json(row.model_dump_json())
    export_case(run.settings, run.run_dir, run.run_id, evaluation, line)  # --otel-endpoint's trace (never raises)
    return CaseRow(line, error, stand_in, row.scenario_id, row.verdict or row.status)


class RunController:
    """The controlling process's part: every row written as it arrives; a full disk or a dead endpoint
    stops the run after the cases under way (no further case starts, in any process)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.breaker = Breaker(run.settings.stop_after_errors)
        #: --stop-when-decided (None: the run runs every case)
        self.early: EarlyStop | None = None
        self._armed = False
        #: why the run stopped early, if it did, and the verdict it decided if that was why (--stop-when-decided)
        self.stopped: str | None = None
        self.decision: Decision = None

    def start(self) -> None:
        """Before the first case: the results file exists with room reserved, the stop signal is ready."""
        assert self.run.writer is not None
        self.run.writer.open()
        self.run.stop_signal.prepare()
        # an error of a role this run only replays is a recorded answer, no sign of a dead endpoint
        self.breaker.replayed = frozenset({"user_agent", "judge"}) - self.run.recording.live_roles

    def _arm(self) -> None:
        """At the first row (an xdist controller collects no case: it learns of the run from its rows): the early
        decision, if the run asks for it."""
        self._armed = True
        if self.run.settings.stop_when_decided:
            self.early = make_early_stop(self.run)

    def record(self, line: str, error: dict[str, Any] | None, nodeid: str) -> str | None:
        """Write one case's row; the reason to stop the run now, if there is one."""
        writer = self.run.writer
        assert writer is not None
        if not self._armed:
            self._arm()
        try:
            writer.declare(self.run.run_info)  # the run's record, before its first row
            writer.write_json(line)
        except StorageError as exc:
            return self._stop(f"{exc} (the row of {nodeid} is lost)")
        if writer.out_of_room is not None:
            return self._stop(f"no room left for more result rows: {writer.out_of_room}")
        reason = self.breaker.observe({"status": "error", "error": error} if error else {})
        if reason is None and self.early is not None:
            from ..results.digest import RowDigest  # loaded with --stop-when-decided's machinery

            reason = self.early.observe(RowDigest(ResultRow.model_validate_json(line)))  # kept until its tries are in
            if reason is not None:
                return self._stop(reason, self.early.decision)
        return self._stop(reason) if reason is not None else self.adopt()

    def adopt(self) -> str | None:
        """A stop another process raised (a case its budget could not pay for): the run's own, once."""
        found = self.run.stop_signal.read() if self.stopped is None else None
        if found is not None:
            self.stopped, self.decision = found
        return found[0] if found is not None else None

    def _stop(self, reason: str, decision: Decision = None) -> str | None:
        if self.stopped is not None:
            return None
        self.stopped, self.decision = reason, decision
        self.run.stop_signal.raise_(reason, decision)
        return reason


def make_early_stop(run: Run) -> EarlyStop:
    from ..results.files import load_rows
    from .early_stop import EarlyStop

    s = run.settings
    cases = run.recording.plan.runnable
    domains = sorted({sc.domains[0] for sc, _ in cases if sc.kind.value == "sd" and sc.domains})
    base = load_rows(s.baseline, what="--baseline") if s.baseline is not None else None
    return EarlyStop.build(run.thresholds.aggregate, domains, enforced=not run.recording.plan.checks_reproduction,
                           repeat=s.repeat, base_rows=base, margin=s.baseline_margin,
                           counting=s.completion_counting)
