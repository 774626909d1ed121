"""``personalens report|merge|compare|agreement``: reports, verdicts and comparisons from the rows of runs.

Every command reads rows through the one reader (:mod:`personalens_testkit.results.files`) and asks
:mod:`personalens_testkit.gating` for its verdict, as a run does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..gating.compare import compare_rows
from ..gating.thresholds import load_thresholds
from ..gating.verdict import run_verdict
from ..report.agreement import agreement, format_agreement, load_labels
from ..report.model import build_report
from ..report.outputs import write_report_files
from ..report.summary import format_comparison, format_summary
from ..results.files import load_rows, write_rows
from ..results.rows import ResultRow
from ..settings import resolve_settings


def _report(args: argparse.Namespace) -> int:
    return _summarise(load_rows(Path(args.results)), args, source=str(args.results))


def _merge(args: argparse.Namespace) -> int:
    merged: dict[str, ResultRow] = {}
    for path in args.results:
        for row in load_rows(Path(path)):
            merged[row.case_id] = row
    rows = list(merged.values())
    write_rows(Path(args.output), rows)
    print(f"merged {len(rows)} cases from {len(args.results)} files -> {args.output}")
    return _summarise(rows, args, source=", ".join(args.results))


def _summarise(rows: list[ResultRow], args: argparse.Namespace, *, source: str) -> int:
    """Print the summary of these rows, write the report files asked for; 1 if the verdict fails."""
    thresholds = resolve_settings({"thresholds": args.thresholds}, Path.cwd(), os.environ).thresholds_path
    report = build_report(rows, load_thresholds(thresholds), run={"source": source})
    for line in format_summary(report):
        print(line)
    written = write_report_files(
        report, json_path=Path(args.json) if args.json else None, junit_path=Path(args.junit) if args.junit else None,
        html_path=Path(args.html) if args.html else None,
    )
    for kind, path in written.items():
        print(f"{kind} report -> {path}")
    verdict = run_verdict(report.gates)
    for line in verdict.failures:
        print(f"FAILED {line}")
    return 0 if verdict.passed else 1


def _compare(args: argparse.Namespace) -> int:
    result = compare_rows(load_rows(Path(args.base), what="base"), load_rows(Path(args.candidate), what="candidate"),
                          margin=args.margin, confidence=args.confidence, gate_domains=args.per_domain)
    for line in format_comparison(result):
        print(line)
    if result.shared_scenarios == 0:
        print("personalens: error: the two runs share no scored scenario", file=sys.stderr)
        return 2
    return 0 if run_verdict([], comparison=result).passed else 1


def _agreement(args: argparse.Namespace) -> int:
    result = agreement(load_labels(Path(args.a), what="A"), load_labels(Path(args.b), what="B"))
    for line in format_agreement(result):
        print(line)
    if result["shared"] == 0:
        print("personalens: error: the two files share no scored dialogue", file=sys.stderr)
        return 2
    return 0


def _report_files(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--html", metavar="PATH", help="write the self-contained HTML report here")
    cmd.add_argument("--json", metavar="PATH", help="write the report JSON here")
    cmd.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    cmd.add_argument("--thresholds", metavar="PATH", help="gates to evaluate (default: ./thresholds.yaml)")


def add_commands(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="summary and report files from a run's results.jsonl or report.json")
    report.add_argument("results", metavar="RESULTS")
    _report_files(report)
    report.set_defaults(func=_report)

    merge = sub.add_parser("merge", help="join the results of shards (or of a run and its resumption) into one report")
    merge.add_argument("results", metavar="RESULTS", nargs="+")
    merge.add_argument("--output", "-o", metavar="PATH", required=True, help="the merged results.jsonl")
    _report_files(merge)
    merge.set_defaults(func=_merge)

    compare = sub.add_parser("compare", help="paired comparison of two runs on their shared scenarios")
    compare.add_argument("base", metavar="BASE")
    compare.add_argument("candidate", metavar="CANDIDATE")
    compare.add_argument("--margin", type=float, default=0.0, help="tolerated drop: fail only if the CI lies below -X")
    compare.add_argument("--confidence", type=float, default=0.95)
    compare.add_argument("--per-domain", action="store_true", help="a significant drop in any one domain also fails")
    compare.set_defaults(func=_compare)

    agree = sub.add_parser("agreement", help="agreement of two judges (or a judge and human labels) on the same dialogues")
    agree.add_argument("a", metavar="A")
    agree.add_argument("b", metavar="B")
    agree.set_defaults(func=_agreement)
