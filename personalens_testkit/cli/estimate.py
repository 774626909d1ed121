"""``personalens estimate``: what a run would cost, before it starts - the same selection and model options as
``pytest suites/``, no model called."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..data.loader import open_dataset
from ..run.cases import RunCases
from ..run.cost_estimate import run_estimate
from ..settings import OPTION_NAMES, SETTINGS, check_selection, resolve_settings


def _estimate(args: argparse.Namespace) -> int:
    options = {name: getattr(args, name, None) for name in OPTION_NAMES}
    settings = resolve_settings(options, Path.cwd(), os.environ)
    check_selection(settings)
    cases = RunCases(settings, identity=lambda: None).selected  # type: ignore[arg-type,return-value]
    result = run_estimate(settings, open_dataset(settings.data_path), cases)
    if args.json:
        print(json.dumps(result.model_dump(), indent=2))
        return 0
    from ..costs.estimate import format_estimate

    for line in format_estimate(result):
        print(line)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("estimate", help="what a run with these options would cost: calls, tokens and US dollars "
                                          "per role, with a range (no model is called)")
    for setting in SETTINGS:
        if setting.option is not None:
            setting.add_to(cmd)
    cmd.add_argument("--json", action="store_true", help="the estimate as JSON")
    cmd.set_defaults(func=_estimate)
