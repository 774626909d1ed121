"""``personalens calibrate --judge-model SPEC``: can this judge tell good from bad? It judges the shipped
calibration set (scores known by construction), prints per dimension how its scores compare with the
labels, its self-consistency, its sensitivity to judge-addressed text and its cost, writes the report a
run can name with ``--judge-calibration``, and exits 1 when a bar of thresholds.yaml's ``calibration``
section is missed."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..agents.judge import Judge
from ..calibration.dataset import fingerprint, load_set, shipped_set
from ..calibration.report import build_calibration, format_calibration, write_calibration
from ..calibration.runner import Calibrator
from ..calibration.select import balanced_slice
from ..data.loader import open_dataset
from ..errors import UsageError
from ..gating.thresholds import load_thresholds
from ..run.models import ModelPool
from ..run.state import new_run_id
from ..settings import resolve_settings
from ..settings.table import SETTING
from .subcommands import Subcommands


def _calibrate(args: argparse.Namespace) -> int:
    if args.repeat < 1 or (args.slice is not None and args.slice < 1):
        raise UsageError("--repeat and --slice: must be 1 or more")
    options = {"judge_model": args.judge_model, "thresholds": args.thresholds, "personalens_data": args.personalens_data}
    settings = resolve_settings(options, Path.cwd(), os.environ)
    bars = load_thresholds(settings.thresholds_path).calibration
    set_path = Path(args.calibration_set) if args.calibration_set else shipped_set()
    dialogues = balanced_slice(load_set(set_path), args.slice)
    dataset = open_dataset(settings.data_path)
    run_dir = settings.results_dir / f"calibrate-{new_run_id()}"
    pool = ModelPool(settings, run_dir, live_roles=frozenset({"judge"}), is_controller=True)
    judge_name = settings.role_models["judge"].label
    try:
        pool.check_credentials(lambda role, spec: f"--judge-model {spec}")
        pool.ping_all(lambda role, spec: f"--judge-model {spec}")
        judge = Judge(pool.chat(settings.judge_model, "judge"))
        parallel = args.concurrency or pool.judge_parallel()
        print(f"personalens calibrate: judge {judge_name}; {len(dialogues)} dialogues of {set_path.name}, each judged "
              f"{args.repeat} time(s) on its labelled dimensions" + ("" if args.no_injection else
              ", and again with judge-addressed text added"), file=sys.stderr)
        calibrator = Calibrator(judge, dataset, repeats=args.repeat, parallel=parallel, retry=settings.retry,
                                progress=lambda line: print(line, file=sys.stderr))
        answers = calibrator.run(dialogues, injection=not args.no_injection)
    finally:
        pool.close()
    report = build_calibration(dialogues, answers, bars, judge_model=judge_name, set_name=set_path.name,
                               set_sha256=fingerprint(set_path), repeats=args.repeat)
    for line in format_calibration(report):
        print(line)
    output = Path(args.output)
    write_calibration(output, report)
    print(f"calibration report -> {output}")
    return 0 if report.passed else 1


def add_commands(sub: Subcommands) -> None:
    cmd = sub.add_parser("calibrate", help="judge the calibration set: can this judge tell good from bad?")
    SETTING["judge_model"].add_to(cmd, help="the judge to calibrate (default: the project's judge)")
    cmd.add_argument("--repeat", type=int, default=2, metavar="K",
                     help="judge each dialogue K times, for self-consistency (default 2)")
    cmd.add_argument("--slice", type=int, metavar="N", help="only N dialogues, covering every variant (a quick check)")
    cmd.add_argument("--no-injection", action="store_true", help="skip the check with judge-addressed text added")
    cmd.add_argument("--calibration-set", metavar="PATH", help="another set of labelled dialogues (JSON lines)")
    cmd.add_argument("--concurrency", type=int, metavar="K", help="judgements at once (default: 6 remote, 1 embedded)")
    SETTING["thresholds"].add_to(cmd, help="where the calibration bars are (default: ./thresholds.yaml)")
    SETTING["personalens_data"].add_to(cmd, help="the benchmark data (default: the bundled sample)")
    cmd.add_argument("--output", "-o", metavar="PATH", default="judge-calibration.json",
                     help="the report to write (default: judge-calibration.json)")
    cmd.set_defaults(func=_calibrate)
