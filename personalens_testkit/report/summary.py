"""The run report: aggregates with confidence intervals, gates, the call ledger, repeats,
preference leaks and the turn-level curve - as one JSON-ready dict, and as terminal text.

Built from result rows only (those of a finished run, or of a results file), so the
report of a run and ``personalens report RESULTS`` are the same.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from statistics import mean
from typing import Any, Iterable, Mapping, Sequence

from ..data.models import case_id
from ..gating.aggregate import GROUP_TITLES, HEADLINE, SHORT, GateResult, evaluate_gates, is_scored, summarise
from ..gating.stats import pass_hat_k
from ..gating.thresholds import Thresholds
from ..scales import METRICS

REPORT_VERSION = 1
#: how the summary names each source of errors
ERROR_SOURCES = {
    "assistant": "from the assistant", "user_agent": "from the user agent", "judge": "from the judge",
    "setup": "in setting up", "storage": "writing files (a full disk?)", "internal": "inside the testkit (please report)",
}
ROLES = ("user_agent", "assistant", "judge")


def ledger(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Calls and tokens per role, in total and per scenario."""
    def empty() -> dict[str, int]:
        return {"calls": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0,
                "cache_read_tokens": 0, "cache_write_tokens": 0}

    total: dict[str, dict[str, int]] = {role: empty() for role in ROLES}
    per_scenario: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        mine = per_scenario.setdefault(case_id(row["scenario_id"], row.get("repeat")), {role: empty() for role in ROLES})
        for call in row.get("calls", []):
            for book in (total, mine):
                entry = book.setdefault(call["role"], empty())
                entry["calls"] += 1
                entry["retries"] += (call.get("attempts") or 1) - 1
                entry["prompt_tokens"] += call.get("prompt_tokens") or 0
                entry["completion_tokens"] += call.get("completion_tokens") or 0
                entry["cache_read_tokens"] += call.get("cache_read_tokens") or 0
                entry["cache_write_tokens"] += call.get("cache_write_tokens") or 0
    return {"total": total, "per_scenario": per_scenario}


