"""The run report, typed: aggregates with confidence intervals, gates, the call ledger, repeats,
preference leaks, the turn-level curve and the rows - what report.json holds and what the summary,
the JUnit file and the HTML render.

Built from result rows only (those of a finished run, or of a results file), so the report of a
run and ``personalens report RESULTS`` are the same.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timezone
from statistics import mean, pvariance
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from pydantic import BaseModel, PrivateAttr

from ..calibration.report import CalibrationReport
from ..costs.prices import PriceTable, load_prices
from ..costs.spend import CostLedger, CostTally, cost_ledger
from ..gating.aggregate import GateResult, GroupSummary, evaluate_gates, summarise
from ..gating.compare import Comparison
from ..gating.expectations import Expectations
from ..gating.intervals import detectable_drop
from ..calibration.retest import JudgeRetest
from ..gating.stats import pass_hat_k
from ..gating.thresholds import Thresholds
from ..gating.verdict import NotRun, RunVerdict, decide_run, run_verdict
from ..results.digest import RowDigest
from ..results.rows import ResultRow, RunInfo
from ..results.source import RowSource
from ..scales import HEADLINE, METRICS
from .changes import ScenarioChange, scenario_changes
from .ledger import Ledger, LedgerTally, ledger

REPORT_VERSION = 1

class Spread(BaseModel):
    mean_range: Optional[float]
    scenarios_that_vary: int
    scenarios: int


class Noise(BaseModel):
    """How much a metric moves between repeats of the same run: the noise a gate or a comparison sits on."""

    #: the run's mean of the metric in each try (1..k), over the scenarios scored in that try
    repeat_means: list[float]
    #: the widest gap between two of those means
    spread: float
    #: the smallest true drop a comparison with a baseline run of the same size and k finds (80 % power) when every
    #: scenario drops alike (a comparison computes its own from how its differences vary)
    detectable_drop: Optional[float]


class Repeats(BaseModel):
    k: int
    pass_hat_k: Optional[float]
    pass_hat_1: Optional[float]
    scenarios: int
    spread: dict[str, Spread]
    noise: dict[str, Noise] = {}


class Leaks(BaseModel):
    checked: int
    leaked: int
    rate: float
    #: dialogues whose leak check failed (their scores stand; they are not in ``checked``)
    failed: int = 0


class TurnPoint(BaseModel):
    turn: int
    n: int
    mean: float


class RunReport(BaseModel):
    report_version: int = REPORT_VERSION
    created_at: str
    run: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    counts: dict[str, int]
    errors_by_source: dict[str, int]
    confidence: float
    aggregates: dict[str, GroupSummary]
    gates: list[GateResult]
    gates_enforced: bool = True
    gates_passed: bool
    ledger: Ledger
    #: each role's cost in US dollars: the live calls' spend, and what the replayed calls would have cost
    cost: Optional[CostLedger] = None
    repeats: Optional[Repeats] = None
    preference_leaks: Optional[Leaks] = None
    #: the judge's test-retest agreement on the dialogues judged twice (``--judge-retest``)
    judge_retest: Optional[JudgeRetest] = None
    injection_flagged: list[str] = []
    injection_removed: list[str] = []
    #: mean turn-level personalization by turn (the paper's Figure 5), apart for single-domain, multi-domain and each
    #: single-domain domain, as the paper reports them: keyed "single-domain", "multi-domain", "domain:<name>"
    turn_curves: dict[str, list[TurnPoint]] = {}
    #: dialogues whose turn-level analysis failed (their scores stand; they are in no curve)
    turn_level_failed: int = 0
    comparison: Optional[Comparison] = None
    #: the judge's calibration (personalens calibrate), when the run named one
    judge_calibration: Optional[CalibrationReport] = None
    verdict: RunVerdict
    #: the scenarios that changed (a bot reply differs from the recording, scores differ from the baseline's, a
    #: regression or an unexpected pass): what the job summary and the HTML show a reviewer first
    changes: list[ScenarioChange] = []
    #: one per case: whole rows, or (the report of a finished run) their digests, whose whole rows
    #: :meth:`whole_rows` reads again from the results file
    rows: list[Any]
    _source: Any = PrivateAttr(default=None)

    @property
    def streams(self) -> bool:
        """Whether the whole rows are read from the results file (:attr:`rows` holds digests)."""
        return self._source is not None

    def whole_rows(self, positions: Sequence[int] | None = None) -> Iterator[ResultRow]:
        """Every case's whole row (dialogue, calls, reasons), one at a time; with ``positions`` (ascending indices
        into :attr:`rows`), only those rows - the others are not read."""
        if self._source is not None:
            return self._source.rows(positions)
        return iter(self.rows) if positions is None else (self.rows[i] for i in positions)

    def row_lines(self) -> Iterator[str]:
        """Every case's row as one line of JSON (naming its run by ``run_id``: :meth:`row_runs`)."""
        if self._source is not None:
            return self._source.lines()
        return (row.model_dump_json() for row in self.rows)

    def row_runs(self) -> list[RunInfo]:
        """The runs of the rows, once each (a report holds them beside the rows, as a results file does)."""
        if self._source is not None:
            return self._source.run_records()  # type: ignore[no-any-return]
        found: dict[str, RunInfo] = {}
        for row in self.rows:
            if isinstance(row, ResultRow) and row.run is not None:
                found.setdefault(row.run_id, row.run)
        return list(found.values())


