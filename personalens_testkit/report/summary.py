"""The terminal summary of a run report: a Table-3-like table, a per-domain table, the gates, the errors
by source, the call ledger, repeats, injection flags and preference leaks."""

from __future__ import annotations

from ..gating.aggregate import GROUP_TITLES, HEADLINE, SHORT, GroupSummary
from ..gating.compare import Comparison
from ..gating.stats import Estimate
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
    return f"{title:16} {group.scored:>5} {group.errors:>6}  {cells}"


def format_summary(report: RunReport) -> list[str]:
    """The terminal summary, line by line."""
    header = f"{'':16} {'n':>5} {'errors':>6}  " + "  ".join(f"{SHORT[m]:>17}" for m in HEADLINE)
    lines = [f"PersonaLens summary (assistant side; mean [{report.confidence:.0%} bootstrap CI]; errors counted apart, "
             "never scored)", header]
    aggregates = report.aggregates
    lines += [_table_row(GROUP_TITLES[name], aggregates[name]) for name in ("sd", "md", "overall")
              if aggregates[name].scored or aggregates[name].errors]
    domains = [name for name in aggregates if name.startswith("domain:")]
    if domains:
        lines += ["", "per domain (single-domain scenarios)", header]
        lines += [_table_row(name.removeprefix("domain:"), aggregates[name]) for name in domains]
    if report.gates:
        note = "" if report.gates_enforced else " (reported, not enforced: nothing under test ran live)"
        lines += ["", f"aggregate gates{note}:"] + ["  " + gate.describe() for gate in report.gates]
    return lines + _errors(report) + _ledger(report) + _repeats(report) + _flags_and_leaks(report)


def _errors(report: RunReport) -> list[str]:
    errors = report.errors_by_source
    if not errors:
        return []
    parts = [f"{n} {ERROR_SOURCES.get(src, 'from ' + src)}" for src, n in sorted(errors.items())]
    return ["", f"errors (never scored): {sum(errors.values())}: " + ", ".join(parts)
            + " - 'assistant' is your bot; the user agent and the judge are the benchmark's models"]


def _ledger(report: RunReport) -> list[str]:
    def role(name: str, v: dict[str, int]) -> str:
        text = f"{name.replace('_', ' ')} {v['calls']} calls" + (f" ({v['retries']} retries)" if v.get("retries") else "")
        text += f", {v['prompt_tokens']:,} prompt + {v['completion_tokens']:,} completion"
        if v.get("cache_read_tokens") or v.get("cache_write_tokens"):
            text += f" (cache: {v['cache_read_tokens']:,} read, {v['cache_write_tokens']:,} written)"
        return text

    return ["", "calls and tokens: " + "; ".join(role(name, v) for name, v in report.ledger.total.items())]


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


def _flags_and_leaks(report: RunReport) -> list[str]:
    lines = []
    flagged = report.injection_flagged
    if flagged:
        lines.append(f"assistant text that looks addressed to the judge, flagged in {len(flagged)} cases "
                     f"(exact imitations of the judge's answer format taken out before judging in "
                     f"{len(report.injection_removed)}): " + ", ".join(flagged[:5]) + (" ..." if len(flagged) > 5 else ""))
    leak = report.preference_leaks
    if leak:
        lines.append(f"preference leaks in the user agent's opening: {leak.leaked} of {leak.checked} "
                     f"({leak.rate:.0%}) - a leaky user agent inflates personalization")
    return lines


def format_comparison(comparison: Comparison) -> list[str]:
    lines = [f"paired comparison on {comparison.shared_scenarios} shared scenarios "
             f"(candidate - base; {comparison.confidence:.0%} paired bootstrap CI; margin {comparison.margin:g}); "
             f"only in base {comparison.only_in_base}, only in candidate {comparison.only_in_candidate}"]
    for r in comparison.results:
        d = r.difference
        if d.mean is None:
            continue
        name = GROUP_TITLES.get(r.group, r.group.replace("domain:", "domain "))
        flag = " SIGNIFICANT DROP" + ("" if r.gated else " (reported)") if r.significant_drop else ""
        interval = f" [{d.low:+.3f}, {d.high:+.3f}]" if d.low is not None and d.high is not None else ""
        lines.append(f"  {name:24} {SHORT[r.metric]:6} n={r.n:<5} {d.mean:+.3f}{interval}{flag}")
    lines.append("verdict: " + ("a significant drop beyond the margin" if comparison.failed else "no significant drop"))
    return lines
