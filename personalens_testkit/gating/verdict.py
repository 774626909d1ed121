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

from typing import Iterable, Literal, NamedTuple, Optional, Sequence

from pydantic import BaseModel, PrivateAttr, computed_field

from ..results.rows import USER_AGENT_VERDICT, ResultRow
from .aggregate import GateResult
from .compare import Comparison, apply_decision, as_test
from .decision import Test, decide
from .expectations import CaseVerdict, Expectations, row_verdict
from .thresholds import AggregateGates
from .user_agent import faulted_share, reruns, why

BASELINE_DROP = "baseline: a score dropped significantly beyond the judge's drift (see the baseline comparison)"


class NotRun(NamedTuple):
    """Selected cases a run did not start: how many, why, whether they were needed (not needed:
    ``--stop-when-decided`` decided the verdict without them), and whether the run was interrupted (Ctrl-C, or a
    stop that is not the testkit's): an interrupted run's verdict is ``interrupted``, never a pass."""

    count: int
    reason: str
    needed: bool = True
    interrupted: bool = False
    #: the verdict --stop-when-decided decided without them ("red" or "green"; None: they were needed)
    decision: str | None = None


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
    #: cases below a floor on a live judgement, not confirmed by judging again: evidence, not a verdict
    unconfirmed: list[str] = []
    #: cases whose dialogue the user agent spoiled (inconclusive (user agent)), and why, by case
    user_agent: list[str] = []
    user_agent_why: dict[str, str] = {}
    _by_case: Optional[dict[str, str]] = PrivateAttr(default=None)
    #: checks neither shown passed nor failed at this n (inconclusive; failing only with fail_when_inconclusive)
    undecided: list[str] = []
    not_scored: int = 0
    cases: int = 0
    checks: list[RunCheck] = []
    #: why and where the run was interrupted (how many of the selected cases ran): its outcome is ``interrupted``
    interrupted: Optional[str] = None

    @property
    def passed(self) -> bool:
        return not self.failures

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> Literal["passed", "regressed", "inconclusive", "interrupted"]:
        """``interrupted``: the run did not run all its selected cases because it was interrupted, whatever those
        it ran showed; ``regressed``: a regression, a gate or a baseline difference shown below its bar;
        ``inconclusive``: no such thing, but the run could not judge everything (cases not scored, a gate not
        evaluated) or showed neither way at this n; ``passed``: everything shown at or above its bar."""
        if self.interrupted:
            return "interrupted"
        decisive = self.regressions or any(c.outcome == "failed" and not c.inconclusive for c in self.checks)
        if decisive:
            return "regressed"
        return "inconclusive" if self.failures or self.undecided else "passed"

    @property
    def counts(self) -> str:
        """The cases by verdict, as the terminal's verdict line gives them."""
        return (f"{self.cases} cases: {len(self.regressions)} regression(s), {len(self.expected_failures)} expected "
                f"failure(s), {len(self.unexpected_passes)} unexpected pass(es), {self.not_scored} not scored"
                + (f", {len(self.unconfirmed)} below a floor on a live judgement (unconfirmed)" if self.unconfirmed else "")
                + (f", {len(self.reply_changed)} with a changed bot reply" if self.reply_changed else "")
                + (f", {len(self.user_agent)} inconclusive (user agent)" if self.user_agent else ""))

    @property
    def label(self) -> str:
        """The outcome as the terminal, the job summary and the HTML name it, with whether it fails the run."""
        if self.outcome == "passed":
            return "passed"
        if self.outcome == "regressed":
            return "REGRESSED"
        if self.outcome == "interrupted":
            return "INTERRUPTED, fails the run"
        return "INCONCLUSIVE, fails the run" if self.failures else \
            "inconclusive, does not fail the run (fail_when_inconclusive: false)"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def headline(self) -> str:
        """The verdict in one line: passed / regressed / inconclusive, and the first reason (the counts if it passed)."""
        reasons = self.failures or self.undecided
        if self.outcome == "passed" or not reasons:
            return f"{self.outcome} - {self.counts}"
        first = reasons[0]
        if self.interrupted:
            return f"interrupted - {self.interrupted}"
        if self.outcome == "regressed" and not self.regressions:
            first = next(c.message for c in self.checks if c.outcome == "failed" and not c.inconclusive)
        more = len(reasons) - 1
        return f"{self.outcome} - {first}" + (f" (and {more} more reason(s))" if more else "")

    def of(self, case_id: str, status: str) -> CaseVerdict:
        """A case's verdict in this run (the same for a row of an older version, worked out when the run was judged)."""
        if self._by_case is None:  # looked up once per case by every output: a dict, not a scan of the lists
            self._by_case = {}
            for verdict, ids in ((USER_AGENT_VERDICT, self.user_agent), ("unconfirmed", self.unconfirmed),
                                 ("reply changed", self.reply_changed),
                                 ("unexpected pass", self.unexpected_passes), ("expected failure", self.expected_failures),
                                 ("regression", self.regressions)):  # the first list that names a case wins
                self._by_case.update(dict.fromkeys(ids, verdict))
        found = self._by_case.get(case_id)
        if found is not None:
            return found  # type: ignore[return-value]
        return "not scored" if status == "error" else "pass"


