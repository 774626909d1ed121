"""The terminal summary of a run report: a Table-3-like table, a per-domain table, the gates, the errors
by source, the call ledger, repeats, injection flags and preference leaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..calibration.retest import describe as describe_retest
from ..costs.spend import format_cost
from ..gating.aggregate import GROUP_TITLES, HEADLINE, REPLY_CHANGED, SHORT, GroupSummary
from ..gating.compare import Comparison
from ..gating.stats import Estimate
from ..gating.verdict import RunVerdict
from .model import RunReport

#: how the summary names each source of errors
ERROR_SOURCES = {
    "assistant": "from the assistant", "user_agent": "from the user agent", "judge": "from the judge",
    "setup": "in setting up", "storage": "writing files (a full disk?)", "internal": "inside the testkit (please report)",
}


def _cell(estimate: Estimate) -> str:
    if estimate.mean is None:
        return "-"
    text = f"{estimate.mean:.2f}"
    if estimate.low is not None and estimate.high is not None and estimate.n > 1:
        text += f" [{estimate.low:.2f}-{estimate.high:.2f}]"
    return text


def _table_row(title: str, group: GroupSummary) -> str:
    cells = "  ".join(f"{_cell(group.metrics[m]):>17}" for m in HEADLINE)
    return f"{title:16} {group.scored:>5} {group.assistant_errors:>7} {group.infrastructure_errors:>5}  {cells}"


def table_header() -> str:
    """The head of the summary's tables: the counts, then a column per dimension that rates the assistant."""
    return f"{'':16} {'n':>5} {'bot err':>7} {'infra':>5}  " + "  ".join(f"{SHORT[m]:>17}" for m in HEADLINE)


def format_summary(report: RunReport) -> list[str]:
    """The terminal summary, line by line."""
    header = table_header()
    lines = [f"PersonaLens summary (assistant side; mean over scenarios [{report.confidence:.0%} CI]; n: scored cases)",
             "TCR counts your bot's errors as failures; the user agent's, judge's and setup's errors (infra) are "
             "counted apart, never scored", header]
    aggregates = report.aggregates
    lines += [_table_row(GROUP_TITLES[name], aggregates[name]) for name in ("sd", "md", "overall")
              if aggregates[name].scored or aggregates[name].errors]
    domains = [name for name in aggregates if name.startswith("domain:")]
    if domains:
        lines += ["", "per domain (single-domain scenarios)", header]
        lines += [_table_row(name.removeprefix("domain:"), aggregates[name]) for name in domains]
    lines += unreadable_lines(aggregates)
    if report.gates:
        note = "" if report.gates_enforced else " (reported, not enforced: nothing under test ran live)"
        lines += ["", f"aggregate gates{note}:"] + ["  " + gate.describe() for gate in report.gates]
        lines += _noise(report)
    calibration = report.judge_calibration
    if calibration is not None:
        lines += ["", f"judge calibration: {calibration.summary_line()}"]
    return lines + _errors(report) + _ledger(report) + _repeats(report) + _flags_and_leaks(report)


def unreadable_lines(aggregates: dict[str, GroupSummary]) -> list[str]:
    """The judge answers that could not be read, per dimension (each missing from that figure only), and the
    task-completion rate under the other counting of an unreadable verdict."""
    overall = aggregates.get("overall")
    if overall is None or not overall.unreadable:
        return []
    counts = ", ".join(f"{SHORT.get(m, m)} {n}" for m, n in overall.unreadable.items())
    lines = ["", f"unreadable judge answers (a case error; each missing from its own figure only, the case's other "
                 f"scores counted): {counts}"]
    if "task_completion" in overall.unreadable:
        how = {"ours": "left out", "paper": "counted as not completed (the paper's count)"}
        other = "ours" if overall.completion_counting == "paper" else "paper"
        lines.append(f"  TCR above: an unreadable verdict {how[overall.completion_counting]}; {how[other]}: " + ", ".join(
            f"{GROUP_TITLES[g]} {_cell(aggregates[g].task_completion_other)}" for g in ("sd", "md", "overall")
            if g in aggregates and aggregates[g].task_completion_other is not None and aggregates[g].task_completion_other.n))
    return lines


