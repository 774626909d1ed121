"""Agreement between two judges on the same dialogues (or a judge and human labels): the
paper's Table 5 as a command. Cohen's kappa for every dimension (the paper's measure), and
for the 1-4 and 1-5 scales also quadratic-weighted kappa and Krippendorff's alpha (ordinal),
which credit near misses; per dimension, with counts.

Labels are read from a report JSON or results file (``scores`` per row), or from a JSON /
JSON-lines file of ``{"scenario_id": ..., "<dimension>": value, ...}`` human labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from ..data.models import case_id
from ..errors import UsageError
from ..gating.stats import cohen_kappa, krippendorff_alpha_ordinal, weighted_kappa
from ..results.files import finished_instant, load_records
from ..scales import METRICS, Metric


def load_labels(path: Path, *, what: str) -> dict[str, dict[str, Any]]:
    """Labels by case id, from result rows (their scores; errors left out) or human label records; a label
    off its dimension's scale is one line naming the file, the record and the field."""
    try:
        return labels_by_scenario(load_records(path, what=what))
    except ValueError as exc:
        raise UsageError(f"{what} {path}: {exc}") from None


def _label(metric: Metric, value: Any, where: str) -> Any:
    if metric.kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where}: {metric.name} must be true or false (got {value!r})")
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not metric.low <= value <= metric.high:
        raise ValueError(f"{where}: {metric.name} must be a whole number from {metric.low} to {metric.high} "
                         f"(got {value!r})")
    return value


def labels_by_scenario(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Labels by case id. A case given twice is one case, its newest record (see ``results.files.dedupe_rows``):
    when that is an error, the case has no label."""
    found: dict[str, dict[str, Any] | None] = {}
    newest: dict[str, float] = {}
    for number, row in enumerate(rows, 1):
        where = f"record {number} ({row.get('scenario_id')!r})"
        repeat = row.get("repeat")
        if repeat is not None and (isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1):
            raise ValueError(f"{where}: repeat must be a whole number from 1 (got {repeat!r})")
        case, instant = case_id(str(row["scenario_id"]), repeat), finished_instant(row.get("finished_at"))
        if case in found and instant < newest[case]:
            continue
        scores = row.get("scores") if isinstance(row.get("scores"), dict) else row
        unlabelled = row.get("status", "passed") == "error" or not scores
        found[case], newest[case] = None if unlabelled else {
            m.name: _label(m, scores[m.name], where) for m in METRICS if scores.get(m.name) is not None}, instant
    return {case: labels for case, labels in found.items() if labels is not None}


def agreement(a: Mapping[str, dict[str, Any]], b: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Agreement per dimension between two sets of labels by case id."""
    shared = sorted(set(a) & set(b))
    dimensions = []
    for metric in METRICS:
        ids = [s for s in shared if metric.name in a[s] and metric.name in b[s]]
        x = [a[s][metric.name] for s in ids]
        y = [b[s][metric.name] for s in ids]
        entry: dict[str, Any] = {"dimension": metric.name, "n": len(ids),
                                 "exact_agreement": (sum(p == q for p, q in zip(x, y)) / len(ids)) if ids else None}
        entry["cohen_kappa"] = cohen_kappa(x, y) if ids else None
        if metric.kind != "bool":
            levels = list(range(metric.low, metric.high + 1))
            entry["quadratic_weighted_kappa"] = weighted_kappa(x, y, categories=levels) if ids else None
            entry["krippendorff_alpha_ordinal"] = krippendorff_alpha_ordinal(x, y, categories=levels) if ids else None
        dimensions.append(entry)
    return {"shared": len(shared), "only_in_a": len(set(a) - set(b)), "only_in_b": len(set(b) - set(a)),
            "dimensions": dimensions}


def format_agreement(result: Mapping[str, Any]) -> list[str]:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}"

    lines = [f"agreement on {result['shared']} shared dialogues (only in A: {result['only_in_a']}, only in B: {result['only_in_b']})",
             f"{'dimension':24} {'n':>5} {'exact':>7} {'kappa':>7} {'QWK':>7} {'alpha':>7}"]
    for d in result["dimensions"]:
        lines.append(f"{d['dimension']:24} {d['n']:>5} {f(d['exact_agreement']):>7} {f(d.get('cohen_kappa')):>7} "
                     f"{f(d.get('quadratic_weighted_kappa')):>7} {f(d.get('krippendorff_alpha_ordinal')):>7}")
    return lines