def repeats(rows: Sequence[ResultRow], confidence: float = 0.95) -> Repeats | None:
    """With ``--repeat K``: pass^k and pass^1 of task completion on the same scenarios (an errored try is a
    failed one, as tau-bench counts it), each score's spread across a scenario's tries, and the noise floor."""
    k = max((row.repeat or 1 for row in rows), default=1)
    if k < 2:
        return None
    tries: dict[str, list[ResultRow]] = defaultdict(list)
    completions_by: dict[str, list[bool]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r.scenario_id, r.repeat)):
        completions_by[row.scenario_id].append(bool(row.scored and row.score("task_completion")))
        if row.scored:
            tries[row.scenario_id].append(row)
    completions = list(completions_by.values())
    spread = {}
    for metric in METRICS:
        ranges = [max(float(r.score(metric.name)) for r in g) - min(float(r.score(metric.name)) for r in g)
                  for g in tries.values() if len(g) > 1]
        spread[metric.name] = Spread(mean_range=mean(ranges) if ranges else None,
                                     scenarios_that_vary=sum(1 for x in ranges if x > 0), scenarios=len(ranges))
    return Repeats(k=k, pass_hat_k=pass_hat_k(completions, k), pass_hat_1=pass_hat_k(completions, 1),
                   scenarios=len(completions), spread=spread, noise=noise(rows, k, confidence))


def noise(rows: Sequence[ResultRow], k: int, confidence: float) -> dict[str, Noise]:
    """Per headline metric: the mean of each try, their spread, and the drop a same-sized comparison can detect
    (the tries' own variance within a scenario, sigma_w: a difference of two such runs' scenario means has
    variance 2 sigma_w^2 / k)."""
    found = {}
    for metric in HEADLINE:
        by_try: dict[int, list[float]] = defaultdict(list)
        by_scenario: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            if row.scored:
                value = float(row.score(metric))
                by_try[row.repeat].append(value)
                by_scenario[row.scenario_id].append(value)
        means = [mean(v) for _, v in sorted(by_try.items()) if v]
        within = [pvariance(v) * len(v) / (len(v) - 1) for v in by_scenario.values() if len(v) > 1]
        if len(means) < 2 or not within:
            continue
        sd = math.sqrt(2 * mean(within) / k)
        found[metric] = Noise(repeat_means=means, spread=max(means) - min(means),
                              detectable_drop=detectable_drop(sd, len(by_scenario), confidence=confidence))
    return found


def leaks(rows: Sequence[ResultRow]) -> Leaks | None:
    checked = [row.preference_leak for row in rows if row.preference_leak is not None]
    failed = sum(1 for row in rows if "leak_check" in row.analysis_errors)
    if not checked and not failed:
        return None
    leaked = sum(1 for c in checked if c.get("leaked"))
    return Leaks(checked=len(checked), leaked=leaked, rate=leaked / len(checked) if checked else 0.0, failed=failed)


