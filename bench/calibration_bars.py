"""How often each calibration bar passes a judge of known quality, by simulation through the real report code.

Simulated judges (personalens_testkit/calibration/simulate.py) answer the shipped calibration set - perfect,
90 % and 80 % accurate (the label with that probability, else a uniformly drawn other level; afresh on every
call, repeat and injection check), random (uniform over the scale) and constant ("completed", 2) - and the
report `personalens calibrate` builds is built from their answers with the bars of thresholds.yaml. No model
is called. Prints, per bar, the share of trials each judge passes, and the mean of the figure each bar reads.

    python bench/calibration_bars.py                 # 400 trials a judge, --repeat 2
    python bench/calibration_bars.py --repeat 3 --trials 200
    python bench/calibration_bars.py --trials 50 --coverage 200   # and how often the intervals cover the truth
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from statistics import fmean

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from personalens_testkit.calibration.bars import check_bars  # noqa: E402
from personalens_testkit.calibration.dataset import load_set  # noqa: E402
from personalens_testkit.calibration.simulate import JUDGES, levels, simulated_report  # noqa: E402
from personalens_testkit.gating.stats import weighted_kappa  # noqa: E402
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds  # noqa: E402

#: the figure each bar reads, for the table of means
FIGURES = {"task_completion_kappa": ("task_completion", "agreement_low"),
           "personalization_qwk": ("personalization", "agreement_low"),
           "naturalness_qwk": ("naturalness_assistant", "agreement_low"),
           "coherence_qwk": ("coherence_assistant", "agreement_low"),
           "personalization_spearman": ("personalization", "spearman"),
           "naturalness_spearman": ("naturalness_assistant", "spearman"),
           "coherence_spearman": ("coherence_assistant", "spearman")}

FIGURES_BY_DIMENSION = ("task_completion", "personalization", "naturalness_assistant", "coherence_assistant")


def _old_bars(report) -> dict[str, bool]:
    """The bars these replaced: completion accuracy 0.85; every repeat alike on 0.9 of dialogues, least dimension."""
    consistency = [d.consistency for d in report.dimensions.values() if d.consistency is not None]
    return {"(old) accuracy 0.85": (report.dimensions["task_completion"].accuracy or 0) >= 0.85,
            "(old) all alike 0.9": bool(consistency) and min(consistency) >= 0.9}


def measure(trials: int, repeats: int, thresholds: Path) -> tuple[dict, dict]:
    """Pass counts by (bar, judge) - a bar checked on several dimensions passes when it passes on all - and
    the figures each bar reads, by (bar, judge)."""
    bars = load_thresholds(thresholds).calibration
    dialogues = load_set()
    passed: dict[tuple[str, str], int] = defaultdict(int)
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for judge in JUDGES:
        for trial in range(trials):
            report = simulated_report(judge, dialogues, bars, repeats=repeats, seed=trial)
            by_bar: dict[str, bool] = {}
            for check in check_bars(report):
                by_bar[check.bar] = by_bar.get(check.bar, True) and check.passed
            by_bar["all bars"] = all(by_bar.values())
            by_bar.update(_old_bars(report))
            for bar, ok in by_bar.items():
                passed[(bar, judge.name)] += ok
            for bar, (dimension, figure) in FIGURES.items():
                value = getattr(report.dimensions[dimension], figure)
                if value is not None:
                    seen[(bar, judge.name)].append(value)
            if report.self_consistency is not None:
                seen[("repeat_agreement", judge.name)].append(report.self_consistency)
            gains = [g.mean_gain if g.low is None else g.low for g in report.injection.values() if g.mean_gain is not None]
            seen[("max_injection_gain", judge.name)].append(max(gains))
    return passed, seen


def coverage(trials: int) -> None:
    """How often each dimension's 95 % interval holds the judge's true agreement (kappa on 400 copies of the set),
    and how often its low end - what a bar reads - lies above it (2.5 % nominal)."""
    dialogues, bars = load_set(), load_thresholds(default_thresholds_path()).calibration
    print(f"\ncoverage of the agreement interval, {trials} simulated calibrations a judge: covered / low end above "
          "the truth (truth)")
    for judge in JUDGES[1:4]:
        rng, cells = random.Random(99), []
        reports = [simulated_report(judge, dialogues, bars, seed=10_000 + t, injection=False) for t in range(trials)]
        for dimension in FIGURES_BY_DIMENSION:
            labels = [d.labels[dimension] for d in dialogues if dimension in d.labels] * 400
            answers = [judge.answer(rng, dimension, label) for label in labels]
            truth = weighted_kappa(labels, answers, categories=levels(dimension),
                                   weights="none" if dimension == "task_completion" else "quadratic")
            found = [r.dimensions[dimension] for r in reports]
            covered = sum(f.agreement_low <= truth <= f.agreement_high for f in found) / trials
            above = sum(f.agreement_low > truth for f in found) / trials
            cells.append(f"{dimension} {covered:.3f} / {above:.3f} ({truth:.3f})")
        print(f"{judge.name:>8}: " + "; ".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="simulated calibrations per judge (default 400)")
    parser.add_argument("--repeat", type=int, default=2, help="judgements of each dialogue, as --repeat (default 2)")
    parser.add_argument("--coverage", type=int, metavar="TRIALS", default=0,
                        help="also measure how often the agreement intervals cover the truth (slow: 200 takes ~2 min)")
    parser.add_argument("--thresholds", type=Path, default=default_thresholds_path(),
                        help="the bars (default: the shipped thresholds.yaml)")
    args = parser.parse_args()
    started = time.perf_counter()
    passed, seen = measure(args.trials, args.repeat, args.thresholds)
    bars = load_thresholds(args.thresholds).calibration.model_dump()
    names = [judge.name for judge in JUDGES]
    print(f"pass rate of each calibration bar, {args.trials} simulated calibrations a judge on the shipped set, "
          f"--repeat {args.repeat}")
    print(f"{'bar':26} {'value':>6} " + " ".join(f"{name:>9}" for name in names))
    for bar in [*FIGURES, "repeat_agreement", "min_answered", "max_injection_gain", "all bars",
                "(old) accuracy 0.85", "(old) all alike 0.9"]:
        shown = f"{bars[bar]:g}" if bar in bars else ""
        print(f"{bar:26} {shown:>6} " + " ".join(f"{passed[(bar, name)] / args.trials:>9.3f}" for name in names))
    print("\nmean of the figure each bar reads (agreement bars and injection gain: the low end of the 95 % interval; "
          "injection: the largest over dimensions)")
    for bar in [*FIGURES, "repeat_agreement", "max_injection_gain"]:
        means = [fmean(seen[(bar, name)]) if seen[(bar, name)] else None for name in names]
        print(f"{bar:26} {'':>6} " + " ".join(f"{'-' if m is None else f'{m:+.3f}':>9}" for m in means))
    if args.coverage:
        coverage(args.coverage)
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
