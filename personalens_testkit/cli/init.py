"""``personalens init``: make a repository ready to run the benchmark against its own assistant. Writes
``suites/test_personalens.py`` (the cases), ``personalens.toml`` (settings and the bot's entry),
``thresholds.yaml`` (floors and gates) and, unless ``--no-ci``, a GitHub Actions workflow that gates pull
requests; a file that exists is left alone unless ``--force``. Then: record with live models
(``pytest suites/ --record-mode once``), commit ``cassettes/``, and pull requests replay offline."""

from __future__ import annotations

import argparse
import re
from importlib import resources
from pathlib import Path
from string import Template

from ..errors import UsageError
from ..files import write_atomically
from ..gating.thresholds import default_thresholds_path

#: the bot entry of each kind, as personalens.toml lines (the user edits the address or command)
ENTRIES = {
    "http": 'kind = "http"\nurl = "http://127.0.0.1:8080/reply"          # POST: the turn contract (see docs/assistants.md)',
    "openai": 'kind = "openai"\nbase_url = "http://127.0.0.1:8080/v1"       # an OpenAI-compatible endpoint serving your bot\n'
              'model = "my-bot"',
    "python": 'kind = "python"\ncallable = "my_bot:reply"                # module:function taking the request dict\npath = ["."]',
    "command": 'kind = "command"\ncommand = ["python3", "my_bot.py"]       # JSON lines on stdin and stdout',
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _template(name: str) -> str:
    return (resources.files("personalens_testkit.scaffold") / name).read_text(encoding="utf-8")


def scaffold(target: Path, *, name: str, kind: str, ci: bool, force: bool) -> list[tuple[Path, str]]:
    """The files init writes (path, what happened to it)."""
    if not _NAME.match(name):
        raise UsageError(f"--assistant: {name!r}: use letters, digits, '-', '_' or '.' (a config table name)")
    files = {
        target / "suites" / "test_personalens.py": _template("test_personalens.py.txt"),
        target / "personalens.toml": Template(_template("personalens.toml.txt")).substitute(name=name, entry=ENTRIES[kind]),
        target / "thresholds.yaml": default_thresholds_path().read_text(encoding="utf-8"),
    }
    if ci:
        files[target / ".github" / "workflows" / "personalens-pr-gate.yml"] = \
            _template("personalens-pr-gate.yml").replace("my-bot", name)
    done = []
    for path, text in files.items():
        if path.exists() and not force:
            done.append((path, "kept (it exists; --force overwrites it)"))
            continue
        write_atomically(path, text)
        done.append((path, "written"))
    return done


def _init(args: argparse.Namespace) -> int:
    target = Path(args.directory)
    if not target.is_dir():
        raise UsageError(f"personalens init: {target}: no such folder")
    for path, what in scaffold(target, name=args.assistant, kind=args.kind, ci=not args.no_ci, force=args.force):
        print(f"  {path}: {what}")
    print(f"next: edit the [assistants.{args.assistant}] entry in personalens.toml, choose the user agent and judge "
          "models (user_model, judge_model), then record live: pytest suites/ --record-mode once --profiles 7 "
          "--domains Alarm; commit cassettes/ with your code, and pull requests replay offline: pytest suites/")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    cmd = sub.add_parser("init", help="add a PersonaLens suite, config, thresholds and a CI gate to a repository")
    cmd.add_argument("directory", nargs="?", default=".", help="the repository (default: here)")
    cmd.add_argument("--assistant", default="my-bot", metavar="NAME", help="the name of your bot's entry (default my-bot)")
    cmd.add_argument("--kind", choices=sorted(ENTRIES), default="http", help="how the testkit talks to your bot")
    cmd.add_argument("--no-ci", action="store_true", help="do not write the GitHub Actions workflow")
    cmd.add_argument("--force", action="store_true", help="overwrite files that exist")
    cmd.set_defaults(func=_init)
