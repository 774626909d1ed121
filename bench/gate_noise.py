"""How often the run's verdict is red when only the judge's noise moved, and how often it catches a real drop.

Every simulated run goes through the run's REAL verdict code, called as ``run/finish.py`` calls it: the
shipped thresholds (``gating/default_thresholds.yaml``, read by ``load_thresholds``), a ``Comparison`` from
``compare_rows`` against a simulated baseline run, the expectations that ``personalens expectations update``
writes from that baseline (``from_rows``), each case's verdict worked out as the plugin does
(``shortfalls`` against the per-scenario floors, then ``case_verdict`` - with ``judged_live=True`` for the
candidate's cases where ``case_verdict`` takes it, as the plugin passes it for a case its judge scored now), and
``build_report``; "red" is the
report's ``verdict.outcome == "regressed"``, "inconclusive" its ``"inconclusive"``. Nothing of the verdict is
re-implemented here.

Simulation model (printed with the table):

- scenarios: n drawn without replacement from the bundled 50-profile sample's 4,096 (its real ids, e.g.
  ``user7-SD-Alarm-task-1`` / ``user7-MD-task-3``: 3,283 single-domain over 20 domains, 813 multi-domain);
  n = 4,096 is the whole sample. K tries of each (rows ``repeat`` = 1..K), in the baseline and the candidate.
- each scenario has a true level per metric, drawn afresh for every simulated run (a new bot each time);
  the levels are set so that the JUDGED figures sit at the paper's: personalization 1-4 with P(1, 2, 3, 4) =
  (0.25, 0.49, 0.22, 0.04) (true mean 2.05, judged 2.11); task completion true with probability 0.99 (SD) /
  0.85 (MD), judged 0.892 / 0.78; naturalness and coherence (assistant and user side) 1-5 with
  P(2, 3, 4, 5) = (0.02, 0.18, 0.55, 0.25) (true mean 4.03, judged 3.96).
- the judge: independently per judgement (per try, per metric) a rating moves one level with probability 0.3
  (to a neighbouring level on the scale, chosen at random where there are two), a completion verdict flips
  with probability 0.1. No case errors (every case is scored).
- the baseline: one judged run of the bot (K tries), recorded as main records it: its rows are the
  ``--baseline`` and its expectations file. The candidate "no change": the same bot (same true levels)
  judged afresh. "drop d": the true mean personalization lower by d - every scenario above level 1 drops one
  level with probability d / P(level > 1) = d / 0.75, so the true mean drops by d on average.
  "on gate": no change, the bot's judged multi-domain completion rate exactly on the 0.70 gate (true rate
  0.75: 0.75 x 0.9 + 0.25 x 0.1 = 0.70).
- the run: live-judged (gates enforced), ``--baseline-margin`` at its default (the judge's drift measured by
  ``--judge-retest``: 0 here, nothing is judged twice), no problems.

Each row: the simulated runs it used and a 95 % Wilson interval of each rate. "red from" splits the red runs
by what failed (a run can fail on several): cases (a regression against the expectations), gates (an
aggregate gate), baseline (a significant drop in the comparison). "cases regressed / unconfirmed": the mean
share of the candidate's cases the verdict lists as regressions / as unconfirmed (a verdict that has that list).
"detectable drop" is the mean of what the report states (``report.repeats.noise["personalization"]
.detectable_drop``; none at K = 1 today). Below the table, each check that failed (or was not decided: skipped
and marked inconclusive) and the share of runs it did so in.

    python bench/gate_noise.py                 # the full table (about 8 minutes on 2 idle cores)
    python bench/gate_noise.py --quick         # a few runs per cell (a smoke test)
    python bench/gate_noise.py --runs 1000 --runs-at 400=400,4096=40 --sizes 100,400,4096 --jobs 2
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import sys
import time
from dataclasses import dataclass, fields
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from personalens_testkit.scales import Scores  # noqa: E402
from personalens_testkit.data.loader import open_dataset  # noqa: E402
from personalens_testkit.data.selection import Selection, select_scenarios  # noqa: E402
from personalens_testkit.calibration.retest import drift_margins, measure  # noqa: E402
from personalens_testkit.gating.compare import compare_rows  # noqa: E402
from personalens_testkit.gating.expectations import PASS, Expectations, case_verdict, from_rows  # noqa: E402
from personalens_testkit.gating.planning import plan  # noqa: E402
from personalens_testkit.gating.thresholds import (  # noqa: E402
    Thresholds, default_thresholds_path, load_thresholds, shortfalls,
)
from personalens_testkit.report.model import build_report  # noqa: E402
from personalens_testkit.results.rows import ResultRow, ShortfallRow  # noqa: E402
from personalens_testkit.settings.model import RunSettings  # noqa: E402

#: --baseline-margin's default, as a run takes it
MARGIN = next(f.default for f in fields(RunSettings) if f.name == "baseline_margin")

# --- the model -------------------------------------------------------------------------------------------
PERSONALIZATION_LEVELS = (1, 2, 3, 4)
PERSONALIZATION_P = (0.25, 0.49, 0.22, 0.04)
RATING_LEVELS = (1, 2, 3, 4, 5)
RATING_P = (0.0, 0.02, 0.18, 0.55, 0.25)
COMPLETION_SD, COMPLETION_MD = 0.99, 0.85
COMPLETION_MD_ON_GATE = 0.75  # judged 0.75 * 0.9 + 0.25 * 0.1 = 0.70: the md completion gate's threshold
MOVE, FLIP = 0.3, 0.1
RATED = ("naturalness_user", "naturalness_assistant", "coherence_user", "coherence_assistant")

#: the judge's drift in the "judge drift" bot: today's judge rates 0.03 of a level lower on every rated scale, and
#: finds 1 point fewer tasks completed (thresholds.yaml's default drifts)
DRIFT_RATING, DRIFT_COMPLETION = 0.03, 0.01
CASES = ("no change", "judge drift", "drop 0.1", "drop 0.2", "drop 0.3", "on gate", "personalization -0.2",
         "completion -0.05")


def judged_drop_factor() -> float:
    """How much of a true personalization drop (a scenario above level 1 down one level) the judge shows: a level
    at an end of the scale is judged MOVE inward on average."""
    judged = [v + (MOVE if v == 1 else -MOVE if v == 4 else 0.0)
              for v in PERSONALIZATION_LEVELS]
    steps = [(judged[i] - judged[i - 1]) * PERSONALIZATION_P[i] for i in range(1, len(judged))]
    return sum(steps) / (1 - PERSONALIZATION_P[0])


def judged_mean(levels: tuple[int, ...], p: tuple[float, ...]) -> float:
    """The mean a judge of this model reports for a true distribution (a move at an end of the scale goes inward)."""
    low, high = levels[0], levels[-1]
    return sum(q * (v + (MOVE if v == low else -MOVE if v == high else 0.0)) for v, q in zip(levels, p))


def model_lines() -> list[str]:
    p_mean = sum(v * q for v, q in zip(PERSONALIZATION_LEVELS, PERSONALIZATION_P))
    r_mean = sum(v * q for v, q in zip(RATING_LEVELS, RATING_P))
    judged = lambda t: t * (1 - FLIP) + (1 - t) * FLIP  # noqa: E731
    above = 1 - PERSONALIZATION_P[0]
    return [
        "model: n scenarios drawn without replacement from the bundled sample's 4,096 (3,283 SD over 20 domains, "
        "813 MD; real ids), K tries each (repeat 1..K) in the baseline and the candidate",
        f"  true levels per scenario, a new bot every run: personalization P(1..4) = {PERSONALIZATION_P} "
        f"(true mean {p_mean:.3f}, judged {judged_mean(PERSONALIZATION_LEVELS, PERSONALIZATION_P):.3f}); "
        f"completion SD {COMPLETION_SD} / MD {COMPLETION_MD} (judged {judged(COMPLETION_SD):.3f} / "
        f"{judged(COMPLETION_MD):.3f}); naturalness/coherence (both sides) P(1..5) = {RATING_P} "
        f"(true mean {r_mean:.3f}, judged {judged_mean(RATING_LEVELS, RATING_P):.3f})",
        f"  judge, per judgement: a rating moves one level with p={MOVE} (to a neighbour on the scale), "
        f"a completion verdict flips with p={FLIP}; no case errors",
        "  baseline: one judged run (K tries) = the --baseline rows and the expectations written from them; "
        "no change: same true levels judged afresh",
        f"  drop d: each scenario above level 1 drops one level with p = d / {above:.2f} (true mean -d); "
        f"on gate: no change, true MD completion {COMPLETION_MD_ON_GATE} (judged "
        f"{judged(COMPLETION_MD_ON_GATE):.2f} = the 0.70 gate)",
        f"  judge drift: no change, but today's judge rates {DRIFT_RATING} of a level lower on every rated scale and "
        f"finds {DRIFT_COMPLETION:.0%} fewer tasks completed (thresholds.yaml's default drifts); personalization -d / "
        "completion -d: the JUDGED mean lower by d (a drop of the margin: 0.2 / 0.05)",
        "  verdict: build_report(candidate, shipped thresholds, comparison=compare_rows(baseline, candidate), "
        "expectations, baseline), as run/finish.py calls it; gates enforced, margin = RunSettings' default",
        "  each candidate case's verdict = case_verdict(expectation, floors missed"
        f"{', judged_live=True' if LIVE else ''}), as the plugin calls it",
    ]


# --- the scenarios ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    ids: list[str]
    kinds: list[str]
    domains: list[list[str]]


def load_sample() -> Sample:
    scenarios = select_scenarios(open_dataset(None), Selection())
    return Sample(ids=[s.scenario_id for s in scenarios], kinds=[s.kind.value for s in scenarios],
                  domains=[list(s.domains) for s in scenarios])


# --- one simulated pair of runs --------------------------------------------------------------------------
def judge_ratings(true: np.ndarray, low: int, high: int, rng: np.random.Generator) -> np.ndarray:
    """Each judgement of a true level: moved one level with probability MOVE, to a neighbour on the scale."""
    moved = rng.random(true.shape) < MOVE
    step = np.where(rng.random(true.shape) < 0.5, -1, 1)
    step = np.where(true == low, 1, np.where(true == high, -1, step))
    return np.where(moved, true + step, true)


def drifted(judged: np.ndarray, low: int, amount: float, rng: np.random.Generator) -> np.ndarray:
    """A judge that rates ``amount`` of a level lower on average: a rating above the scale's foot moves down one
    level with the probability that lowers the mean by ``amount``."""
    above = judged > low
    share = float(above.mean()) if above.size else 0.0
    if share == 0.0:
        return judged
    return np.where(above & (rng.random(judged.shape) < min(1.0, amount / share)), judged - 1, judged)


def judge_run(truth: dict[str, np.ndarray], k: int, rng: np.random.Generator, drift: bool = False
              ) -> dict[str, np.ndarray]:
    """K judged tries of every scenario: arrays of shape (n, k); ``drift``: by today's drifted judge."""
    tiled = {name: np.repeat(values[:, None], k, axis=1) for name, values in truth.items()}
    judged = {"task_completion": tiled["task_completion"] ^ (rng.random(tiled["task_completion"].shape) < FLIP),
              "personalization": judge_ratings(tiled["personalization"], 1, 4, rng)}
    for name in RATED:
        judged[name] = judge_ratings(tiled[name], 1, 5, rng)
    if drift:
        judged["task_completion"] = drifted(judged["task_completion"].astype(int), 0, DRIFT_COMPLETION,
                                            rng).astype(bool)
        judged["personalization"] = drifted(judged["personalization"], 1, DRIFT_RATING, rng)
        for name in RATED:
            judged[name] = drifted(judged[name], 1, DRIFT_RATING, rng)
    return judged


