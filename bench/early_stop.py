"""--stop-when-decided by simulation through the run's REAL code: how much of the 50-profile sample a run spends
before its verdict is decided, and how often the decision is wrong.

Each simulated run draws a bot and a judge as bench/gate_noise.py does (the same model: the paper's score
distributions, a judge that moves a rating one level with p = 0.3 and flips a completion verdict with p = 0.1,
the whole sample of 4,096 scenarios, K = 1), then feeds the candidate's rows one by one, in the run's own
stratified random order (``run.early_stop.stratified_order``, a new seed per run), to the controller's own
``EarlyStop`` (built by ``EarlyStop.build`` from the shipped thresholds, as ``run/controller.py`` builds it), and
stops where it says. The verdict is then ``build_report`` on the rows run so far with the cases not needed, as
``run/finish.py`` calls it. Nothing of the decision is re-implemented here.

Cases:

- "paper-level bot, gates": no baseline; the shipped aggregate gates only (the bot's judged figures sit at the
  paper's, above every gate): the right verdict is green;
- "unchanged, baseline": the same bot judged afresh against its recorded main, ``--baseline-margin`` M: the right
  verdict is green (red is an error);
- "0.3 worse, baseline": true mean personalization 0.3 lower: the right verdict is red (green is an error).

Columns: the share of the sample's scenarios run before the decision (mean, and the 90th percentile), the share
of runs decided early (before the end), and the share whose verdict was red / green / inconclusive, with 95 %
Wilson intervals; "wrong" is red where the right verdict is green and green where it is red - it must stay at or
below the thresholds' 5 %.

    python bench/early_stop.py                 # 40 runs a case (about 6 minutes on 2 idle cores)
    python bench/early_stop.py --quick         # 2 runs a case (a smoke test)
    python bench/early_stop.py --runs 100 --margins 0,0.1,0.2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate_noise import (  # noqa: E402
    COMPLETION_MD, COMPLETION_SD, PERSONALIZATION_LEVELS, PERSONALIZATION_P, RATED, RATING_LEVELS, RATING_P,
    build_rows, judge_run, load_sample, rate,
)

from personalens_testkit.data.loader import open_dataset  # noqa: E402
from personalens_testkit.gating.verdict import NotRun  # noqa: E402
from personalens_testkit.data.selection import Selection, select_scenarios  # noqa: E402
from personalens_testkit.gating.compare import compare_rows  # noqa: E402
from personalens_testkit.gating.expectations import Expectations, from_rows  # noqa: E402
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds  # noqa: E402
from personalens_testkit.report.model import build_report  # noqa: E402
from personalens_testkit.run.early_stop import EarlyStop, stratified_order  # noqa: E402

CASES = ("paper-level bot, gates", "unchanged, baseline", "0.3 worse, baseline")
RIGHT = {"paper-level bot, gates": "passed", "unchanged, baseline": "passed", "0.3 worse, baseline": "regressed"}


def simulate(sample, scenarios, thresholds, case: str, margin: float | None, seed: int) -> dict:
    """``margin``: --baseline-margin (None: thresholds.yaml's per-metric margins, the default)."""
    rng = np.random.default_rng([seed, CASES.index(case), int((margin if margin is not None else 0.999) * 1000)])
    total = len(sample.ids)
    chosen = np.arange(total)
    md = np.array([kind == "md" for kind in sample.kinds])
    truth = {"task_completion": rng.random(total) < np.where(md, COMPLETION_MD, COMPLETION_SD),
             "personalization": rng.choice(PERSONALIZATION_LEVELS, size=total, p=PERSONALIZATION_P)}
    for name in RATED:
        truth[name] = rng.choice(RATING_LEVELS, size=total, p=RATING_P)
    baseline = case.endswith("baseline")
    base_rows = build_rows(sample, chosen, judge_run(truth, 1, rng), thresholds, None) if baseline else None
    # a recorded main's expectations; without one, every case expected to pass - so a case judged live below a
    # floor is unconfirmed, as the plugin has it, not a regression
    expectations = Expectations(scenarios=from_rows(base_rows) if base_rows is not None else {})
    if case.startswith("0.3"):
        level = truth["personalization"]
        drops = (level > 1) & (rng.random(total) < 0.3 / (1 - PERSONALIZATION_P[0]))
        truth = {**truth, "personalization": level - drops}
    rows = build_rows(sample, chosen, judge_run(truth, 1, rng), thresholds, expectations)
    place = stratified_order(scenarios, seed)
    rows.sort(key=lambda row: place[row.scenario_id])
    domains = sorted({s.domains[0] for s in scenarios if s.kind.value == "sd"})
    early = EarlyStop.build(thresholds.aggregate, domains, enforced=True, repeat=1, base_rows=base_rows,
                            margin=margin)
    stop, reason = len(rows), None
    for i, row in enumerate(rows, 1):
        reason = early.observe(row)
        if reason is not None:
            stop = i
            break
    ran = rows[:stop]
    rules = thresholds.aggregate
    comparison = compare_rows(base_rows, ran, margin=margin, confidence=rules.confidence, min_n=rules.min_n,
                              max_missing=1.0, margins=rules.margin, drifts=rules.drift,
                              ) if base_rows is not None else None  # the rest: not needed
    report = build_report(ran, thresholds, run={}, settings={}, gates_enforced=True, comparison=comparison,
                          expectations=expectations, baseline=base_rows,
                          not_run=NotRun(total - stop, reason, needed=False) if reason else None)
    return {"share": stop / total, "early": reason is not None, "outcome": report.verdict.outcome}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="2 runs a case")
    parser.add_argument("--margins", default="thresholds,0.1",
                        help="--baseline-margin values for the baseline cases; thresholds: none given, thresholds.yaml's "
                             "per-metric margins (default thresholds,0.1)")
    args = parser.parse_args()
    runs = 2 if args.quick else args.runs
    sample = load_sample()
    scenarios = select_scenarios(open_dataset(None), Selection())
    thresholds = load_thresholds(default_thresholds_path())
    print(f"--stop-when-decided, {runs} simulated runs a case, the whole sample ({len(sample.ids)} scenarios), K = 1; "
          f"confidence {thresholds.aggregate.confidence:.0%}")
    print(f"{'case':<24} {'margin':>6} {'spent mean':>10} {'p90':>6} {'decided early':>22} {'red':>22} "
          f"{'green':>22} {'inconclusive':>22} {'wrong':>22}  s/run")
    for case in CASES:
        margins = [None if m.strip() == "thresholds" else float(m) for m in args.margins.split(",")]
        for margin in (margins if case.endswith("baseline") else [None]):
            began = time.perf_counter()
            found = [simulate(sample, scenarios, thresholds, case, margin, seed) for seed in range(runs)]
            shares = [f["share"] for f in found]
            outcomes = [f["outcome"] for f in found]
            right = RIGHT[case]
            wrong = sum(1 for o in outcomes if o in ("passed", "regressed") and o != right)
            shown = "yaml" if margin is None else f"{margin:g}"
            print(f"{case:<24} {shown:>6} {np.mean(shares):>10.3f} {np.percentile(shares, 90):>6.3f} "
                  f"{rate(sum(f['early'] for f in found), runs):>22} {rate(outcomes.count('regressed'), runs):>22} "
                  f"{rate(outcomes.count('passed'), runs):>22} {rate(outcomes.count('inconclusive'), runs):>22} "
                  f"{rate(wrong, runs):>22}  {(time.perf_counter() - began) / runs:.1f}")


if __name__ == "__main__":
    main()
