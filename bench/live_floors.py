"""How often a gate run with credentials is red for a bot broken on a few scenarios, and for one as good as the base.

With credentials, every scenario whose bot reply changed is judged live, and a floor it misses there is one noisy
judgement. Before the verdict it is confirmed or cleared (``run/confirmation.py``): the case's dialogue and the
base's are judged ``R`` more times each. This script measures the rule through the run's REAL verdict code,
as ``bench/gate_noise.py`` does (its model of scenarios and judge, its baseline and expectations): each candidate
case's floors against ``shortfalls``, ``case_verdict`` with ``judged_live=True``, the missed floors decided by
``confirmation.decide`` on simulated new judgements (the case's true levels judged again, the base's true levels
judged again, ``R`` times each as ``judgements_for`` sets it for the run's number of cases) - then ``compare_rows`` and
``build_report``. "red" is the report's ``verdict.outcome ==
"regressed"``.

Bots (a new bot every run, true levels drawn as in gate_noise.py):

- "as good": the base's true levels, every scenario judged live (every reply changed, none better or worse);
- "broken on a tenth": a tenth of the scenarios (4 of 36) answered with a fixed generic sentence: judged there at
  personalization 1, task not completed, naturalness (assistant) 2 - the rest as good as the base;
- "broken, personalization only": the same tenth at personalization 1, every other level kept.

Rules: "confirm" (the default: judged again) and "report" (never judged again: every live miss unconfirmed - the
rule before). Each row: runs and 95 % Wilson intervals.

    python bench/live_floors.py                    # n = 36 and 100, 1,000 runs a cell (about 2 minutes on 2 cores)
    python bench/live_floors.py --quick            # a smoke test
    python bench/live_floors.py --runs 2000 --sizes 36,100,400
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate_noise as model  # noqa: E402 - the scenarios, the judge and the verdict's reading, shared

from personalens_testkit.calibration.retest import drift_margins, measure  # noqa: E402
from personalens_testkit.gating.compare import compare_rows  # noqa: E402
from personalens_testkit.gating.expectations import Expectations, case_verdict, from_rows  # noqa: E402
from personalens_testkit.gating.thresholds import Thresholds, default_thresholds_path, load_thresholds, shortfalls  # noqa: E402
from personalens_testkit.report.model import build_report  # noqa: E402
from personalens_testkit.results.rows import ShortfallRow  # noqa: E402
from personalens_testkit.run.confirmation import decide, judgements_for  # noqa: E402

BOTS = ("as good", "broken on a tenth", "broken, personalization only")
RULES = ("confirm", "report")
NAMES = ("task_completion", "personalization", *model.RATED)


def draws(judged: dict[str, np.ndarray], i: int) -> list[dict[str, Any]]:
    """Scenario ``i``'s judgements (one per column) as score dicts."""
    k = judged["task_completion"].shape[1]
    return [{name: (bool(judged[name][i][r]) if name == "task_completion" else int(judged[name][i][r]))
             for name in NAMES} for r in range(k)]


def simulate(sample: model.Sample, thresholds: Thresholds, n: int, bot: str, rule: str, rng: np.random.Generator
             ) -> dict[str, Any]:
    total = len(sample.ids)
    chosen = np.sort(rng.choice(total, size=min(n, total), replace=False))
    md = np.array([sample.kinds[i] == "md" for i in chosen])
    truth = {"task_completion": rng.random(len(chosen)) < np.where(md, model.COMPLETION_MD, model.COMPLETION_SD),
             "personalization": rng.choice(model.PERSONALIZATION_LEVELS, size=len(chosen), p=model.PERSONALIZATION_P)}
    for name in model.RATED:
        truth[name] = rng.choice(model.RATING_LEVELS, size=len(chosen), p=model.RATING_P)
    base_rows = model.build_rows(sample, chosen, model.judge_run(truth, 1, rng), thresholds, None)
    expectations = Expectations(scenarios=from_rows(base_rows))
    candidate = dict(truth)
    broken = np.zeros(len(chosen), dtype=bool)
    if bot != "as good":
        broken[rng.choice(len(chosen), size=math.ceil(len(chosen) / 10), replace=False)] = True
        candidate["personalization"] = np.where(broken, 1, truth["personalization"])
        if bot == "broken on a tenth":
            candidate["task_completion"] = truth["task_completion"] & ~broken
            candidate["naturalness_assistant"] = np.where(broken, 2, truth["naturalness_assistant"])
    judged = model.judge_run(candidate, 1, rng)
    # R as the run takes it for its number of cases; the new judgements are drawn for every case (one stream whatever
    # the rule): the run's draws stop early once nothing can be confirmed, which changes its cost, not its decision
    judgements = judgements_for(len(chosen), thresholds.scenario, thresholds.aggregate.confidence)
    again_case = model.judge_run(candidate, judgements, rng)
    again_base = model.judge_run(truth, judgements, rng)

    floors = thresholds.scenario
    rows, confirmed_cases = [], 0
    for i, index in enumerate(chosen.tolist()):
        sid = sample.ids[index]
        values = draws(judged, i)[0]
        found = shortfalls(floors, values)
        missed = [s.metric for s in found]
        expectation = expectations.of(sid)
        verdict = case_verdict(expectation, missed, judged_live=True)
        if verdict == "unconfirmed" and rule == "confirm":
            confirmed = decide(floors, missed, draws(again_case, i), draws(again_base, i), judgements,
                               base_recorded=base_rows[i].scores.model_dump())
            verdict = case_verdict(expectation, missed, judged_live=not confirmed)
            confirmed_cases += bool(confirmed)
        rows.append(model._ROW.model_copy(update=dict(  # noqa: SLF001 - the bench's shared row template
            scenario_id=sid, user_id=sid.split("-", 1)[0], task_id=sid.split("-", 1)[1],
            task_kind=sample.kinds[index], domains=sample.domains[index], status="failed" if found else "passed",
            repeat=1, scores=model._SCORES.model_copy(update=values),  # noqa: SLF001
            shortfalls=[ShortfallRow.model_construct(**s.as_dict()) for s in found],
            expected=str(expectation), verdict=verdict)))
    rules = thresholds.aggregate
    comparison = compare_rows(base_rows, rows, margin=model.MARGIN, confidence=rules.confidence, min_n=rules.min_n,
                              max_missing=rules.max_infrastructure_errors, measured=drift_margins(measure(rows)),
                              margins=rules.margin, drifts=rules.drift)
    report = build_report(rows, thresholds, run={}, settings={}, gates_enforced=True, comparison=comparison,
                          expectations=expectations, problems=[], calibration=None, baseline=base_rows)
    found = model.read_verdict(report, len(rows))
    return {**found, "confirmed": confirmed_cases}