#: how the plugin calls case_verdict for a case whose judge was called now (not replayed), where it asks
#: (every candidate case here is judged live: the same bot re-judged, as every scenario a pull request changes is)
LIVE = {"judged_live": True} if "judged_live" in inspect.signature(case_verdict).parameters else {}

#: a row and a scores object with every default filled once; each row is a shallow copy of it with its own fields
#: (``model_construct`` per row would fill some forty defaults each time: most of this script's time)
_ROW = ResultRow.model_construct(scenario_id="", status="passed")
_SCORES = Scores.model_construct(**{name: 1 for name in ("task_completion", "personalization", *RATED)})


def build_rows(sample: Sample, chosen: np.ndarray, judged: dict[str, np.ndarray], thresholds: Thresholds,
               expectations: Expectations | None) -> list[ResultRow]:
    """The rows a run writes: per case its scores, status, shortfalls, expectation and verdict (as the plugin)."""
    floors = thresholds.scenario
    live = LIVE if expectations is not None else {}
    names = list(judged)
    table = {name: judged[name].tolist() for name in names}
    rows = []
    k = judged["task_completion"].shape[1]
    for i, index in enumerate(chosen.tolist()):
        sid = sample.ids[index]
        expectation = expectations.of(sid) if expectations is not None else PASS
        for r in range(k):
            values: dict[str, Any] = {name: int(table[name][i][r]) for name in names}
            values["task_completion"] = bool(table["task_completion"][i][r])
            found = shortfalls(floors, values)
            verdict = case_verdict(expectation, [s.metric for s in found], **live)
            rows.append(_ROW.model_copy(update=dict(
                scenario_id=sid, user_id=sid.split("-", 1)[0], task_id=sid.split("-", 1)[1],
                task_kind=sample.kinds[index], domains=sample.domains[index],
                status="failed" if found else "passed", repeat=r + 1, scores=_SCORES.model_copy(update=values),
                shortfalls=[ShortfallRow.model_construct(**s.as_dict()) for s in found],
                expected=str(expectation), verdict=verdict)))
    return rows


