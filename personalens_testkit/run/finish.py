"""The end of a run, in the controlling process: the rows of every worker read once, the recorded
results kept, the baseline compared, the report built and its files written, the verdict decided."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from ..calibration.report import CalibrationReport
from ..costs.prices import load_prices
from ..errors import StorageError
from ..gating.compare import Comparison, compare_rows
from ..gating.thresholds import Thresholds
from ..gating.user_agent import user_agent_difference
from ..gating.expectations import Expectations
from ..calibration.retest import drift_margins, judged_now, margin_basis, measure
from ..gating.verdict import NotRun, RunVerdict
from ..report.model import RunReport, build_report, tally_rows
from ..report.outputs import in_folder, write_report_files
from ..results.files import load_rows
from ..results.rows import CallRow, ResultRow
from ..results.source import RowSource
from ..settings import RunSettings
from .recording import Recording


@dataclass(frozen=True)
class RunOutcome:
    """The end of a run: its report, the report files written, the rows added to the recorded results,
    the files that could not be written (one line each), and the verdict beyond its cases."""

    report: RunReport
    written: dict[str, Path]
    recorded_rows: int
    failures: list[str]
    verdict: RunVerdict


def _compared(settings: RunSettings, thresholds: Thresholds, base_rows: Sequence[ResultRow], rows: Sequence[Any],
              retest: Any, run: dict[str, Any], problems: list[str]) -> Comparison | None:
    """The run compared with ``--baseline``'s rows; None, with the reason among ``problems``, when the base was
    produced with another user agent (the comparison would measure them, not the bot)."""
    refused = user_agent_difference(base_rows, run.get("user_model") or "")
    if refused is not None:
        problems.append(refused)
        return None
    rules = thresholds.aggregate
    live = judged_now(rows)
    measured = drift_margins(retest, live)
    return compare_rows(base_rows, rows, margin=settings.baseline_margin, confidence=rules.confidence,
                        min_n=rules.min_n, max_missing=rules.max_infrastructure_errors, measured=measured,
                        margin_basis=margin_basis(retest, measured, live), margins=rules.margin, drifts=rules.drift,
                        counting=settings.completion_counting)


def finish_run(settings: RunSettings, results: Path, run_dir: Path, thresholds: Thresholds, recording: Recording, *,
               run: dict[str, Any], snapshot: dict[str, Any], expectations: Expectations | None = None,
               calibration: CalibrationReport | None = None, written: set[bytes] | None = None,
               not_run: NotRun | None = None, preflight: Sequence[Any] = ()) -> RunOutcome:
    """``preflight``: the calls the preflight made (one minimal call per live remote model): billed by the provider,
    so in the run's cost."""
    # one digest a case (the rows read once, one at a time, the ledger and cost added up on the way): the outputs
    # that show whole rows read them again from the file, so the run's memory does not grow with its cases
    prices = load_prices(settings.prices)
    source = RowSource(results, written=written)
    billed = [SimpleNamespace(user_model=run.get("user_model"), assistant_model=run.get("assistant_model"),
                              judge_model=run.get("judge_model"), reviewer_model=run.get("reviewer_model"), calls=[CallRow(**call.as_dict()) for call in preflight])
              ] if preflight else []
    rows, tallied = tally_rows(source, prices, billed=billed)
    comparison = base_rows = None
    # the judge's noise from this run's own judgements (a resumed row's second judgement is another run's)
    retest = measure([row for row in rows if row.run_id == run["run_id"]], share=settings.judge_retest or None,
                     confidence=thresholds.aggregate.confidence)
    problems: list[str] = []  # part of the verdict (and so of every report)
    if settings.baseline is not None:  # read before this run's rows join the recorded results (they may be the baseline)
        base_rows = load_rows(settings.baseline, what="--baseline")
        comparison = _compared(settings, thresholds, base_rows, rows, retest, run, problems)
    try:
        recorded = recording.keep_recorded(source.rows())
    except StorageError as exc:
        recorded = 0
        problems.append(f"recorded results: {exc}")
    enforced = not recording.plan.checks_reproduction
    report = build_report(rows, thresholds, run=run, settings=snapshot, gates_enforced=enforced, comparison=comparison,
                          expectations=expectations, problems=problems, calibration=calibration, baseline=base_rows,
                          retest=retest, not_run=not_run, prices=prices, source=source, tallied=tallied)
    failures: list[str] = []  # report files that could not be written
    written = write_report_files(report, in_folder(run_dir, settings.report_paths), failures=failures)
    report.ledger.close()
    return RunOutcome(report, written, recorded, failures, report.verdict)


def settings_snapshot(settings: RunSettings, shown: Any) -> dict[str, Any]:
    """The settings a report records (how the run was selected and judged)."""
    s, sel = settings, settings.selection
    return {
        "data": str(s.data_path) if s.data_path else "bundled 50-profile sample",
        "sample": sel.sample, "profiles": list(sel.profiles) if sel.profiles else None,
        "domains": list(sel.domains) if sel.domains else None, "task_kind": sel.task_kind,
        "max_turns": s.max_turns, "record_mode": s.record_mode, "rejudge": s.rejudge, "repeat": s.repeat,
        "turn_level": s.turn_level, "leak_check": s.leak_check, "review_user": s.review_user,
        "rerun_user_faults": s.rerun_user_faults, "completion_counting": s.completion_counting,
        "reply_cut": s.reply_cut,
        "thresholds": str(s.thresholds_path),
        "cassette_dir": shown(s.cassette_dir), "baseline": str(s.baseline) if s.baseline else None,
        "baseline_margin": s.baseline_margin, "judge_retest": s.judge_retest,
    }
