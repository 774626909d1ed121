"""``personalens estimate``: what a run would cost, before it starts - the same selection and model options as
``pytest suites/``, no model called."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.loader import open_dataset
from ..run.cases import RunCases
from ..run.cost_estimate import run_estimate
from ..settings import OPTION_NAMES, SETTINGS, RunSettings, check_selection, resolve_settings
from .subcommands import Subcommands

if TYPE_CHECKING:
    from ..costs.estimate import RunEstimate


def estimate_of(settings: RunSettings) -> RunEstimate:
    """What a run of these settings would cost (its selection; no model called)."""
    cases = RunCases(settings, identity=lambda: None).selected  # type: ignore[arg-type,return-value]
    return run_estimate(settings, open_dataset(settings.data_path), cases)


def with_run_options(cmd: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A command that takes the run's own options (`pytest suites/`'s selection, models, thresholds)."""
    for setting in SETTINGS:
        if setting.option is not None:
            setting.add_to(cmd)
    return cmd


def _estimate(args: argparse.Namespace) -> int:
    options = {name: getattr(args, name, None) for name in OPTION_NAMES}
    settings = resolve_settings(options, Path.cwd(), os.environ)
    check_selection(settings)
    result = estimate_of(settings)
    if args.json:
        print(json.dumps(result.model_dump(), indent=2))
        return 0
    from ..costs.estimate import format_estimate

    for line in format_estimate(result):
        print(line)
    if result.live_cases[1] == 0 and settings.record_mode == "none" and result.cases:
        # an offline replay spends nothing: say what making its recording would cost (the command a team runs first)
        recording = estimate_of(dataclasses.replace(settings, record_mode="once"))
        if recording.live_cases[1]:
            print(f"recording them (--record-mode once, {recording.live_cases[1]} case(s) without a cassette): "
                  + format_estimate(recording)[-1].strip().removeprefix("total").strip())
    return 0


def add_commands(sub: Subcommands) -> None:
    cmd = with_run_options(sub.add_parser("estimate", help="what a run with these options would cost: calls, tokens "
                                                           "and US dollars per role, with a range (no model is called)"))
    cmd.add_argument("--json", action="store_true", help="the estimate as JSON")
    cmd.set_defaults(func=_estimate)