def simulate(sample: Sample, thresholds: Thresholds, n: int, k: int, case: str, rng: np.random.Generator
             ) -> dict[str, Any]:
    total = len(sample.ids)
    chosen = np.arange(total) if n >= total else np.sort(rng.choice(total, size=n, replace=False))
    md = np.array([sample.kinds[i] == "md" for i in chosen])
    completion_md = COMPLETION_MD_ON_GATE if case == "on gate" else COMPLETION_MD
    truth = {
        "task_completion": rng.random(len(chosen)) < np.where(md, completion_md, COMPLETION_SD),
        "personalization": rng.choice(PERSONALIZATION_LEVELS, size=len(chosen), p=PERSONALIZATION_P),
    }
    for name in RATED:
        truth[name] = rng.choice(RATING_LEVELS, size=len(chosen), p=RATING_P)
    base_rows = build_rows(sample, chosen, judge_run(truth, k, rng), thresholds, None)
    expectations = Expectations(scenarios=from_rows(base_rows))
    if case.startswith(("drop", "personalization")):
        # "drop d": the true mean lower by d; "personalization -d": the judged mean lower by d (the margin's terms)
        d = float(case.split()[1]) if case.startswith("drop") else -float(case.split()[1]) / judged_drop_factor()
        level = truth["personalization"]
        drops = (level > 1) & (rng.random(len(level)) < d / (1 - PERSONALIZATION_P[0]))
        truth = {**truth, "personalization": level - drops}
    if case.startswith("completion"):  # the true completion rate lower by 0.05: judged 0.05 * (1 - 2 FLIP) lower
        d = -float(case.split()[1]) / (1 - 2 * FLIP)
        done = truth["task_completion"]
        truth = {**truth, "task_completion": done & ~(rng.random(len(done)) < d / max(float(done.mean()), 1e-9))}
    rows = build_rows(sample, chosen, judge_run(truth, k, rng, drift=case == "judge drift"), thresholds, expectations)

    # as run/finish.py: the comparison, then the report (which decides the verdict)
    rules = thresholds.aggregate
    measured = drift_margins(measure(rows))  # no row is judged twice here: every measured margin is 0
    comparison = compare_rows(base_rows, rows, margin=MARGIN, confidence=rules.confidence, min_n=rules.min_n,
                              max_missing=rules.max_infrastructure_errors, measured=measured,
                              margins=rules.margin, drifts=rules.drift)
    report = build_report(rows, thresholds, run={}, settings={}, gates_enforced=True, comparison=comparison,
                          expectations=expectations, problems=[], calibration=None, baseline=base_rows)
    return read_verdict(report, len(rows))