def _errors(report: RunReport) -> list[str]:
    errors = report.errors_by_source
    if not errors:
        return []
    parts = [f"{n} {ERROR_SOURCES.get(src, 'from ' + src)}" for src, n in sorted(errors.items())]
    return ["", f"errors: {sum(errors.values())}: " + ", ".join(parts)
            + " - 'assistant' is your bot (its errors count as not completed); the user agent and the judge are the "
              "benchmark's models (their errors are not scored)"] + _not_scored(report)


def _not_scored(report: RunReport, limit: int = 5) -> list[str]:
    """The first cases the benchmark's own models (or the setup) could not score, each with its cause."""
    rows = [r for r in report.rows if r.status == "error" and r.error is not None
            and (r.error.source != "assistant" or r.error.kind == REPLY_CHANGED)]
    lines = [f"  not scored: {r.case_id}: {r.error.phase} failed ({r.error.kind}): "
             f"{(r.error.message.splitlines() or [''])[0]}" for r in rows[:limit] if r.error is not None]
    return lines + ([f"  ... and {len(rows) - limit} more (see the rows' error field)"] if len(rows) > limit else [])


def _ledger(report: RunReport) -> list[str]:
    def role(name: str, v: dict[str, int]) -> str:
        notes = [f"{v['replayed']} replayed, {v['calls'] - v['replayed']} live"] if v.get("replayed") else []
        notes += [f"{v['retries']} retries"] if v.get("retries") else []
        text = f"{name.replace('_', ' ')} {v['calls']} calls" + (f" ({', '.join(notes)})" if notes else "")
        text += f", {v['prompt_tokens']:,} prompt + {v['completion_tokens']:,} completion"
        if v.get("cache_read_tokens") or v.get("cache_write_tokens"):
            text += f" (cache: {v['cache_read_tokens']:,} read, {v['cache_write_tokens']:,} written)"
        return text

    return ["", "calls and tokens: " + "; ".join(role(name, v) for name, v in report.ledger.total.items()),
            *cost_lines(report)]


def cost_lines(report: RunReport) -> list[str]:
    """What the run's live calls cost, per role and in total, and what the replayed ones would have."""
    cost = report.cost
    if cost is None:
        return []
    parts = []
    for name, role in cost.roles.items():
        if not role.live_calls and not role.replayed_calls:
            continue
        shown = format_cost(role.spent) if role.spent is not None else f"cost unknown ({role.reason})"
        parts.append(f"{name.replace('_', ' ')} {shown}")
    total = format_cost(cost.total_spent) if cost.total_spent is not None else \
        f"cost unknown (at least {format_cost(cost.known_spent)})"
    line = f"cost: {total} - " + "; ".join(parts)
    if cost.total_replayed_value:
        line += f"; replaying saved {format_cost(cost.total_replayed_value)}"
    return [line]


def _repeats(report: RunReport) -> list[str]:
    rep = report.repeats
    if rep is None:
        return []
    p = rep.pass_hat_k
    head = (f"repeats: k={rep.k} over {rep.scenarios} scenarios; task completion pass^1 {rep.pass_hat_1:.2f}, "
            f"pass^{rep.k} {p:.2f}" if p is not None else f"repeats: k={rep.k}")
    varying = ", ".join(f"{SHORT.get(m, m)} {v.scenarios_that_vary}/{v.scenarios}"
                        for m, v in rep.spread.items() if v.scenarios)
    return [head, f"  scenarios whose score varied across repeats: {varying}"]


