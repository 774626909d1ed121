"""``personalens`` command line: look at the benchmark data, serve the embedded model, and make reports,
verdicts and comparisons from the rows of runs.

    personalens init [DIR] [--assistant NAME] [--kind http] [--start CMD] [--models M]  a suite, config, thresholds, CI gate
    personalens data stats [--personalens-data DIR] [--sample 50]   scenario counts by kind and domain
    personalens data check [--personalens-data DIR]                 validate every data file
    personalens serve-model [--port N] [--model FILE.gguf]           run the embedded server in the foreground
    personalens report RESULTS [--html P] [--json P] [--junit P]    summary and report files from a run's rows
    personalens compare BASE CANDIDATE [--margin X]                 paired comparison; exit 1 on a significant drop
    personalens agreement A B                                       two judges (or a judge and human labels)
    personalens merge RESULTS... --output P [--html P] [...]        join shards' results into one report and gates
    personalens expectations update RESULTS [--output P]            record each scenario's expected outcome from a run
    personalens calibrate --judge-model SPEC [--repeat K] [--slice N] can this judge tell good from bad? (exit 1: a bar missed)
    personalens judge CONVERSATIONS.jsonl [--context FILE]          the judge on your own conversations: rows and reports
    personalens gate [--base REF] [--start CMD --health-url URL]     a pull request's verdict: the base's files, this bot
    personalens estimate [run options]                              a run's calls, tokens and cost before it starts
    personalens plan [run options] [--margin X] [--spread-from R]   the scenarios a gate's margins need, and their cost
    personalens promote GATE_DIR                                    on main: a gate run's recording becomes the committed one

Running the benchmark itself is ``pytest suites/`` (see docs/running.md; this command: docs/command-line.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from ..errors import PersonalensError
from ..secrets import redact
from . import calibrate, data, estimate, gate, init, judge, plan, results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="personalens", description="PersonaLens testkit tools; run the benchmark with pytest suites/.")
    sub = parser.add_subparsers(dest="command", required=True)
    data.add_commands(sub)
    results.add_commands(sub)
    calibrate.add_commands(sub)
    init.add_commands(sub)
    judge.add_commands(sub)
    gate.add_commands(sub)
    estimate.add_commands(sub)
    plan.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given (the gate runs itself again under sudo)
    try:
        return int(args.func(args))
    except PersonalensError as exc:
        print(redact(f"personalens: error: {exc}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # `personalens compare ... | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
