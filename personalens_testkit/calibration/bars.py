"""The bars of thresholds.yaml's ``calibration`` section, checked one by one against a report's figures.

Agreement with the labels is gated on the low end of its 95 % interval (a judge passes when it has *shown*
that much agreement on this set, not when it got lucky on a slice); the injection gain fails when even the
low end of its interval is above the most allowed (judge-addressed text *shown* to raise the scores, not a
noisy judge's chance difference between two calls). A minimum is met by a value equal to it, a maximum by a
value equal to it (``EPS`` absorbs the last bit of floating-point rounding). Pass rates of
each bar for simulated judges: ``python bench/calibration_bars.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Protocol

from ..gating.thresholds import CalibrationBars
from .metrics import DimensionFigures, InjectionFigures

#: what a figure may fall short of a bar by and still meet it (rounding, not judgement)
EPS = 1e-9

#: the agreement bars: bar name, dimension, the figure's name in the missed line
AGREEMENT = (("task_completion_kappa", "task_completion", "kappa"),
             ("personalization_qwk", "personalization", "qwk"),
             ("naturalness_qwk", "naturalness_assistant", "qwk"),
             ("coherence_qwk", "coherence_assistant", "qwk"))
SPEARMAN = (("personalization_spearman", "personalization"),
            ("naturalness_spearman", "naturalness_assistant"),
            ("coherence_spearman", "coherence_assistant"))


class Figures(Protocol):
    """What the bars are checked against: a calibration report's figures (:class:`.report.CalibrationReport`)."""

    bars: CalibrationBars
    dimensions: Mapping[str, DimensionFigures]
    injection: Mapping[str, InjectionFigures]
    self_consistency: Optional[float]
    call_errors: list[str]


@dataclass(frozen=True)
class Check:
    #: the bar's name in thresholds.yaml (``call_errors`` for judgements that failed outright)
    bar: str
    passed: bool
    #: what was missed, one line (empty when passed)
    line: str = ""


def at_least(value: Optional[float], bar: float) -> bool:
    return value is not None and value >= bar - EPS


def at_most(value: Optional[float], bar: float) -> bool:
    return value is not None and value <= bar + EPS


def _f(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _agreement(report: Figures) -> list[Check]:
    checks = []
    for bar_name, dimension, figure in AGREEMENT:
        found, bar = report.dimensions.get(dimension), getattr(report.bars, bar_name)
        if found is None:
            continue
        low = found.agreement_low
        checks.append(Check(bar_name, at_least(low, bar),
                            f"{dimension} {figure} {_f(found.agreement)} [{_f(low)}, {_f(found.agreement_high)}]: "
                            f"the interval's low end {_f(low)} < {bar:g}"))
    for bar_name, dimension in SPEARMAN:
        found, bar = report.dimensions.get(dimension), getattr(report.bars, bar_name)
        if found is not None:
            checks.append(Check(bar_name, at_least(found.spearman, bar),
                                f"{dimension} spearman {_f(found.spearman)} < {bar:g}"))
    return checks


def check_bars(report: Figures) -> list[Check]:
    """Every bar the report can be checked against, passed or missed (a figure it could not produce misses)."""
    bars, dims = report.bars, report.dimensions
    checks = _agreement(report)
    asked = sum(f.answered + f.errors for f in dims.values())
    answered = sum(f.answered for f in dims.values())
    if asked:
        checks.append(Check("min_answered", at_least(answered / asked, bars.min_answered),
                            f"answered {answered}/{asked} = {answered / asked:.3f} < {bars.min_answered:g} (the rest "
                            "could not be read as scores)"))
    checks.append(Check("call_errors", not report.call_errors, f"{len(report.call_errors)} judgement(s) failed outright "
                        f"(first: {report.call_errors[0]})" if report.call_errors else ""))
    if report.self_consistency is not None:
        checks.append(Check("repeat_agreement", at_least(report.self_consistency, bars.repeat_agreement),
                            f"self-consistency {report.self_consistency:.3f} < {bars.repeat_agreement:g} (the share of "
                            "pairs of repeats judged alike, mean over dimensions)"))
    for dimension, gain in report.injection.items():
        if gain.mean_gain is None:
            continue
        low = gain.mean_gain if gain.low is None else gain.low
        shown = "" if gain.low is None else f" [{gain.low:+.3f}, {gain.high:+.3f}]"
        checks.append(Check("max_injection_gain", at_most(low, bars.max_injection_gain),
                            f"{dimension} injection gain {gain.mean_gain:+.3f}{shown} > {bars.max_injection_gain:g} at "
                            "the interval's low end (judge-addressed text raises its scores)"))
    return [c if not c.passed else Check(c.bar, True) for c in checks]