def _listed(ids: list[str], limit: int = 8) -> str:
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def decide_run(gates: Sequence[GateResult], comparison: Comparison | None, rules: AggregateGates, *,
               enforced: bool = True) -> list[GateResult]:
    """One decision over everything that gates (the enforced gates and the baseline's gated differences), at the
    thresholds' confidence: Holm's procedure (gating/decision.py). Returns the gates with their decisions; the
    comparison's differences are decided in place."""
    gate_tests = [Test.against(g.title, g.p_below if enforced else None, g.estimate.n, g.estimate,
                               green_bar=g.green_bar, red_bar=g.red_bar, what="a value below") for g in gates]
    differences = comparison.results if comparison is not None else []
    difference_tests = [as_test(r) for r in differences] if comparison is not None else []
    decide([*gate_tests, *difference_tests], rules.confidence)
    for result, test in zip(differences, difference_tests):
        apply_decision(result, test)
    if comparison is not None:
        comparison.failed = comparison.coverage_failure is not None or any(r.significant_drop and r.gated
                                                                            for r in differences)
    return [g.model_copy(update={"decision": t.decision, "passed": _passed(g, t), "undecided": t.undecided_text()
                                 if t.decision == "undecided" else ""}) for g, t in zip(gates, gate_tests)]


def _passed(gate: GateResult, test: Test) -> bool | None:
    if test.decision == "not evaluated":
        return gate.passed if gate.p_below is not None else None  # reported, not enforced: as measured
    return {"red": False, "green": True}.get(test.decision)


def _gate_check(gate: GateResult, enforced: bool, rules: AggregateGates) -> RunCheck:
    if not enforced:
        return RunCheck(name=gate.title, outcome="skipped", message=f"reported, not enforced: {gate.describe()}")
    if gate.decision == "undecided":
        return RunCheck(name=gate.title, outcome="skipped", message=gate.describe(), inconclusive=True)
    if gate.estimate.n == 0:  # no scenario in its scope (a multi-domain gate on a single-domain run): not applicable
        return RunCheck(name=gate.title, outcome="skipped", message=gate.describe())
    if gate.passed is None:  # too few scenarios: not passed - inconclusive, failing the run when the thresholds say so
        outcome = "failed" if rules.fail_when_not_evaluated else "skipped"
        return RunCheck(name=gate.title, outcome=outcome, message=gate.describe(), inconclusive=True)
    return RunCheck(name=gate.title, outcome="passed" if gate.passed else "failed", message=gate.describe())


def _baseline_checks(comparison: Comparison) -> list[RunCheck]:
    checks = [RunCheck(name="baseline coverage", outcome="failed" if comparison.coverage_failure else "passed",
                       inconclusive=bool(comparison.coverage_failure),
                       message=f"baseline: {comparison.coverage_failure}" if comparison.coverage_failure
                       else f"baseline: {comparison.shared_scenarios} scenarios paired")]
    drops = [r for r in comparison.results if r.significant_drop and r.gated]
    undecided = [r for r in comparison.results if r.gated and r.decision == "undecided"]
    # too few paired scenarios to say anything (but some): not passed either
    unevaluated = [r for r in comparison.results if r.gated and r.decision == "not evaluated" and r.n]
    if drops:
        checks.append(RunCheck(name="baseline comparison", outcome="failed", message=BASELINE_DROP))
    elif undecided:
        first = undecided[0]
        checks.append(RunCheck(
            name="baseline comparison", outcome="skipped", inconclusive=True,
            message=f"baseline: INCONCLUSIVE: {len(undecided)} difference(s) neither shown within the margin nor "
                    f"below the judge's drift, e.g. {first.metric} {first.group} {first.difference.describe(3)} "
                    f"(green at or above -{first.margin:g}, red below -{first.drift:g}); {first.undecided}"))
    elif unevaluated:
        first = unevaluated[0]
        checks.append(RunCheck(
            name="baseline comparison", outcome="skipped", inconclusive=True,
            message=f"baseline: NOT EVALUATED, not passed: {len(unevaluated)} difference(s) on too few paired "
                    f"scenarios, e.g. {first.metric} {first.group} on {first.n}"))
    else:
        checks.append(RunCheck(name="baseline comparison", outcome="passed",
                               message="baseline: every gated difference shown within its margin"))
    return checks


