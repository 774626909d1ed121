"""``personalens`` command line: look at the benchmark data, serve the embedded model.

    personalens data stats [--personalens-data DIR] [--sample 50]   scenario counts by kind and domain
    personalens data check [--personalens-data DIR]                 validate every data file
    personalens serve-model [--port N] [--model FILE.gguf]           run the embedded server in the foreground
    personalens report RESULTS [--html P] [--json P] [--junit P]    summary and report files from a run's rows
    personalens compare BASE CANDIDATE [--margin X]                 paired comparison; exit 1 on a significant drop
    personalens agreement A B                                       two judges (or a judge and human labels)
    personalens merge RESULTS... --output P [--html P] [...]        join shards' results into one report and gates

Running the benchmark itself is ``pytest suites/`` (see README).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

from .data.context import build_context
from .data.loader import open_dataset
from .data.models import DOMAINS
from .data.samples import SAMPLE_CHOICES
from .data.selection import Selection, parse_sample, select_scenarios
from .errors import PersonalensError
from .llm.embedded import EmbeddedServer, LocalServerSettings, wait_until_healthy


def _stats(args: argparse.Namespace) -> int:
    dataset = open_dataset(args.personalens_data)
    scenarios = select_scenarios(dataset, Selection(sample=parse_sample(args.sample)))
    kinds = Counter(s.kind.label for s in scenarios)
    users = len({s.user_id for s in scenarios})
    print(f"{dataset.label}: {users} profiles, {len(scenarios)} scenarios "
          f"({kinds.get('SD', 0)} single-domain, {kinds.get('MD', 0)} multi-domain)")
    per_domain = Counter(s.domains[0] for s in scenarios if s.kind.label == "SD")
    for domain in DOMAINS:
        print(f"  {domain:12} {per_domain.get(domain, 0):6} single-domain")
    return 0


def _check(args: argparse.Namespace) -> int:
    dataset = open_dataset(args.personalens_data)
    problems = 0
    try:
        dataset.catalogue()
    except PersonalensError as exc:
        print(exc)
        problems += 1
    numbers = dataset.user_numbers()
    for number in numbers:
        try:
            for scenario in dataset.scenarios_for(number):
                build_context(dataset, scenario)
        except PersonalensError as exc:
            print(exc)
            problems += 1
    print(f"checked {len(numbers)} profiles in {dataset.label}: {problems or 'no'} problem(s)")
    return 1 if problems else 0


def _serve(args: argparse.Namespace) -> int:
    settings = LocalServerSettings(model_path=Path(args.model) if args.model else None, n_ctx=args.n_ctx)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedServer(settings, Path(tmp) / "server.log")
        handle = server.launch(port=args.port)
        try:
            wait_until_healthy(handle.url, settings.startup_timeout_s, pid=handle.pid, log_path=handle.log_path)
            print(f"serving {settings.resolved_model().name} at {handle.url} (Ctrl-C stops it)")
            print(f"use it with: pytest suites/ --local-url {handle.url}", flush=True)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            while server.process is not None and server.process.poll() is None:
                time.sleep(0.5)
            print("the server stopped")
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            server.stop()


def _report(args: argparse.Namespace) -> int:
    from .report.compare import load_rows

    return _summarise(load_rows(Path(args.results)), args, source=str(args.results))


def _merge(args: argparse.Namespace) -> int:
    import json

    from .data.models import case_id
    from .files import write_atomically
    from .report.compare import load_rows

    merged: dict[str, dict] = {}
    for path in args.results:
        for row in load_rows(Path(path)):
            merged[case_id(row["scenario_id"], row.get("repeat"))] = row
    rows = list(merged.values())
    write_atomically(Path(args.output), "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    print(f"merged {len(rows)} cases from {len(args.results)} files -> {args.output}")
    return _summarise(rows, args, source=", ".join(args.results))


def _summarise(rows: list, args: argparse.Namespace, *, source: str) -> int:
    """Print the summary of these rows, write the report files asked for; 1 if a gate failed."""
    from .gating.thresholds import default_thresholds_path, load_thresholds
    from .report.outputs import write_report_files
    from .report.summary import build_report, failed_gates, format_summary

    thresholds_path = args.thresholds or ("thresholds.yaml" if Path("thresholds.yaml").is_file() else default_thresholds_path())
    report = build_report(rows, load_thresholds(thresholds_path), run={"source": source})
    for line in format_summary(report):
        print(line)
    written = write_report_files(
        report, json_path=Path(args.json) if args.json else None, junit_path=Path(args.junit) if args.junit else None,
        html_path=Path(args.html) if args.html else None,
    )
    for kind, path in written.items():
        print(f"{kind} report -> {path}")
    for line in failed_gates(report):
        print(f"FAILED {line}")
    return 1 if failed_gates(report) else 0


def _compare(args: argparse.Namespace) -> int:
    from .report.compare import compare_rows, format_comparison, load_rows

    result = compare_rows(load_rows(Path(args.base), what="base"), load_rows(Path(args.candidate), what="candidate"),
                          margin=args.margin, confidence=args.confidence, gate_domains=args.per_domain)
    for line in format_comparison(result):
        print(line)
    if result["shared_scenarios"] == 0:
        print("personalens: error: the two runs share no scored scenario", file=sys.stderr)
        return 2
    return 1 if result["failed"] else 0


def _agreement(args: argparse.Namespace) -> int:
    from .report.agreement import agreement, format_agreement
    from .report.compare import load_rows

    result = agreement(load_rows(Path(args.a), what="A"), load_rows(Path(args.b), what="B"))
    for line in format_agreement(result):
        print(line)
    if result["shared"] == 0:
        print("personalens: error: the two files share no scored dialogue", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="personalens", description="PersonaLens testkit tools; run the benchmark with pytest suites/.")
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", help="look at the benchmark data").add_subparsers(dest="action", required=True)
    for name, func, help_text in (("stats", _stats, "scenario counts"), ("check", _check, "validate every data file")):
        cmd = data.add_parser(name, help=help_text)
        cmd.add_argument("--personalens-data", metavar="DIR", default=None, help="upstream checkout (default: bundled sample)")
        if name == "stats":
            cmd.add_argument("--sample", default="all", choices=SAMPLE_CHOICES)
        cmd.set_defaults(func=func)
    serve = sub.add_parser("serve-model", help="run the embedded model server in the foreground")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    serve.add_argument("--model", default=None, metavar="FILE.gguf", help="a GGUF file (default: the bundled SmolLM2-135M)")
    serve.add_argument("--n-ctx", type=int, default=LocalServerSettings().n_ctx)
    serve.set_defaults(func=_serve)

    report = sub.add_parser("report", help="summary and report files from a run's results.jsonl or report.json")
    report.add_argument("results", metavar="RESULTS")
    report.add_argument("--html", metavar="PATH", help="write the self-contained HTML report here")
    report.add_argument("--json", metavar="PATH", help="write the report JSON here")
    report.add_argument("--junit", metavar="PATH", help="write JUnit XML here")
    report.add_argument("--thresholds", metavar="PATH", help="gates to evaluate (default: ./thresholds.yaml)")
    report.set_defaults(func=_report)

    merge = sub.add_parser("merge", help="join the results of shards (or of a run and its resumption) into one report")
    merge.add_argument("results", metavar="RESULTS", nargs="+")
    merge.add_argument("--output", "-o", metavar="PATH", required=True, help="the merged results.jsonl")
    merge.add_argument("--html", metavar="PATH")
    merge.add_argument("--json", metavar="PATH")
    merge.add_argument("--junit", metavar="PATH")
    merge.add_argument("--thresholds", metavar="PATH", help="gates to evaluate (default: ./thresholds.yaml)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PersonalensError as exc:
        from .secrets import redact

        print(redact(f"personalens: error: {exc}"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