def repeats(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """With ``--repeat K``: pass^k of task completion and each score's spread across a scenario's tries."""
    k = max((row.get("repeat") or 1 for row in rows), default=1)
    if k < 2:
        return None
    tries: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if is_scored(row):
            tries[row["scenario_id"]].append(row)
    completions = [[r["scores"]["task_completion"] for r in group] for group in tries.values()]
    spread = {}
    for metric in METRICS:
        ranges = [max(float(r["scores"][metric.name]) for r in g) - min(float(r["scores"][metric.name]) for r in g)
                  for g in tries.values() if len(g) > 1]
        spread[metric.name] = {"mean_range": mean(ranges) if ranges else None,
                               "scenarios_that_vary": sum(1 for x in ranges if x > 0), "scenarios": len(ranges)}
    return {"k": k, "pass_hat_k": pass_hat_k(completions, k), "pass_hat_1": pass_hat_k(completions, 1),
            "scenarios": len(tries), "spread": spread}


def leaks(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    checked = [row["preference_leak"] for row in rows if row.get("preference_leak") is not None]
    if not checked:
        return None
    leaked = sum(1 for c in checked if c.get("leaked"))
    return {"checked": len(checked), "leaked": leaked, "rate": leaked / len(checked)}


def turn_curve(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mean turn-level personalization by turn (the paper's Figure 5), from rows judged with ``--turn-level``."""
    by_turn: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        for turn, score in enumerate(row.get("turn_personalization") or [], start=1):
            if score is not None:
                by_turn[turn].append(score)
    return [{"turn": t, "n": len(v), "mean": mean(v)} for t, v in sorted(by_turn.items())]


def build_report(
    rows: Sequence[Mapping[str, Any]], thresholds: Thresholds, *, run: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None, gates_enforced: bool = True, comparison: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    agg = thresholds.aggregate
    summaries = summarise(rows, confidence=agg.confidence, resamples=agg.resamples)
    gates = evaluate_gates(agg.gates, summaries)
    statuses: dict[str, int] = defaultdict(int)
    sources: dict[str, int] = defaultdict(int)
    for row in rows:
        statuses[row.get("status", "?")] += 1
        if row.get("status") == "error":
            sources[(row.get("error") or {}).get("source", "setup")] += 1
    return {
        "report_version": REPORT_VERSION,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run": dict(run or {}),
        "settings": dict(settings or {}),
        "counts": {"cases": len(rows), **statuses},
        "errors_by_source": dict(sources),
        "confidence": agg.confidence,
        "aggregates": {name: s.as_dict() for name, s in summaries.items()},
        "gates": [g.as_dict() for g in gates],
        "gates_enforced": gates_enforced,
        "gates_passed": all(g.passed is not False for g in gates),
        "ledger": ledger(rows),
        "repeats": repeats(rows),
        "preference_leaks": leaks(rows),
        "injection_flagged": [case_id(r["scenario_id"], r.get("repeat")) for r in rows if r.get("injection_flags")],
        "injection_removed": [case_id(r["scenario_id"], r.get("repeat")) for r in rows
                              if any(f.get("removed") for f in r.get("injection_flags") or [])],
        "turn_curve": turn_curve(rows),
        "comparison": dict(comparison) if comparison else None,
        "rows": list(rows),
    }


def failed_gates(report: Mapping[str, Any]) -> list[str]:
    """One line per failed gate (empty when all passed or none was set)."""
    return [gate_line(g) for g in report["gates"] if g["passed"] is False]


def gate_line(gate: Mapping[str, Any]) -> str:
    from ..gating.stats import Estimate

    estimate = Estimate(**gate["estimate"])
    return GateResult(gate["metric"], gate["scope"], gate["on"], gate["threshold"], estimate, gate["passed"]).describe()


def _cell(estimate: Mapping[str, Any]) -> str:
    if estimate["mean"] is None:
        return "-"
    digits = 2
    text = f"{estimate['mean']:.{digits}f}"
    if estimate["low"] is not None and estimate["high"] is not None and estimate["n"] > 1:
        text += f" [{estimate['low']:.{digits}f}-{estimate['high']:.{digits}f}]"
    return text


def _table_row(title: str, group: Mapping[str, Any]) -> str:
    cells = "  ".join(f"{_cell(group['metrics'][m]):>17}" for m in HEADLINE)
    return f"{title:16} {group['scored']:>5} {group['errors']:>6}  {cells}"


def format_summary(report: Mapping[str, Any]) -> list[str]:
    """The terminal summary: a Table-3-like table, a per-domain table, gates, ledger, repeats, leaks."""
    lines: list[str] = []
    aggregates = report["aggregates"]
    conf = f"{report['confidence']:.0%}"
    header = f"{'':16} {'n':>5} {'errors':>6}  " + "  ".join(f"{SHORT[m]:>17}" for m in HEADLINE)
    lines.append(f"PersonaLens summary (assistant side; mean [{conf} bootstrap CI]; errors counted apart, never scored)")
    lines.append(header)
    for name in ("sd", "md", "overall"):
        group = aggregates[name]
        if group["scored"] or group["errors"]:
            lines.append(_table_row(GROUP_TITLES[name], group))
    domains = [name for name in aggregates if name.startswith("domain:")]
    if domains:
        lines.append("")
        lines.append("per domain (single-domain scenarios)")
        lines.append(header)
        for name in domains:
            lines.append(_table_row(name.removeprefix("domain:"), aggregates[name]))
    if report["gates"]:
        lines.append("")
        note = "" if report["gates_enforced"] else " (reported, not enforced: nothing under test ran live)"
        lines.append(f"aggregate gates{note}:")
        for gate in report["gates"]:
            lines.append("  " + gate_line(gate))
    errors = report.get("errors_by_source") or {}
    if errors:
        lines.append("")
        parts = [f"{n} {ERROR_SOURCES.get(src, 'from ' + src)}" for src, n in sorted(errors.items())]
        lines.append(f"errors (never scored): {sum(errors.values())}: " + ", ".join(parts)
                     + " - 'assistant' is your bot; the user agent and the judge are the benchmark's models")
    total = report["ledger"]["total"]
    lines.append("")
    lines.append("calls and tokens: " + "; ".join(
        f"{role.replace('_', ' ')} {v['calls']} calls" + (f" ({v['retries']} retries)" if v.get("retries") else "")
        + f", {v['prompt_tokens']:,} prompt + {v['completion_tokens']:,} completion"
        + (f" (cache: {v['cache_read_tokens']:,} read, {v['cache_write_tokens']:,} written)"
           if v.get("cache_read_tokens") or v.get("cache_write_tokens") else "")
        for role, v in total.items()))
    rep = report.get("repeats")
    if rep:
        p = rep["pass_hat_k"]
        lines.append(f"repeats: k={rep['k']} over {rep['scenarios']} scenarios; task completion pass^1 "
                     f"{rep['pass_hat_1']:.2f}, pass^{rep['k']} {p:.2f}" if p is not None else f"repeats: k={rep['k']}")
        varying = ", ".join(f"{SHORT.get(m, m)} {v['scenarios_that_vary']}/{v['scenarios']}"
                            for m, v in rep["spread"].items() if v["scenarios"])
        lines.append(f"  scenarios whose score varied across repeats: {varying}")
    flagged = report.get("injection_flagged") or []
    if flagged:
        removed = len(report.get("injection_removed") or [])
        lines.append(f"assistant text that looks addressed to the judge, flagged in {len(flagged)} cases "
                     f"(exact imitations of the judge's answer format taken out before judging in {removed}): "
                     + ", ".join(flagged[:5]) + (" ..." if len(flagged) > 5 else ""))
    leak = report.get("preference_leaks")
    if leak:
        lines.append(f"preference leaks in the user agent's opening: {leak['leaked']} of {leak['checked']} "
                     f"({leak['rate']:.0%}) - a leaky user agent inflates personalization")
    return lines
