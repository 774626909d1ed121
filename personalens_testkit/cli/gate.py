"""``personalens gate`` (a pull request's verdict: everything that decides it from a trusted commit, only the
bot from the pull request) and ``personalens promote`` (on main: a gate run's recording becomes the committed
one). See docs/pr-gate.md."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from ..gate.git import repository, resolve_base
from ..gate.promote import promote
from ..gate.run import RECORD_MODES, GateOptions, run_gate
from ..assistants.bot_identity import bot_env_names
from ..gate.elevation import ELEVATED, can_elevate, elevated_command
from .subcommands import Subcommands


def _gate(args: argparse.Namespace) -> int:
    bot_env = bot_env_names(name.strip() for given in args.bot_env or [] for name in given.split(","))
    if args.isolation == "auto" and os.geteuid() != 0 and not os.environ.get(ELEVATED) and can_elevate():
        # the bot's user id needs root to be made: the same gate again under passwordless sudo
        print("personalens gate: not root; running again under sudo to give the bot a user id of its own",
              flush=True)
        return subprocess.run(elevated_command(args.argv), check=False).returncode  # noqa: S603
    repo = repository(Path.cwd())
    extra = list(args.pytest_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    options = GateOptions(
        repo=repo, base=resolve_base(repo, args.base, args.target), out=Path(args.out).absolute(),
        record_mode=args.record_mode, suites=tuple(args.suite or ["suites"]), pytest_args=extra, start=args.start,
        health_url=args.health_url, start_timeout_s=args.start_timeout, bot_env=bot_env,
        isolation=args.isolation == "auto",
    )
    return run_gate(options)


def _promote(args: argparse.Namespace) -> int:
    repo = repository(Path.cwd())
    written = promote(Path(args.gate_dir), repo)
    for name in written:
        print(f"  {name}: promoted")
    print(f"personalens promote: {len(written)} files from {args.gate_dir} into the committed recording"
          + ("; commit them" if written else " (nothing differed)"))
    return 0


def add_commands(sub: Subcommands) -> None:
    cmd = sub.add_parser("gate", help="a pull request's verdict: the verdict's files from the base, the bot from "
                                      "this checkout (docs/pr-gate.md)")
    cmd.add_argument("--base", metavar="REF", help="the trusted commit (default: the merge base of HEAD and the "
                                                   "target branch)")
    cmd.add_argument("--target", metavar="BRANCH", help="the branch the pull request goes into (default: "
                                                        "$GITHUB_BASE_REF, else main; origin/BRANCH first)")
    cmd.add_argument("--start", metavar="CMD", help="the shell command that starts the bot, run in (a copy of) this "
                                                    "checkout")
    cmd.add_argument("--health-url", metavar="URL", help="answers 2xx once the bot is ready (waited for)")
    cmd.add_argument("--start-timeout", type=float, default=60.0, metavar="S", help="the longest wait for "
                                                                                     "--health-url (default 60)")
    cmd.add_argument("--record-mode", choices=RECORD_MODES, default="none",
                     help="none (default): offline, a changed reply is not scored; new_episodes: the models are "
                          "called live from the first changed reply (needs their credentials)")
    cmd.add_argument("--bot-env", action="append", metavar="NAME[,NAME...]",
                     help="a variable of this environment the bot also gets (its own secret, say); the bot sees "
                          "nothing else of it but PATH, the locale and TZ. A model's variable is refused")
    cmd.add_argument("--isolation", choices=("auto", "off"), default="auto",
                     help="auto (default): the bot runs under a user id of its own when the gate is root or has "
                          "passwordless sudo, and the gate says so when it cannot; off: as the gate's user (a "
                          "local try-out: the bot could change the verdict)")
    cmd.add_argument("--out", default="personalens-gate", metavar="DIR",
                     help="the run's reports and recording (default: personalens-gate)")
    cmd.add_argument("--suite", action="append", metavar="PATH", help="the suite in the base (default: suites)")
    cmd.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: more pytest options (-n 2 "
                                                                   "--concurrency 8, ...)")
    cmd.set_defaults(func=_gate)
    cmd = sub.add_parser("promote", help="on main: make a gate run's recording the committed one")
    cmd.add_argument("gate_dir", metavar="GATE_DIR", help="the gate run's folder (its --out)")
    cmd.set_defaults(func=_promote)