def read_verdict(report: Any, cases: int) -> dict[str, Any]:
    """What the report decided: its outcome, what failed, the share of cases that regressed, the stated drop."""
    verdict = report.verdict
    outcome = getattr(verdict, "outcome", None)
    if outcome is None:  # an older verdict: passed or not
        outcome = "passed" if verdict.passed else "regressed"
    failed = [c for c in getattr(verdict, "checks", []) if getattr(c, "outcome", None) == "failed"]
    undecided = [c for c in getattr(verdict, "checks", [])
                 if getattr(c, "outcome", None) != "failed" and getattr(c, "inconclusive", False)]
    regressions = len(getattr(verdict, "regressions", []) or [])
    noise = getattr(getattr(report, "repeats", None), "noise", None) or {}
    stated = getattr(noise.get("personalization"), "detectable_drop", None)
    return {
        "outcome": str(outcome),
        "cases": regressions > 0,
        "gates": any(c.name.startswith("gate") for c in failed),
        "baseline": any(c.name.startswith("baseline") for c in failed),
        "failed": tuple(["regressions"] * (regressions > 0) + [c.name for c in failed]
                        + [f"{c.name} (not decided)" for c in undecided]),
        "regressed_share": regressions / cases if cases else 0.0,
        "unconfirmed_share": len(getattr(verdict, "unconfirmed", []) or []) / cases if cases else 0.0,
        "drop": stated,
    }


