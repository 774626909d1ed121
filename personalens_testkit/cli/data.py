"""``personalens data stats|check`` and ``personalens serve-model``: the benchmark data, and the embedded model."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ..data.context import build_context
from ..data.loader import open_dataset
from ..data.models import DOMAINS
from ..data.samples import SAMPLE_CHOICES
from ..data.selection import Selection, parse_sample, select_scenarios
from ..errors import PersonalensError
from ..llm.embedded import EmbeddedServer, wait_until_healthy
from ..llm.local_settings import LocalServerSettings
from ..settings.table import SETTING
from .subcommands import Subcommands


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


def add_commands(sub: Subcommands) -> None:
    data = sub.add_parser("data", help="look at the benchmark data").add_subparsers(dest="action", required=True)
    for name, func, help_text in (("stats", _stats, "scenario counts"), ("check", _check, "validate every data file")):
        cmd = data.add_parser(name, help=help_text)
        SETTING["personalens_data"].add_to(cmd, help="upstream checkout (default: bundled sample)")
        if name == "stats":
            cmd.add_argument("--sample", default="all", choices=SAMPLE_CHOICES)
        cmd.set_defaults(func=func)
    serve = sub.add_parser("serve-model", help="run the embedded model server in the foreground")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    serve.add_argument("--model", default=None, metavar="FILE.gguf", help="a GGUF file (default: the bundled SmolLM2-135M)")
    serve.add_argument("--n-ctx", type=int, default=LocalServerSettings().n_ctx)
    serve.set_defaults(func=_serve)