def turn_curves(rows: Iterable[ResultRow]) -> dict[str, list[TurnPoint]]:
    """Mean turn-level personalization by turn (the paper's Figure 5), from rows judged with ``--turn-level``:
    single-domain and multi-domain apart, and each single-domain domain."""
    by_group: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if not row.turn_personalization:
            continue
        groups = ["multi-domain"] if row.task_kind == "md" else ["single-domain"] + [f"domain:{d}" for d in row.domains[:1]]
        for turn, score in enumerate(row.turn_personalization, start=1):
            if score is not None:
                for group in groups:
                    by_group[group][turn].append(score)
    order = sorted(by_group, key=lambda g: (g.startswith("domain:"), g != "single-domain", g))
    return {g: [TurnPoint(turn=t, n=len(v), mean=mean(v)) for t, v in sorted(by_group[g].items())] for g in order}


def build_report(
    rows: Sequence[ResultRow], thresholds: Thresholds, *, run: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None, gates_enforced: bool = True, comparison: Comparison | None = None,
    expectations: Expectations | None = None, problems: Sequence[str] = (),
    calibration: CalibrationReport | None = None, baseline: Sequence[ResultRow] | None = None,
    retest: JudgeRetest | None = None, not_run: NotRun | None = None, prices: PriceTable | None = None,
    source: RowSource | None = None, tallied: tuple[Ledger, CostLedger] | None = None,
) -> RunReport:
    """``baseline``: the base's rows (``--baseline``), whose scores each changed scenario shows beside its own;
    ``not_run``: how many selected cases the run did not start, why, and whether they were needed (a run stopped
    early; not needed: ``--stop-when-decided`` decided the verdict); ``prices``: the price
    table with the project's overrides (default: the shipped one); ``retest``: the judge's test-retest figures
    (calibration.retest.measure, over the rows that measure it); ``source``: where the whole rows of ``rows`` (then
    digests, :class:`~personalens_testkit.results.digest.RowDigest`) are read again, and ``tallied``: the ledger
    and cost that were added up while the digests were made (:func:`tally_rows`)."""
    agg = thresholds.aggregate
    summaries = summarise(rows, confidence=agg.confidence, counting=(settings or {}).get("completion_counting") or "ours")
    gates = decide_run(evaluate_gates(agg.gates, summaries, min_n=agg.min_n, margins=agg.margin, drifts=agg.drift),
                       comparison, agg, enforced=gates_enforced)
    statuses: dict[str, int] = defaultdict(int)
    sources: dict[str, int] = defaultdict(int)
    for row in rows:
        statuses[row.status] += 1
        if row.status == "error":
            sources[row.error.source if row.error else "setup"] += 1
    if not_run is not None and not_run.count:
        statuses["not_run" if not_run.needed else "not_needed"] = not_run.count
    verdict = run_verdict(rows, gates, agg, gates_enforced=gates_enforced, comparison=comparison,
                          expectations=expectations, problems=problems, not_run=not_run)
    if tallied is None:
        tallied = ledger(rows), cost_ledger(rows, prices if prices is not None else load_prices())
    report = RunReport(
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), run=dict(run or {}),
        settings=dict(settings or {}), counts={"cases": len(rows), **statuses}, errors_by_source=dict(sources),
        confidence=agg.confidence, aggregates=summaries, gates=gates, gates_enforced=gates_enforced,
        gates_passed=all(g.passed is not False for g in gates), ledger=tallied[0], cost=tallied[1],
        repeats=repeats(rows, agg.confidence),
        preference_leaks=leaks(rows),
        judge_retest=retest,
        injection_flagged=[r.case_id for r in rows if r.injection_flags],
        injection_removed=[r.case_id for r in rows if any(f.removed for f in r.injection_flags)],
        turn_curves=turn_curves(rows), turn_level_failed=sum(1 for r in rows if "turn_level" in r.analysis_errors),
        comparison=comparison, judge_calibration=calibration, rows=list(rows),
        verdict=verdict, changes=scenario_changes(rows, verdict, baseline),
    )
    report._source = source
    return report


def tally_rows(source: RowSource, prices: PriceTable, *, billed: Iterable[Any] = ()
               ) -> tuple[list[RowDigest], tuple[Ledger, CostLedger]]:
    """A finished run's digests, and its ledger and cost added up on the way: the rows are read once, one at a time.
    ``billed``: calls of the run outside any case (the preflight's), as rows of calls: in the cost, not the cases'."""
    calls, cost = LedgerTally(spool=True), CostTally(prices)
    digests = source.digests(calls.add, cost.add)
    for row in billed:
        cost.add(row)
    return digests, (calls.result(), cost.result())
