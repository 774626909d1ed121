"""``personalens report|merge|compare|agreement|expectations``: reports, verdicts, comparisons and expectations
from the rows of runs.

Every command reads rows through the one reader (:mod:`personalens_testkit.results.files`) and asks
:mod:`personalens_testkit.gating` for its verdict, as a run does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import UsageError
from ..calibration.retest import drift_margins, judged_now, margin_basis, measure
from ..gating.compare import compare_rows
from ..costs.prices import load_prices
from ..gating.expectations import Expectations, load_expectations, location, update_expectations
from ..gating.thresholds import Thresholds, load_thresholds
from ..gating.verdict import run_verdict
from ..report.agreement import agreement, format_agreement, load_labels
from ..report.model import build_report
from ..report.outputs import FORMATS, write_report_files
from ..report.summary import format_comparison, format_summary, format_verdict
from ..results.files import check_one_run, dedupe_rows, load_rows, write_rows
from ..results.rows import ResultRow
from ..settings import RunSettings, resolve_settings
from ..settings.table import SETTING
from .subcommands import Subcommands


def _settings(args: argparse.Namespace) -> RunSettings:
    options = {"thresholds": getattr(args, "thresholds", None), "expectations": getattr(args, "expectations", None),
               "completion_counting": getattr(args, "completion_counting", None)}
    return resolve_settings(options, Path.cwd(), os.environ)


def _report(args: argparse.Namespace) -> int:
    rules = _rules(args)
    return _summarise(load_rows(Path(args.results)), args, rules, source=str(args.results))


def _merge(args: argparse.Namespace) -> int:
    """One results file of several: only if one set-up produced every row; a case in two files is one case."""
    rules = _rules(args)  # a bad option or file stops the command before it writes anything
    sources = [(str(path), load_rows(Path(path))) for path in args.results]
    check_one_run(sources, what="merge")
    rows = dedupe_rows(row for _, rows in sources for row in rows)
    write_rows(Path(args.output), rows)
    print(f"merged {len(rows)} cases from {len(args.results)} files -> {args.output}")
    return _summarise(rows, args, rules, source=", ".join(args.results))


def _rules(args: argparse.Namespace) -> tuple[RunSettings, Thresholds, Expectations | None]:
    """The settings, thresholds and expectations a summary is judged by, read (and checked) first."""
    settings = _settings(args)
    thresholds = load_thresholds(settings.thresholds_path)
    return settings, thresholds, load_expectations(settings.expectations) if settings.expectations else None


def _summarise(rows: list[ResultRow], args: argparse.Namespace,
               rules: tuple[RunSettings, Thresholds, Expectations | None], *, source: str) -> int:
    """Print the summary and the verdict of these rows, write the report files asked for; 1 if the verdict fails.
    The verdict is a run's: each row's own (recorded when it ran), gates over every row, infrastructure errors."""
    settings, thresholds, expectations = rules
    report = build_report(rows, thresholds, run=run_of(rows, source), expectations=expectations,
                          settings={"completion_counting": settings.completion_counting},
                          prices=load_prices(settings.prices),
                          retest=measure(rows, confidence=thresholds.aggregate.confidence))
    for line in format_summary(report):
        print(line)
    asked = {form.setting: getattr(args, form.cli_dest) for form in FORMATS}
    written = write_report_files(report, {setting: Path(path) for setting, path in asked.items() if path})
    for kind, path in written.items():
        print(f"{kind} report -> {path}")
    for line in format_verdict(report.verdict, Path(source) if len(source.split(", ")) == 1 else None):
        print(line)
    for line in report.verdict.failures:
        print(f"FAILED {line}")
    return 0 if report.verdict.passed else 1


def run_of(rows: list[ResultRow], source: str) -> dict[str, object]:
    """The run's metadata, as its rows carry it (the models, the assistant, its run id or ids), and the source."""
    fields = ("run_id", "assistant", "assistant_kind", "assistant_context", "assistant_model", "assistant_prompt",
              "user_model", "judge_model", "record_mode")
    found: dict[str, object] = {"source": source}
    for name in fields:
        values = sorted({str(getattr(row, name)) for row in rows if getattr(row, name) not in (None, "")})
        if values:
            found[name] = values[0] if len(values) == 1 else ", ".join(values)
    return found


