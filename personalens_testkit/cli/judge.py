"""``personalens judge CONVERSATIONS.jsonl``: the benchmark's judge on a team's own conversations. Each is
judged on the six dimensions with the user context it comes with (or ``--context``), checked against the
floors of thresholds.yaml, and written as the rows and reports a run writes (results.jsonl, report.json,
junit.xml, report.html, summary.md) with the same summary, gates and verdict (exit 1 if it fails)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..agents.judge import Judge
from ..gating.thresholds import load_thresholds, shortfalls
from ..report.model import build_report
from ..report.outputs import in_folder, write_report_files
from ..report.summary import format_summary, format_verdict
from ..results.conversations import context_of, judge_conversation, load_contexts, load_conversations
from ..results.files import ResultsWriter
from ..results.rows import RunInfo
from ..run.models import ModelPool
from ..run.state import new_run_id
from ..secrets import redact_json
from ..settings import resolve_settings
from ..settings.table import SETTING
from .subcommands import Subcommands


def _judge(args: argparse.Namespace) -> int:
    options = {"judge_model": args.judge_model, "thresholds": args.thresholds, "results_dir": args.results_dir}
    settings = resolve_settings(options, Path.cwd(), os.environ)
    conversations = load_conversations(Path(args.conversations))
    contexts = load_contexts(Path(args.context)) if args.context else None
    thresholds = load_thresholds(settings.thresholds_path)
    run_id = new_run_id()
    folder = settings.results_dir / f"judge-{run_id}"
    judge_name = settings.role_models["judge"].label
    info = RunInfo(run_id=run_id, assistant="conversations", assistant_kind="recorded", assistant_context="given",
                   assistant_model=None, user_model="(real users)", judge_model=judge_name, record_mode=None)
    pool = ModelPool(settings, folder, live_roles=frozenset({"judge"}), is_controller=True)
    writer = ResultsWriter(folder / "results.jsonl")  # each row as it is judged: an interrupted run keeps them
    rows = []
    try:
        pool.check_credentials(lambda role, spec: f"--judge-model {spec}")
        pool.ping_all(lambda role, spec: f"--judge-model {spec}")
        judge = Judge(pool.chat(settings.judge_model, "judge"), parallel=pool.judge_parallel())
        for number, conversation in enumerate(conversations, 1):
            row = judge_conversation(judge, conversation, context_of(conversation, contexts), info, retry=settings.retry)
            if row.status == "passed":  # judged in full (a case with an unreadable answer is the judge's error)
                found = shortfalls(thresholds.scenario, row.scores.model_dump())
                row = row.model_copy(update={"status": "failed" if found else "passed",
                                             "shortfalls": [s.as_dict() for s in found]})
            rows.append(row)
            writer.declare(info)
            writer.write_json(redact_json(row.model_dump_json()))
            print(f"personalens judge: {number}/{len(conversations)} {conversation.id}: {row.status}", file=sys.stderr)
    finally:
        pool.close()
        writer.close()
    report = build_report(rows, thresholds, run={**info.model_dump(), "source": str(args.conversations)},
                          settings={"completion_counting": settings.completion_counting})
    for line in format_summary(report):
        print(line)
    written = write_report_files(report, in_folder(folder))
    print(f"personalens judge: {len(rows)} rows -> {folder / 'results.jsonl'}")
    for kind, path in written.items():
        print(f"{kind} report -> {path}")
    for line in format_verdict(report.verdict):
        print(line)
    for line in report.verdict.failures:
        print(f"FAILED {line}")
    return 0 if report.verdict.passed else 1


def add_commands(sub: Subcommands) -> None:
    cmd = sub.add_parser("judge", help="the benchmark's judge on your own conversations (JSON lines): rows and reports")
    cmd.add_argument("conversations", metavar="CONVERSATIONS", help="JSON lines: id, messages, and optionally context")
    cmd.add_argument("--context", metavar="FILE", help="user contexts: one for all, or by conversation id (JSON)")
    SETTING["judge_model"].add_to(cmd, help="the judge (default: the project's judge_model)")
    SETTING["thresholds"].add_to(cmd, help="floors and gates (default: ./thresholds.yaml)")
    SETTING["results_dir"].add_to(cmd, help="where to write (default: personalens-results)")
    cmd.set_defaults(func=_judge)
