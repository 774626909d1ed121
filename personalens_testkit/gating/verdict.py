"""The run's verdict, decided in one place for the plugin and every command, and shown alike by the exit
code, the terminal, JUnit, report.json and the HTML:

- **cases**: a regression (a case that newly fails, or an error of the bot where it was expected to
  answer) fails the run; a known failure does not; an unexpected pass is listed, with the command that
  updates the expectations;
- **infrastructure**: cases the benchmark's own models (or the setup) could not score are counted
  apart; more than ``max_infrastructure_errors`` of them fail the run - its scores no longer represent
  the sample;
- **aggregate gates** (when enforced), a gate that could not be evaluated when the thresholds say so;
- **the baseline comparison**: a significant drop, or a candidate that leaves too much unscored.
"""

from __future__ import annotations

from typing import Iterable, Literal, Sequence

from pydantic import BaseModel

from ..results.rows import ResultRow
from .aggregate import GateResult
from .compare import Comparison
from .expectations import CaseVerdict, Expectations, row_verdict
from .thresholds import AggregateGates

BASELINE_DROP = "baseline: a score dropped significantly beyond the margin (see the baseline comparison)"


class RunCheck(BaseModel):
    """One run-level check (a gate, the infrastructure errors, the baseline): a test case of its own in JUnit."""

    name: str
    outcome: Literal["passed", "failed", "skipped"]
    message: str
    #: a failure that says the run could not be judged (cases not scored, a gate not evaluated), not that the bot
    #: got worse: alone, it makes the run's verdict ``inconclusive`` rather than ``regressed``
    inconclusive: bool = False


class RunVerdict(BaseModel):
    #: one line per reason the run fails (empty: it passes)
    failures: list[str]
    regressions: list[str] = []
    expected_failures: list[str] = []
    unexpected_passes: list[str] = []
    #: cases whose bot answered differently from the recording in an offline replay: not scored
    reply_changed: list[str] = []
    not_scored: int = 0
    cases: int = 0
    checks: list[RunCheck] = []

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def outcome(self) -> Literal["passed", "regressed", "inconclusive"]:
        """``regressed``: a regression, a failed gate, a significant drop; ``inconclusive``: the run failed only
        because it could not judge (cases not scored, a gate not evaluated)."""
        if self.passed:
            return "passed"
        decisive = self.regressions or any(c.outcome == "failed" and not c.inconclusive for c in self.checks)
        return "regressed" if decisive else "inconclusive"

    @property
    def counts(self) -> str:
        """The cases by verdict, as the terminal's verdict line gives them."""
        return (f"{self.cases} cases: {len(self.regressions)} regression(s), {len(self.expected_failures)} expected "
                f"failure(s), {len(self.unexpected_passes)} unexpected pass(es), {self.not_scored} not scored"
                + (f", {len(self.reply_changed)} with a changed bot reply" if self.reply_changed else ""))

    @property
    def headline(self) -> str:
        """The verdict in one line: passed / regressed / inconclusive, and the first reason (the counts if it passed)."""
        if self.passed:
            return f"passed - {self.counts}"
        first = self.failures[0]
        if self.outcome == "regressed" and not self.regressions:
            first = next(c.message for c in self.checks if c.outcome == "failed" and not c.inconclusive)
        more = len(self.failures) - 1
        return f"{self.outcome} - {first}" + (f" (and {more} more reason(s))" if more else "")

    def of(self, case_id: str, status: str) -> CaseVerdict:
        """A case's verdict in this run (the same for a row of an older version, worked out when the run was judged)."""
        for verdict, ids in (("regression", self.regressions), ("expected failure", self.expected_failures),
                             ("unexpected pass", self.unexpected_passes), ("reply changed", self.reply_changed)):
            if case_id in ids:
                return verdict  # type: ignore[return-value]
        return "not scored" if status == "error" else "pass"


def _listed(ids: list[str], limit: int = 8) -> str:
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _gate_check(gate: GateResult, enforced: bool, rules: AggregateGates) -> RunCheck:
    if not enforced:
        return RunCheck(name=gate.title, outcome="skipped", message=f"reported, not enforced: {gate.describe()}")
    if gate.passed is None:
        outcome = "failed" if rules.fail_when_not_evaluated else "skipped"
        return RunCheck(name=gate.title, outcome=outcome, message=gate.describe(), inconclusive=True)
    return RunCheck(name=gate.title, outcome="passed" if gate.passed else "failed", message=gate.describe())


def run_verdict(rows: Iterable[ResultRow], gates: Iterable[GateResult], rules: AggregateGates, *,
                gates_enforced: bool = True, comparison: Comparison | None = None,
                expectations: Expectations | None = None, problems: Sequence[str] = ()) -> RunVerdict:
    """``problems``: what else failed the run (results that could not be kept), each a failed check."""
    verdicts: dict[str, list[str]] = {}
    for row in rows:
        verdicts.setdefault(row_verdict(row, expectations), []).append(row.case_id)
    cases = sum(len(ids) for ids in verdicts.values())
    regressions, not_scored = verdicts.get("regression", []), len(verdicts.get("not scored", []))
    checks = []
    if cases:
        share = not_scored / cases
        over = share > rules.max_infrastructure_errors
        checks.append(RunCheck(
            name="infrastructure errors", outcome="failed" if over else "passed", inconclusive=over,
            message=(f"infrastructure: {not_scored} of {cases} cases ({share:.0%}) were not scored because the user "
                     f"agent, the judge or the setup failed - over the {rules.max_infrastructure_errors:.0%} allowed: "
                     "the scores no longer represent the sample") if over else
                    f"infrastructure: {not_scored} of {cases} cases not scored (at most "
                    f"{rules.max_infrastructure_errors:.0%} allowed)"))
    changed = verdicts.get("reply changed", [])
    if changed:
        checks.append(RunCheck(
            name="bot replies changed", outcome="failed", inconclusive=True,
            message=f"{len(changed)} case(s) not scored: your bot's replies differ from the recording, and an offline "
                    f"replay calls no model ({_listed(changed)}); score them live with model credentials and "
                    "--record-mode new_episodes, or re-record the cassettes"))
    checks += [_gate_check(gate, gates_enforced, rules) for gate in gates]
    if comparison is not None:
        checks.append(RunCheck(name="baseline coverage", outcome="failed" if comparison.coverage_failure else "passed",
                               inconclusive=bool(comparison.coverage_failure),
                               message=f"baseline: {comparison.coverage_failure}" if comparison.coverage_failure
                               else f"baseline: {comparison.shared_scenarios} scenarios paired"))
        drop = any(r.significant_drop and r.gated for r in comparison.results)
        checks.append(RunCheck(name="baseline comparison", outcome="failed" if drop else "passed",
                               message=BASELINE_DROP if drop else "baseline: no significant drop beyond the margin"))
    checks += [RunCheck(name="run files", outcome="failed", message=problem, inconclusive=True) for problem in problems]
    failures = [f"{len(regressions)} regression(s): {_listed(regressions)}"] if regressions else []
    failures += [check.message for check in checks if check.outcome == "failed"]
    return RunVerdict(failures=failures, regressions=regressions, expected_failures=verdicts.get("expected failure", []),
                      unexpected_passes=verdicts.get("unexpected pass", []), reply_changed=changed,
                      not_scored=not_scored, cases=cases,
                      checks=checks)