def _compare(args: argparse.Namespace) -> int:
    settings = _settings(args)
    rules = load_thresholds(settings.thresholds_path).aggregate
    confidence = rules.confidence if args.confidence is None else args.confidence
    candidate = load_rows(Path(args.candidate), what="candidate")
    retest = measure(candidate, confidence=confidence)
    live = judged_now(candidate)
    measured = drift_margins(retest, live)
    result = compare_rows(load_rows(Path(args.base), what="base"), candidate,
                          margin=args.margin, confidence=confidence, gate_domains=args.per_domain, min_n=rules.min_n,
                          max_missing=rules.max_infrastructure_errors, measured=measured,
                          margin_basis=margin_basis(retest, measured, live),
                          margins=rules.margin, drifts=rules.drift, counting=settings.completion_counting)
    for line in format_comparison(result):
        print(line)
    if result.shared_scenarios == 0 and not result.coverage_failure:
        print("personalens: error: the two runs share no scored scenario", file=sys.stderr)
        return 2
    verdict = run_verdict([], [], rules, comparison=result)
    for line in verdict.failures:
        print(f"FAILED {line}")
    return 0 if verdict.passed else 1


def _expectations_update(args: argparse.Namespace) -> int:
    rows = load_rows(Path(args.results))
    assistants = sorted({row.assistant for row in rows if row.assistant})
    if args.output:
        path = Path(args.output)
    elif len(assistants) == 1:
        settings = _settings(args)
        path = location(settings.expectations, settings.cassette_dir, assistants[0])
    else:
        raise UsageError(f"--output: {args.results} holds rows of {len(assistants)} assistants "
                         f"({', '.join(assistants) or 'none named'}): say which expectations file to write")
    updated, changes = update_expectations(path, rows)
    for sid, change in sorted(changes.items()):
        print(f"  {sid}: {change}")
    known = sum(1 for e in updated.scenarios.values() if e.outcome != "pass")
    print(f"expectations -> {path}: {len(changes)} changed, {known} scenarios expected to fail or flaky")
    return 0


def _agreement(args: argparse.Namespace) -> int:
    result = agreement(load_labels(Path(args.a), what="A"), load_labels(Path(args.b), what="B"))
    for line in format_agreement(result):
        print(line)
    if result["shared"] == 0:
        print("personalens: error: the two files share no scored dialogue", file=sys.stderr)
        return 2
    return 0


def _report_files(cmd: argparse.ArgumentParser) -> None:
    for form in FORMATS:
        cmd.add_argument(form.cli_flag, metavar="PATH", help=f"write {form.what} here {form.also}".strip())
    SETTING["thresholds"].add_to(cmd, help="gates to evaluate (default: ./thresholds.yaml)")
    cmd.add_argument("--expectations", metavar="PATH",
                     help="judge rows of older versions (which carry no verdict) against this expectations file")
    _counting(cmd)


def _counting(cmd: argparse.ArgumentParser) -> None:
    SETTING["completion_counting"].add_to(
        cmd, help="how an unreadable completion verdict counts: ours (left out) or paper (not completed); default: the "
                  "project's config, else ours - give the run's (a --preset paper run: paper)")


def add_commands(sub: Subcommands) -> None:
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
    compare.add_argument("--margin", type=float, default=None,
                         help="tolerated drop: red only if the CI lies below -X, green only if above it (default: per "
                              "metric, the drop the judge alone showed on the candidate's dialogues judged from the "
                              "recording and again now, --judge-retest, times the share of its scores judged now, "
                              "moving only the red bar; else 0)")
    compare.add_argument("--confidence", type=float, default=None,
                         help="of the intervals, more than 0.5 and less than 1 (default: thresholds.yaml's, 0.95)")
    _counting(compare)
    SETTING["thresholds"].add_to(
        compare, help="where confidence, min_n and max_infrastructure_errors come from (default: ./thresholds.yaml)")
    compare.add_argument("--per-domain", action="store_true", help="a significant drop in any one domain also fails")
    compare.set_defaults(func=_compare)

    agree = sub.add_parser("agreement", help="agreement of two judges (or a judge and human labels) on the same dialogues")
    agree.add_argument("a", metavar="A")
    agree.add_argument("b", metavar="B")
    agree.set_defaults(func=_agreement)

    expect = sub.add_parser("expectations", help="each scenario's expected outcome, kept beside the cassettes")
    expect_sub = expect.add_subparsers(dest="action", required=True)
    update = expect_sub.add_parser("update", help="set the expectations of the scenarios in RESULTS to what they show")
    update.add_argument("results", metavar="RESULTS", help="a run's results.jsonl (or report.json)")
    update.add_argument("--output", "-o", metavar="PATH",
                        help="the file to write (default: expectations.yaml beside the assistant's cassettes)")
    update.set_defaults(func=_expectations_update)