def _noise(report: RunReport) -> list[str]:
    """Beside the gates: how far the run's means move between repeats, and the smallest drop it could detect."""
    rep = report.repeats
    if rep is None or not rep.noise:
        return []
    lines = [f"  noise floor (--repeat {rep.k}, {rep.scenarios} scenarios):"]
    for metric, noise in rep.noise.items():
        means = ", ".join(f"{m:.3f}" for m in noise.repeat_means)
        drop = (f"; smallest drop detectable if every scenario dropped alike {noise.detectable_drop:.3f} (a drop on "
                f"some scenarios only varies more: the baseline comparison prints its own)"
                if noise.detectable_drop is not None else "")
        lines.append(f"    {SHORT.get(metric, metric)}: per-repeat means {means} (spread {noise.spread:.3f}){drop}")
    return lines


def _flags_and_leaks(report: RunReport) -> list[str]:
    lines = [check.message for check in report.verdict.checks if check.name == "user agent" and check.outcome == "passed"]
    voided, why = report.verdict.user_agent, report.verdict.user_agent_why
    if voided:
        lines.append(f"inconclusive (user agent), out of every figure: {len(voided)} case(s): "
                     + "; ".join(f"{case}: {why.get(case, '')}" for case in voided[:3]) + (" ..." if len(voided) > 3 else ""))
    flagged = report.injection_flagged
    if flagged:
        lines.append(f"assistant text that looks addressed to the judge, flagged in {len(flagged)} cases "
                     f"(exact imitations of the judge's answer format taken out before judging in "
                     f"{len(report.injection_removed)}): " + ", ".join(flagged[:5]) + (" ..." if len(flagged) > 5 else ""))
    leak = report.preference_leaks
    if leak and leak.checked:
        lines.append(f"preference leaks in the user agent's opening: {leak.leaked} of {leak.checked} "
                     f"({leak.rate:.0%}) - a leaky user agent inflates personalization")
    failed = {"leak check": leak.failed if leak else 0, "turn-level": report.turn_level_failed}
    if any(failed.values()):
        first = next((f"{row.case_id}: {why}" for row in report.rows for why in row.analysis_errors.values()), "")
        lines.append("optional analyses that failed (the dialogues' scores stand): "
                     + ", ".join(f"{name} {count} dialogue(s)" for name, count in failed.items() if count)
                     + (f"; the first: {first}" if first else ""))
    if report.judge_retest is not None:
        lines += describe_retest(report.judge_retest)
    return lines


def format_verdict(verdict: RunVerdict, results: Path | None = None) -> list[str]:
    """The run's verdict beyond its cases' own lines: known failures, unexpected passes (with the command that
    updates the expectations), cases not scored - the failures themselves are printed as FAILED lines."""
    lines = [f"personalens: verdict: {verdict.label} ({verdict.counts})"]
    lines += [f"personalens: inconclusive: {reason}" for reason in verdict.undecided]
    if verdict.unconfirmed:
        lines.append(f"personalens: below a floor on a live judgement, not confirmed (the judge's noise explains "
                     f"it as well as the bot does; the gates and the baseline decide): "
                     f"{', '.join(verdict.unconfirmed[:8])}" + (" ..." if len(verdict.unconfirmed) > 8 else ""))
    if verdict.unexpected_passes:
        command = f"personalens expectations update {results or 'RESULTS'}"
        lines.append(f"personalens: now passing, expected to fail: {', '.join(verdict.unexpected_passes[:8])}"
                     + (" ..." if len(verdict.unexpected_passes) > 8 else "") + f" - update the expectations: {command}")
    return lines


