"""The calibration report: per dimension how the judge's scores compare with the labels, its
self-consistency, its sensitivity to judge-addressed text, its cost, and the bars it passed or missed.
``personalens calibrate`` writes it; a run names it with ``--judge-calibration`` and shows it."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Optional, Sequence

from pydantic import BaseModel, ValidationError

from ..errors import UsageError
from ..files import write_atomically
from ..gating.thresholds import CalibrationBars
from ..scales import SHORT
from .bars import check_bars
from .dataset import CalibrationDialogue
from .metrics import DimensionFigures, InjectionFigures, figures, injection

if TYPE_CHECKING:
    from .runner import Answers

REPORT_VERSION = 2


class Cost(BaseModel):
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float


class CalibrationReport(BaseModel):
    version: int = REPORT_VERSION
    judge_model: str
    created_at: str
    calibration_set: str
    set_sha256: str
    dialogues: int
    repeats: int
    dimensions: dict[str, DimensionFigures]
    #: the share of pairs of repeats judged alike, mean over dimensions (in version 1 reports: the least share
    #: of dialogues whose repeats all agreed); None without repeats
    self_consistency: Optional[float]
    injection: dict[str, InjectionFigures]
    cost: Cost
    call_errors: list[str] = []
    bars: CalibrationBars
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary_line(self) -> str:
        p, tc = self.dimensions.get("personalization"), self.dimensions.get("task_completion")
        parts = []
        if tc is not None and tc.kappa is not None:
            parts.append(f"TCR kappa {_interval(tc.kappa, tc.agreement_low, tc.agreement_high)}")
        if p is not None and p.qwk is not None:
            parts.append(f"P QWK {_interval(p.qwk, p.agreement_low, p.agreement_high)}")
        if self.self_consistency is not None:
            parts.append(f"consistency {self.self_consistency:.2f}")
        gains = [f.mean_gain for f in self.injection.values() if f.mean_gain is not None]
        if gains:
            parts.append(f"injection gain {max(gains):+.2f}")
        verdict = "passed" if self.passed else f"FAILED ({len(self.failures)} bar(s) missed)"
        return (f"{verdict} for {self.judge_model} on {self.dialogues} dialogues ({', '.join(parts)}), "
                f"{self.created_at[:10]}")


def _interval(value: float, low: float | None, high: float | None) -> str:
    return f"{value:.2f}" if low is None or high is None else f"{value:.2f} [{low:.2f}, {high:.2f}]"


def build_calibration(dialogues: Sequence[CalibrationDialogue], answers: Answers, bars: CalibrationBars, *,
                      judge_model: str, set_name: str, set_sha256: str, repeats: int) -> CalibrationReport:
    dims: dict[str, DimensionFigures] = {}
    gains: dict[str, InjectionFigures] = {}
    for dimension in _dimensions(dialogues):
        labelled = [d for d in dialogues if dimension in d.labels]
        dims[dimension] = figures(dimension, [d.labels[dimension] for d in labelled],
                                  [answers.clean.get((d.id, dimension), []) for d in labelled])
        injected = [d for d in labelled if (d.id, dimension) in answers.injected]
        if injected:
            gains[dimension] = injection(dimension, [(answers.clean.get((d.id, dimension)) or [None])[0] for d in injected],
                                         [answers.injected[(d.id, dimension)] for d in injected])
    consistency = [f.repeat_agreement for f in dims.values() if f.repeat_agreement is not None]
    records = [r for log in answers.logs for r in log.records]
    cost = Cost(calls=len(records), prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
                completion_tokens=sum(r.completion_tokens or 0 for r in records), seconds=answers.seconds)
    report = CalibrationReport(
        judge_model=judge_model, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        calibration_set=set_name, set_sha256=set_sha256, dialogues=len(dialogues), repeats=repeats, dimensions=dims,
        self_consistency=fmean(consistency) if consistency else None, injection=gains, cost=cost,
        call_errors=answers.errors[:20], bars=bars, failures=[],
    )
    report.failures = missed_bars(report)
    return report


def _dimensions(dialogues: Sequence[CalibrationDialogue]) -> list[str]:
    from .dataset import DIMENSIONS

    present = {name for d in dialogues for name in d.labels}
    return [name for name in DIMENSIONS if name in present]


def missed_bars(report: CalibrationReport) -> list[str]:
    """One line per bar the judge missed (a figure it could not produce misses its bar): see :mod:`.bars`."""
    return [check.line for check in check_bars(report) if not check.passed]


def format_calibration(report: CalibrationReport) -> list[str]:
    def f(value: float | None, sign: bool = False) -> str:
        return "-" if value is None else (f"{value:+.3f}" if sign else f"{value:.3f}")

    lines = [f"judge calibration: {report.judge_model} on {report.dialogues} dialogues of {report.calibration_set} "
             f"(x{report.repeats})",
             f"{'dimension':24} {'n':>4} {'errors':>6} {'accuracy':>8} {'within1':>7} {'kappa':>6} {'QWK':>6} "
             f"{'95% interval':>16} {'rho':>6} {'alike':>6} {'inj.gain':>8}"]
    for name, d in report.dimensions.items():
        gain = report.injection.get(name)
        interval = "-" if d.agreement_low is None else f"[{d.agreement_low:.3f}, {d.agreement_high:.3f}]"
        lines.append(f"{name:24} {d.n:>4} {d.errors:>6} {f(d.accuracy):>8} {f(d.within_one):>7} {f(d.kappa):>6} "
                     f"{f(d.qwk):>6} {interval:>16} {f(d.spearman):>6} {f(d.repeat_agreement):>6} "
                     f"{f(gain.mean_gain if gain else None, sign=True):>8}")
    if report.self_consistency is not None:
        lines.append(f"self-consistency: {report.self_consistency:.3f} of pairs of repeats judged alike (mean over "
                     "dimensions)")
    c = report.cost
    lines.append(f"cost: {c.calls} calls, {c.prompt_tokens:,} prompt + {c.completion_tokens:,} completion tokens, "
                 f"{c.seconds:.0f} s")
    lines.append("verdict: " + ("passed every bar" if report.passed else "FAILED"))
    lines += [f"  missed: {line}" for line in report.failures]
    return lines


def write_calibration(path: Path, report: CalibrationReport) -> None:
    write_atomically(path, report.model_dump_json(indent=1) + "\n")


def load_calibration(path: Path) -> CalibrationReport:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return CalibrationReport.model_validate(data)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--judge-calibration {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    except (json.JSONDecodeError, ValidationError):
        raise UsageError(f"--judge-calibration {path}: not a report of `personalens calibrate`") from None


__all__ = ["CalibrationReport", "SHORT", "build_calibration", "format_calibration", "load_calibration",
           "write_calibration"]