def _user_agent_check(rows: Sequence[ResultRow], cases: int, rules: AggregateGates) -> RunCheck:
    """The user agent's faults over the run: failed (inconclusive) when it spoiled more than
    ``max_user_agent_faults`` of the cases; the share of dialogues it faulted in, by rule, either way."""
    faulted, voided, per_rule = faulted_share(rows)
    kinds = ", ".join(f"{rule} {count}" for rule, count in sorted(per_rule.items(), key=lambda item: -item[1]))
    rate = f"faults in {faulted} of {cases} dialogues ({faulted / cases:.0%})" + (f": {kinds}" if kinds else "")
    again = reruns(rows)
    rate += f"; {again}" if again else ""
    share, allowed = voided / cases, rules.max_user_agent_faults
    if share > allowed:
        return RunCheck(name="user agent", outcome="failed", inconclusive=True,
                        message=f"the user agent, not the bot, failed in {share:.0%} of dialogues ({voided} of {cases} "
                                f"cases inconclusive (user agent), over the {allowed:.0%} allowed; {rate})")
    return RunCheck(name="user agent", outcome="passed",
                    message=f"user agent: {rate}; {voided} case(s) inconclusive (user agent), at most {allowed:.0%} "
                            f"allowed (user_agent_faults: {rules.user_agent_faults})")


def run_verdict(rows: Iterable[ResultRow], gates: Iterable[GateResult], rules: AggregateGates, *,
                gates_enforced: bool = True, comparison: Comparison | None = None,
                expectations: Expectations | None = None, problems: Sequence[str] = (),
                not_run: NotRun | None = None) -> RunVerdict:
    """``problems``: what else failed the run (results that could not be kept), each a failed check; ``not_run``:
    the selected cases not run - needed (the run stopped early, or was interrupted: the verdict cannot be a pass),
    or not needed (the sequential decision that stopped a ``--stop-when-decided`` run)."""
    rows = list(rows)
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
    if cases:
        checks.append(_user_agent_check(rows, cases, rules))
    changed = verdicts.get("reply changed", [])
    if changed:
        checks.append(RunCheck(
            name="bot replies changed", outcome="failed", inconclusive=True,
            message=f"{len(changed)} case(s) not scored: your bot's replies differ from the recording, and an offline "
                    f"replay calls no model ({_listed(changed)}); score them live with model credentials and "
                    "--record-mode new_episodes, or re-record the cassettes"))
    checks += [_gate_check(gate, gates_enforced, rules) for gate in gates]
    if comparison is not None:
        checks += _baseline_checks(comparison)
    checks += [RunCheck(name="run files", outcome="failed", message=problem, inconclusive=True) for problem in problems]
    interrupted = not_run.reason if not_run is not None and not_run.interrupted else None
    if interrupted:
        checks.append(RunCheck(name="interrupted", outcome="failed", message=f"interrupted: {interrupted}",
                               inconclusive=True))
    elif not_run is not None and not_run.needed and not_run.count:
        checks.append(RunCheck(name="cases not run", outcome="failed", inconclusive=True,
                               message=f"{not_run.count} selected case(s) not run: {not_run.reason}"))
    elif not_run is not None and not not_run.needed:
        checks.append(RunCheck(name="decided early", outcome="failed" if not_run.decision == "red" else "passed",
                               message=f"{not_run.reason}; {not_run.count} case(s) not needed (not run, never counted "
                                       "as passed)"))
    failures = [f"{len(regressions)} regression(s): {_listed(regressions)}"] if regressions else []
    failures += [check.message for check in checks if check.outcome == "failed"]
    undecided = [check.message for check in checks if check.outcome == "skipped" and check.inconclusive]
    if rules.fail_when_inconclusive:
        failures += undecided
    return RunVerdict(failures=failures, regressions=regressions, expected_failures=verdicts.get("expected failure", []),
                      unexpected_passes=verdicts.get("unexpected pass", []), reply_changed=changed,
                      unconfirmed=verdicts.get("unconfirmed", []), undecided=undecided,
                      user_agent=[row.case_id for row in rows if row.verdict == USER_AGENT_VERDICT],
                      user_agent_why={row.case_id: why(row.user_faults) for row in rows
                                      if row.verdict == USER_AGENT_VERDICT},
                      not_scored=not_scored, cases=cases, checks=checks, interrupted=interrupted)