def format_comparison(comparison: Comparison) -> list[str]:
    c = comparison.coverage
    lines = [f"paired comparison on {comparison.shared_scenarios} shared scenarios (candidate - base; "
             f"{comparison.confidence:.0%} CI, Student-t over scenarios; {comparison.margin_text()})"]
    if c is not None:
        lines.append(f"coverage: {c.paired} of the base's {c.base} scored scenarios paired; only in base {c.only_in_base}, "
                     f"only in candidate {c.only_in_candidate}, errored in the candidate {c.errored_in_candidate}, "
                     f"errored in the base {c.errored_in_base} (task completion counts a bot's errors as not completed)")
    for r in comparison.results:
        d = r.difference
        if d.mean is None:
            continue
        name = GROUP_TITLES.get(r.group, r.group.replace("domain:", "domain "))
        flag = " SIGNIFICANT DROP" + ("" if r.gated else " (reported)") if r.significant_drop else ""
        flag = flag if r.evaluated else " (not evaluated: too few scenarios)"
        flag += f" UNDECIDED ({r.undecided})" if r.decision == "undecided" else ""
        interval = f" [{d.low:+.3f}, {d.high:+.3f}]" if d.low is not None and d.high is not None else ""
        detectable = f"; detectable drop {r.detectable_drop:.3f}" if r.detectable_drop is not None and r.gated else ""
        replayed = f"; {r.replayed} replayed unchanged" if r.replayed else ""
        lines.append(f"  {name:24} {SHORT[r.metric]:6} n={r.n:<5} {d.mean:+.3f}{interval}{flag}{detectable}{replayed}")
    if comparison.coverage_failure:
        lines.append(f"coverage: FAILED: {comparison.coverage_failure}")
    gated = [r for r in comparison.results if r.gated and r.required and r.n]
    if any(r.significant_drop and r.gated for r in comparison.results):
        said = "a significant drop beyond the judge's drift"
    elif gated and all(r.decision == "green" for r in gated):
        said = "no drop that matters: every gated difference shown within its margin"
    else:
        undecided = sum(1 for r in gated if r.decision == "undecided")
        unevaluated = sum(1 for r in gated if r.decision == "not evaluated")
        said = (f"inconclusive: {undecided} gated difference(s) shown neither within the margin nor below the drift, "
                f"{unevaluated} not evaluated (too few scenarios)")
    lines.append("verdict: " + said + ("; the coverage fails" if comparison.coverage_failure else ""))
    return lines


def savings_lines(report: RunReport) -> list[str]:
    """A run that stopped when its verdict was decided: the decision, and what the cases not needed would have
    spent (the cases run's mean per case, times the cases not run)."""
    unneeded = report.counts.get("not_needed", 0)
    check = next((c for c in report.verdict.checks if c.name == "decided early"), None)
    if check is None:
        return []
    lines = [f"stopped when decided: {check.message}"]
    ran = max(1, sum(report.counts.get(k, 0) for k in ("passed", "failed", "error")))
    calls = sum(v["calls"] - v["replayed"] for v in report.ledger.total.values())
    tokens = sum(v["prompt_tokens"] + v["completion_tokens"] for v in report.ledger.total.values())
    cost = report.cost.total_spent if report.cost is not None else None
    saved_cost = format_cost(cost * unneeded / ran) if cost is not None else "cost unknown"
    lines.append(f"saved against the full selection ({ran + unneeded} cases): about {round(calls * unneeded / ran):,} "
                 f"live calls, {round(tokens * unneeded / ran):,} tokens and {saved_cost} "
                 f"({unneeded} case(s) not run x this run's mean per case)")
    return lines


def stop_lines(stopped: str | None, report: RunReport | None, writer: Any) -> list[tuple[str, bool]]:
    """Why a run stopped before its last case, each line with whether it is an early stop to act on (a budget, a
    full disk, a dead endpoint: finish the run with --resume) rather than a decided verdict."""
    if stopped is None:
        return []
    decided = savings_lines(report) if report is not None else []
    if decided:  # the run's verdict was decided (its "decided early" check): no stop to act on
        return [(line, False) for line in decided]
    if writer is None:
        return []
    return [(f"STOPPED early: {stopped}; every case run has its row; finish the run with --resume {writer.path}", True)]