_STATE: tuple[model.Sample, Thresholds] | None = None


def _init(path: str) -> None:
    global _STATE
    _STATE = model.load_sample(), load_thresholds(path)


def _chunk(task: tuple[int, int, str, str, int, int, int]) -> tuple[int, list[dict[str, Any]]]:
    cell, n, bot, rule, start, stop, seed = task
    assert _STATE is not None
    # a run's stream depends on its n, bot and number only: both rules see the same bots and the same judgements
    return cell, [simulate(*_STATE, n, bot, rule, np.random.default_rng([seed, n, BOTS.index(bot), run]))
                  for run in range(start, stop)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per cell (default 1000)")
    parser.add_argument("--sizes", default="36,100", help="numbers of scenarios (default 36,100)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes (default 2)")
    parser.add_argument("--seed", type=int, default=44, help="the seed (default 44): the table is deterministic")
    parser.add_argument("--quick", action="store_true", help="20 runs a cell at n = 36 (a smoke test)")
    parser.add_argument("--thresholds", default=str(default_thresholds_path()),
                        help="thresholds file (default: the shipped one)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.sizes = 20, "36"
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError as exc:
        parser.error(f"--sizes: numbers were expected ({exc})")
    cells = [(n, bot, rule) for n in sizes for bot in BOTS for rule in RULES]
    step = 50
    tasks = [(cell, n, bot, rule, start, min(args.runs, start + step), args.seed)
             for cell, (n, bot, rule) in enumerate(cells) for start in range(0, args.runs, step)]
    print("\n".join(model.model_lines()[:4]))
    shipped = load_thresholds(args.thresholds)
    counts = ", ".join(f"{judgements_for(n, shipped.scenario, shipped.aggregate.confidence)} at n = {n}" for n in sizes)
    print(f"  confirmation: R new judgements of the case's dialogue and of the base's (their true levels, the same "
          f"judge; R = judgements_for(n): {counts}); confirmed when every new case judgement misses the floor and "
          "every base one, and the base's recorded one, meets it")
    began = time.perf_counter()
    results: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(cells))}
    if args.jobs > 1:
        with Pool(args.jobs, initializer=_init, initargs=(args.thresholds,)) as pool:
            for cell, found in pool.imap_unordered(_chunk, tasks):
                results[cell] += found
    else:
        _init(args.thresholds)
        for task in tasks:
            cell, found = _chunk(task)
            results[cell] += found
    print()
    print("| n | bot | rule | runs | P(red) [95% CI] | P(green) [95% CI] | red from a confirmed case | "
          "cases confirmed (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    for cell, (n, bot, rule) in enumerate(cells):
        found, runs = results[cell], len(results[cell])
        hits = {o: sum(f["outcome"] == o for f in found) for o in ("regressed", "passed")}
        by_case = sum(f["outcome"] == "regressed" and f["cases"] for f in found)
        print(f"| {n} | {bot} | {rule} | {runs} | {model.rate(hits['regressed'], runs)} | "
              f"{model.rate(hits['passed'], runs)} | {model.rate(by_case, runs)} | "
              f"{sum(f['confirmed'] for f in found) / runs:.2f} |")
    print()
    print("targets (issue 44): with credentials, a bot broken on a tenth red >= 90 % at n = 36; a bot as good as "
          "the base red <= 5 %")
    for cell, (n, bot, rule) in enumerate(cells):
        if rule != "confirm" or bot not in ("as good", "broken on a tenth"):
            continue  # personalization only: reported, no target (a quarter of scenarios are at level 1 already)
        found = results[cell]
        red = sum(f["outcome"] == "regressed" for f in found) / len(found)
        ok = red <= 0.05 if bot == "as good" else red >= 0.9
        print(f"  n={n} {bot}: red {red:.3f} - {'met' if ok else 'MISSED'}")
    print(f"\n{sum(len(v) for v in results.values())} simulated runs in {time.perf_counter() - began:.0f} s on "
          f"{args.jobs} process(es), seed {args.seed}")


if __name__ == "__main__":
    main()
