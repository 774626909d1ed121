"""Two runs on the same scenarios: paired differences with bootstrap intervals, and the
verdict of a baseline gate (a drop is significant when the whole interval of the
difference lies below ``-margin``).

Rows pair by scenario id; repeated tries of a scenario are averaged first. Only scenarios
scored in both runs count.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import UsageError
from ..gating.aggregate import GROUP_TITLES, HEADLINE, SHORT, is_scored
from ..gating.stats import paired_difference

#: Groups whose significant drop fails a comparison by default (domains are reported only).
GATED_GROUPS = ("overall", "sd", "md")


def load_rows(path: Path, *, what: str = "results") -> list[dict[str, Any]]:
    """Rows of a report JSON (``report.json``), a results file (``results.jsonl``; a torn last
    line left by a killed run is skipped), or a JSON list of rows or labels."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what} {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        lines = text.splitlines(keepends=True)
        complete = [line for line in lines if line.strip() and line.endswith("\n")] or [l for l in lines if l.strip()]
        try:
            data = [json.loads(line) for line in complete]
        except json.JSONDecodeError as exc:
            raise UsageError(f"{what} {path}: not JSON or JSON lines ({exc.msg})") from None
    if isinstance(data, dict) and "scenario_id" in data:
        data = [data]  # a results file of one row
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "scenario_id" in r for r in rows):
        raise UsageError(f"{what} {path}: expected a report JSON with rows, or result rows with scenario_id")
    return rows


def _means_by_scenario(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    tries: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if is_scored(row):
            tries[row["scenario_id"]].append(row)
    means = {}
    for sid, group in tries.items():
        first = group[0]
        means[sid] = {
            "task_kind": first.get("task_kind"), "domains": first.get("domains", []),
            "scores": {m: sum(float(r["scores"][m]) for r in group) / len(group) for m in HEADLINE},
        }
    return means


def compare_rows(base: Iterable[Mapping[str, Any]], candidate: Iterable[Mapping[str, Any]], *, margin: float = 0.0,
                 confidence: float = 0.95, gate_domains: bool = False) -> dict[str, Any]:
    a, b = _means_by_scenario(base), _means_by_scenario(candidate)
    shared = sorted(set(a) & set(b))
    groups: dict[str, list[str]] = {"overall": shared, "sd": [], "md": []}
    for sid in shared:
        groups.setdefault(a[sid]["task_kind"] or "sd", []).append(sid)
        if a[sid]["task_kind"] == "sd" and a[sid]["domains"]:
            groups.setdefault(f"domain:{a[sid]['domains'][0]}", []).append(sid)
    results = []
    for group, ids in groups.items():
        if not ids:
            continue
        for metric in HEADLINE:
            diff = paired_difference([a[s]["scores"][metric] for s in ids], [b[s]["scores"][metric] for s in ids],
                                     confidence=confidence)
            drop = diff.high is not None and diff.high < -margin
            gated = group in GATED_GROUPS or (gate_domains and group.startswith("domain:"))
            results.append({"group": group, "metric": metric, "n": len(ids), "difference": diff.as_dict(),
                            "significant_drop": drop, "gated": gated})
    return {
        "shared_scenarios": len(shared), "only_in_base": len(set(a) - set(b)), "only_in_candidate": len(set(b) - set(a)),
        "margin": margin, "confidence": confidence, "results": results,
        "failed": any(r["significant_drop"] and r["gated"] for r in results),
    }


def format_comparison(comparison: Mapping[str, Any]) -> list[str]:
    lines = [f"paired comparison on {comparison['shared_scenarios']} shared scenarios "
             f"(candidate - base; {comparison['confidence']:.0%} paired bootstrap CI; margin {comparison['margin']:g}); "
             f"only in base {comparison['only_in_base']}, only in candidate {comparison['only_in_candidate']}"]
    for r in comparison["results"]:
        d = r["difference"]
        if d["mean"] is None:
            continue
        name = GROUP_TITLES.get(r["group"], r["group"].replace("domain:", "domain "))
        flag = " SIGNIFICANT DROP" + ("" if r["gated"] else " (reported)") if r["significant_drop"] else ""
        lines.append(f"  {name:24} {SHORT[r['metric']]:6} n={r['n']:<5} {d['mean']:+.3f} "
                     f"[{d['low']:+.3f}, {d['high']:+.3f}]{flag}" if d["low"] is not None else
                     f"  {name:24} {SHORT[r['metric']]:6} n={r['n']:<5} {d['mean']:+.3f}{flag}")
    lines.append("verdict: " + ("a significant drop beyond the margin" if comparison["failed"] else "no significant drop"))
    return lines
