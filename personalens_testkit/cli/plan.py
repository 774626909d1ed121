"""``personalens plan``: how many scenarios a gate needs for its margins, which selection gives that many, and what
a run of it costs - before anything runs (no model is called)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from string import Template
from typing import Any, Mapping

from ..data.loader import open_dataset
from ..data.selection import Selection, profile_numbers, select_scenarios
from ..errors import UsageError
from ..gating.planning import Plan, plan
from ..gating.thresholds import default_thresholds_path, load_thresholds
from ..results.files import load_rows
from ..settings import OPTION_NAMES, RunSettings, check_selection, resolve_settings
from .estimate import estimate_of, with_run_options
from .subcommands import Subcommands


def planned_selection(settings: RunSettings, needed: int) -> tuple[tuple[int, ...], int, int]:
    """The fewest profiles of the run's selection, spread evenly over it, whose scenarios reach ``needed``: the
    profiles, their scenarios, and the whole selection's scenarios (all of them when it has fewer)."""
    return profiles_for(open_dataset(settings.data_path), settings.selection, needed)


def profiles_for(dataset: Any, selection: Selection, needed: int) -> tuple[tuple[int, ...], int, int]:
    numbers = profile_numbers(dataset, selection)
    counts: dict[int, int] = {}
    for scenario in select_scenarios(dataset, selection):
        counts[scenario.user_number] = counts.get(scenario.user_number, 0) + 1
    everything = sum(counts.values())
    ordered = [n for n in numbers if counts.get(n)]
    for size in range(1, len(ordered) + 1):
        step = len(ordered) / size
        chosen = sorted({ordered[int(i * step)] for i in range(size)})
        total = sum(counts[n] for n in chosen)
        if total >= needed:
            return tuple(chosen), total, everything
    return tuple(ordered), everything, everything


def planned_profiles_line() -> str:
    """personalens.toml's selection for a new repository: the bundled sample's profiles the shipped thresholds'
    margins need (`personalens plan`), with what it is, in a comment."""
    needed = plan(load_thresholds(default_thresholds_path()).aggregate).needed
    if needed is None:
        return '# profiles = "7,53"'
    profiles, scenarios, everything = profiles_for(open_dataset(None), Selection(), needed)
    return (f"# {scenarios:,} of the sample's {everything:,} scenarios: what thresholds.yaml's margins need "
            f"(`personalens plan`;\n# remove the line to run them all)\nprofiles = \"{','.join(map(str, profiles))}\"")


#: personalens.toml's budget line where the selection's models are free or unpriced: left for the team to set
UNSET_BUDGET = "# max_cost = 25.0                 # US dollars: the most a run may spend live (priced models only)"


@dataclasses.dataclass(frozen=True)
class RecordingBudget:
    """What recording a new repository's selection live would cost (the estimate: low, point, high; None where a
    model is unpriced), and the ``max_cost`` line personalens.toml gets from it."""

    cost: tuple[float, float, float] | None
    scenarios: int
    line: str


#: the budgets worked out in this process, by personalens.toml text (an estimate simulates dialogues: a second of CPU)
_BUDGETS: dict[str, RecordingBudget] = {}


def config_with_budget(template: Template, fill: Mapping[str, str]) -> str:
    """personalens.toml from ``template`` (its ``$budget`` the line :func:`recording_budget` makes for the rest of
    it). The written text's budget is known with it: its ``max_cost`` line changes neither its selection nor its
    models, so init's next steps say it without estimating again."""
    budget = recording_budget(template.substitute(fill, budget=""))
    config = template.substitute(fill, budget=budget.line)
    _BUDGETS[config] = budget
    return config


def recording_budget(config: str) -> RecordingBudget:
    """The cost of recording the selection of this personalens.toml text live (``--record-mode once``, its models,
    no cassette yet: every scenario), and its budget line: the estimate's high end rounded up to a whole $10, so a
    run - a pull request that changes every reply included - never spends past what a whole recording may cost."""
    if config not in _BUDGETS:
        _BUDGETS[config] = _budget_of(config)
    return _BUDGETS[config]


def _budget_of(config: str) -> RecordingBudget:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "personalens.toml").write_text(config, encoding="utf-8")
        settings = resolve_settings({"record_mode": "once"}, Path(folder), {})
        found = estimate_of(settings)
    cost = found.total_cost
    if cost is None or cost[2] <= 0:
        return RecordingBudget(cost=cost, scenarios=found.cases, line=UNSET_BUDGET)
    cap = math.ceil(cost[2] / 10) * 10
    line = (f"max_cost = {cap:.1f}                 # US dollars: the most a run may spend live; recording these "
            f"{found.cases:,} scenarios\n#   is estimated at ${cost[1]:,.0f} (${cost[0]:,.0f} - ${cost[2]:,.0f}): "
            "`personalens estimate --record-mode once`")
    return RecordingBudget(cost=cost, scenarios=found.cases, line=line)


def _plan(args: argparse.Namespace) -> int:
    options = {name: getattr(args, name, None) for name in OPTION_NAMES}
    if options.get("record_mode") is None:
        options["record_mode"] = "all"  # the cost of recording the planned run (--record-mode prices another)
    settings = resolve_settings(options, Path.cwd(), os.environ)
    check_selection(settings)
    if args.margin is not None and not (math.isfinite(args.margin) and args.margin >= 0):
        raise UsageError(f"--margin: must be a number, 0 or more (got {args.margin:g})")
    rules = load_thresholds(settings.thresholds_path).aggregate
    rows = load_rows(Path(args.spread_from), what="--spread-from") if args.spread_from else None
    found: Plan = plan(rules, base_rows=rows, margin=args.margin)
    needed = found.needed
    profiles, scenarios, everything = planned_selection(settings, needed) if needed else ((), 0, 0)
    if args.json:
        print(json.dumps({"needed": needed, "tests": found.tests, "spread_basis": found.spread_basis,
                          "metrics": [dataclasses.asdict(m) | {"needed": m.needed} for m in found.metrics],
                          "profiles": list(profiles), "scenarios": scenarios, "selectable": everything}, indent=2))
        return 0
    for line in found.lines(everything or None):
        print(line)
    if needed:
        print(f"a selection of that size: --profiles {','.join(map(str, profiles))} ({scenarios:,} scenarios of "
              f"the {everything:,} selected)")
        _print_cost(settings, profiles)
    return 0


def _print_cost(settings: RunSettings, profiles: tuple[int, ...]) -> None:
    from ..costs.estimate import format_estimate

    chosen = dataclasses.replace(settings, selection=dataclasses.replace(settings.selection, profiles=profiles))
    for line in format_estimate(estimate_of(chosen)):
        print(line)


def add_commands(sub: Subcommands) -> None:
    cmd = with_run_options(sub.add_parser("plan", help="how many scenarios a gate needs for the thresholds' margins, "
                                                       "the selection that gives them, and its cost (no model is called)"))
    cmd.add_argument("--margin", type=float, default=None, metavar="X",
                     help="plan for this margin on every metric (default: thresholds.yaml's, per metric)")
    cmd.add_argument("--spread-from", default=None, metavar="RESULTS",
                     help="measure the scores' spread from a run's results.jsonl or report.json (default: the paper's)")
    cmd.add_argument("--json", action="store_true", help="the plan as JSON")
    cmd.set_defaults(func=_plan)