# --- the cells, in parallel ------------------------------------------------------------------------------
_SAMPLE: Sample | None = None
_THRESHOLDS: Thresholds | None = None


def _init(thresholds_path: str) -> None:
    global _SAMPLE, _THRESHOLDS
    _SAMPLE, _THRESHOLDS = load_sample(), load_thresholds(thresholds_path)


def _chunk(task: tuple[int, int, int, str, int, int, int]) -> tuple[int, list[dict[str, Any]], float]:
    cell, n, k, case, start, stop, seed = task
    assert _SAMPLE is not None and _THRESHOLDS is not None
    began = time.perf_counter()
    # each run's stream depends on its cell's n, K and bot and its number only: a cell's figures are the same
    # whichever other cells are run, and however the runs are split between processes
    found = [{**simulate(_SAMPLE, _THRESHOLDS, n, k, case, np.random.default_rng([seed, n, k, CASES.index(case), run])),
              "index": run} for run in range(start, stop)]
    return cell, found, time.perf_counter() - began


def wilson(hits: int, runs: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if runs == 0:
        return 0.0, 1.0
    p = hits / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z / (1 + z * z / runs) * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs))
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(hits: int, runs: int) -> str:
    low, high = wilson(hits, runs)
    return f"{hits / runs:.3f} [{low:.3f}, {high:.3f}]" if runs else "-"


def runs_at(n: int, runs: int, override: dict[int, int]) -> int:
    """Simulated runs of a cell of n scenarios: ``runs`` up to 100 scenarios, fewer above (a run of 4,096
    scenarios and 3 tries costs about 4 s), unless --runs-at says."""
    if n in override:
        return override[n]
    return runs if n <= 100 else max(runs // 32, 1, round(runs * 240 / n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[-1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400,
                        help="simulated runs per cell at n <= 100 (default 400); above, runs x 240 / n (at least "
                             "runs / 32): 240 at n = 400, 23 at n = 4,096")
    parser.add_argument("--runs-at", default="", metavar="N=RUNS,...",
                        help="runs per cell at a size, overriding the rule above (e.g. 400=400,4096=100)")
    parser.add_argument("--sizes", default="25,100,400,plan,4096",
                        help="numbers of scenarios; plan: the size `personalens plan` recommends for the thresholds "
                             "(default 25,100,400,plan,4096)")
    parser.add_argument("--repeats", default="1,3", help="tries per scenario, K (default 1,3)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"which bots (default {','.join(CASES)})")
    parser.add_argument("--quick", action="store_true", help="4 runs per cell at n = 25 and 100 (a smoke test)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes (default 2)")
    parser.add_argument("--seed", type=int, default=20, help="the seed (default 20): the table is deterministic")
    parser.add_argument("--thresholds", default=str(default_thresholds_path()),
                        help="thresholds file (default: the shipped one, read by load_thresholds)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.sizes, args.runs_at = 4, "25,100", ""
    try:
        planned = plan(load_thresholds(args.thresholds).aggregate)
        sizes = [min(planned.needed or 4096, 4096) if x.strip() == "plan" else int(x) for x in args.sizes.split(",")]
        repeats = [int(x) for x in args.repeats.split(",")]
        override = {int(a): int(b) for a, b in (x.split("=") for x in args.runs_at.split(",") if x.strip())}
    except ValueError as exc:
        parser.error(f"a number was expected ({exc})")
    cases = [c.strip() for c in args.cases.split(",")]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {unknown} (known: {', '.join(CASES)})")

    cells = [(n, k, case) for n in sizes for k in repeats for case in cases]
    tasks = []
    for cell, (n, k, case) in enumerate(cells):
        runs = runs_at(n, args.runs, override)
        step = max(1, min(runs, 20_000 // (n * k)))  # a chunk of about 20,000 cases: the pool stays busy
        tasks += [(cell, n, k, case, start, min(runs, start + step), args.seed) for start in range(0, runs, step)]
    tasks.sort(key=lambda t: -(t[1] * t[2] * (t[5] - t[4])))  # the largest first

    thresholds = load_thresholds(args.thresholds)
    print(f"thresholds: {args.thresholds}")
    print("\n".join(planned.lines(4096)))
    print("\n".join(model_lines()))
    began = time.perf_counter()
    results: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(cells))}
    seconds = [0.0] * len(cells)
    if args.jobs > 1:
        with Pool(args.jobs, initializer=_init, initargs=(args.thresholds,)) as pool:
            for cell, found, spent in pool.imap_unordered(_chunk, tasks):
                results[cell] += found
                seconds[cell] += spent
    else:
        _init(args.thresholds)
        for task in tasks:
            cell, found, spent = _chunk(task)
            results[cell] += found
            seconds[cell] += spent
    wall = time.perf_counter() - began
    for found in results.values():  # the chunks came back in any order: the rates do not depend on it
        found.sort(key=lambda f: f["index"])

    gates = "; ".join(f"{g.metric} {g.scope} {g.statistic} >= {g.min:g}" for g in thresholds.aggregate.gates)
    margin = "its default (the judge's measured drift: 0, nothing judged twice)" if MARGIN is None else f"{MARGIN:g}"
    print(f"gates: {gates}; min_n {thresholds.aggregate.min_n}; --baseline-margin {margin}")
    print()
    print("| n | K | bot | runs | P(green) [95% CI] | P(red) [95% CI] | P(inconclusive) [95% CI] | red from: cases / "
          "gates / baseline | cases regressed / unconfirmed (mean share) | detectable drop stated (mean) | s per run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, (n, k, case) in enumerate(cells):
        found = results[cell]
        runs = len(found)
        red = sum(1 for f in found if f["outcome"] == "regressed")
        green = sum(1 for f in found if f["outcome"] == "passed")
        unsure = sum(1 for f in found if f["outcome"] == "inconclusive")
        why = " / ".join(f"{sum(1 for f in found if f['outcome'] == 'regressed' and f[w]) / runs:.2f}"
                         for w in ("cases", "gates", "baseline"))
        shares = sum(f["regressed_share"] for f in found) / runs
        unconfirmed = sum(f["unconfirmed_share"] for f in found) / runs
        drops = [f["drop"] for f in found if f["drop"] is not None]
        stated = f"{sum(drops) / len(drops):.3f} ({len(drops)} of {runs})" if drops else "none stated"
        print(f"| {n:,} | {k} | {case} | {runs} | {rate(green, runs)} | {rate(red, runs)} | {rate(unsure, runs)} | {why} | "
              f"{shares:.3f} / {unconfirmed:.3f} | {stated} | {seconds[cell] / runs:.3f} |")
    print()
    print("targets (issue 44): no change or judge drift: red <= 5 % at every n; a drop of the margin: green <= 5 % at "
          f"every n; at the planned n ({planned.needed:,}): a drop of the margin red >= 90 %, no change green >= 80 %")
    for cell, (n, k, case) in enumerate(cells):
        found = results[cell]
        share = {o: sum(1 for f in found if f["outcome"] == o) / len(found) for o in ("passed", "regressed")}
        checks = []
        if case in ("no change", "judge drift", "on gate"):
            checks.append(("red <= 5%", share["regressed"] <= 0.05))
        if case in ("personalization -0.2", "completion -0.05"):
            checks.append(("green <= 5%", share["passed"] <= 0.05))
            if n == planned.needed:
                checks.append(("red >= 90%", share["regressed"] >= 0.9))
        if case in ("no change", "judge drift") and n == planned.needed:
            checks.append(("green >= 80%", share["passed"] >= 0.8))
        if checks:
            print(f"  n={n:,} K={k} {case}: " + ", ".join(f"{what} {'met' if ok else 'MISSED'}" for what, ok in checks))
    print()
    print("what failed (share of runs; a run can fail on several):")
    for cell, (n, k, case) in enumerate(cells):
        found = results[cell]
        names = sorted({name for f in found for name in f["failed"]})
        parts = [f"{name} {sum(1 for f in found if name in f['failed']) / len(found):.2f}" for name in names]
        print(f"  n={n:,} K={k} {case}: " + ("; ".join(parts) or "nothing"))
    print()
    print(f"{sum(len(v) for v in results.values())} simulated runs in {wall:.0f} s on {args.jobs} process(es), "
          f"seed {args.seed}")


if __name__ == "__main__":
    main()
