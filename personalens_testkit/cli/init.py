"""``personalens init``: make a repository ready to run the benchmark against its own assistant. Writes
``suites/test_personalens.py`` (the cases) and ``suites/conftest.py`` (deepeval's pytest plugin off for
them), ``personalens.toml`` (settings, the models and the bot's entry), ``thresholds.yaml`` (floors and
gates), the run folders' lines in ``.gitignore`` and, unless ``--no-ci``, a GitHub Actions workflow that
gates pull requests with ``personalens gate`` (made from ``--kind``, ``--start``, ``--health-url`` and
``--models``: see :mod:`.init_workflow`). A file that exists is left alone unless ``--force``, which says
what it overwrote; an existing personalens.toml without the named assistant gets its entry added, and an
existing .gitignore gets the lines it lacks. With ``--owners``, a CODEOWNERS line makes the workflow's file
need their review (a pull request that edits it edits its own gate); without, init says how to protect it.
Then: record with live models (``pytest suites/ --record-mode
once``), commit ``cassettes/``, and pull requests replay offline."""

from __future__ import annotations

import argparse
import re
import tomllib
from importlib import resources
from pathlib import Path
from string import Template

from ..assistants.kinds import SCAFFOLDS, SERVER_ADDRESSES
from ..errors import PersonalensError, UsageError
from ..files import write_atomically
from ..gating.thresholds import default_thresholds_path
from .init_workflow import MODEL_LINES, PROVIDERS, SERVER_KINDS, GateSetup, bot_address, render_workflow
from .plan import config_with_budget, planned_profiles_line, recording_budget
from .subcommands import Subcommands

#: what a run writes that is not to be committed: run results, the gate's folder, scratch recordings
GITIGNORE = ("personalens-results/", "personalens-gate/", "my-cassettes/", ".deepeval/")
_GITIGNORE_HEAD = "# personalens-testkit: run results, the PR gate's output, scratch recordings (--cassette-dir my-cassettes)"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: where GitHub looks for CODEOWNERS, in its order; init writes the first when there is none
CODEOWNERS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
WORKFLOW = ".github/workflows/personalens-pr-gate.yml"
#: a GitHub user (@name), team (@org/team) or e-mail address
_OWNER = re.compile(r"^(@[A-Za-z0-9][A-Za-z0-9-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?|[^@\s]+@[^@\s]+\.[^@\s]+)$")
PROTECT = (f"protect {WORKFLOW}: a pull request that edits it edits its own gate (it runs as the pull request has "
           "it). Run init again with --owners @your-org/your-team (a CODEOWNERS line) and turn on \"Require review "
           "from Code Owners\" in the target branch's protection, or add a ruleset that requires review of "
           ".github/workflows/**; make the gate's job a required status check")


def _template(name: str) -> str:
    return (resources.files("personalens_testkit.scaffold") / name).read_text(encoding="utf-8")


def bot_entry(name: str, kind: str, health_url: str | None = None) -> str:
    """The ``[assistants.NAME]`` table of personalens.toml, without a newline at its end."""
    entry = Template(SCAFFOLDS[kind]).substitute(address=bot_address(health_url, SERVER_ADDRESSES.get(kind, "")))
    return Template(_template("assistant.toml.txt")).substitute(name=name, entry=entry).rstrip("\n")


def planned_files(target: Path, *, name: str, setup: GateSetup, ci: bool) -> dict[Path, str]:
    """What init writes where (.gitignore apart: it is only ever appended to)."""
    fill = dict(name=name, models=MODEL_LINES[setup.models], entry=bot_entry(name, setup.kind, setup.health_url),
                profiles=planned_profiles_line())
    template = Template(_template("personalens.toml.txt"))
    # the budget is what recording this very selection with these models would cost
    config = config_with_budget(template, fill)
    files = {
        target / "suites" / "test_personalens.py": _template("test_personalens.py.txt"),
        target / "suites" / "conftest.py": _template("conftest.py.txt"),
        target / "personalens.toml": config,
        target / "thresholds.yaml": default_thresholds_path().read_text(encoding="utf-8"),
    }
    if ci:
        files[target / WORKFLOW] = render_workflow(setup)
    return files


def codeowners(target: Path, owners: list[str]) -> tuple[Path, str]:
    """The CODEOWNERS line that makes the gate's workflow need ``owners``' review: added to the repository's
    CODEOWNERS (the first GitHub reads), or a new .github/CODEOWNERS."""
    for owner in owners:
        if not _OWNER.match(owner):
            raise UsageError(f"--owners: {owner!r}: a GitHub user (@name), a team (@org/team) or an e-mail address")
    path = next((target / name for name in CODEOWNERS if (target / name).is_file()), target / CODEOWNERS[0])
    line = f"/{WORKFLOW} {' '.join(owners)}"
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        return path, f"kept (could not read it: {type(exc).__name__}); add: {line}"
    if any(row.split()[:1] == [f"/{WORKFLOW}"] for row in text.splitlines()):
        return path, f"kept (it names /{WORKFLOW} already)"
    lead = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    write_atomically(path, text + lead + "# the personalization gate's workflow: its change needs these owners' "
                     "review (turn on \"Require review from Code Owners\")\n" + line + "\n")
    return path, "written" if not text else f"added {line}"


def scaffold(target: Path, *, name: str, setup: GateSetup, ci: bool, force: bool) -> list[tuple[Path, str]]:
    """Write the files init writes; returns each file with what happened to it."""
    if not _NAME.match(name):
        raise UsageError(f"--assistant: {name!r}: use letters, digits, '-', '_' or '.' (a config table name)")
    setup.check()
    done = []
    for path, text in planned_files(target, name=name, setup=setup, ci=ci).items():
        if not path.exists():
            write_atomically(path, text)
            done.append((path, "written"))
        elif force:
            done.append((path, _overwrite(path, text)))
        elif path.name == "personalens.toml":
            done.append((path, _add_assistant(path, name, setup)))
        else:
            done.append((path, "kept (it exists; --force overwrites it)"))
    done.append((target / ".gitignore", _gitignore(target / ".gitignore")))
    return done


def _overwrite(path: Path, text: str) -> str:
    try:
        old = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        old, was = None, f"was unreadable: {type(exc).__name__}"
    else:
        was = f"was {len(old.splitlines())} lines"
    if old == text:
        return "unchanged (--force: it was already this)"
    write_atomically(path, text)
    return f"overwritten ({was}; now {len(text.splitlines())})"


def _add_assistant(path: Path, name: str, setup: GateSetup) -> str:
    """Append ``[assistants.NAME]`` to an existing personalens.toml that lacks it (every other byte kept)."""
    try:
        text = path.read_text(encoding="utf-8")
        assistants = tomllib.loads(text).get("assistants", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"kept (could not read it: {exc}; --force overwrites it)"
    if name in assistants:
        return f"kept (it has [assistants.{name}]; --force overwrites it)"
    separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    write_atomically(path, text + separator + bot_entry(name, setup.kind, setup.health_url) + "\n")
    return (f"[assistants.{name}] added (the rest kept as it was; run it with --assistant {name}, "
            f"or make it the default: assistant = \"{name}\")")


def _gitignore(path: Path) -> str:
    """Add the lines init's runs need to .gitignore, keeping what is there."""
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        return f"kept (could not read it: {type(exc).__name__}); add: {' '.join(GITIGNORE)}"
    have = {line.strip().strip("/") for line in text.splitlines()}
    missing = [line for line in GITIGNORE if line.strip("/") not in have]
    if not missing:
        return "kept (it ignores the run folders already)"
    lead = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    write_atomically(path, text + lead + "\n".join([_GITIGNORE_HEAD, *missing]) + "\n")
    return "written" if not text else f"added {', '.join(missing)}"


def _init(args: argparse.Namespace) -> int:
    target = Path(args.directory)
    if not target.is_dir():
        raise UsageError(f"personalens init: {target}: no such folder")
    setup = GateSetup(kind=args.kind, models=args.models, start=args.start, health_url=args.health_url)
    done = scaffold(target, name=args.assistant, setup=setup, ci=not args.no_ci, force=args.force)
    if not args.no_ci and args.owners:
        done.append(codeowners(target, [o for given in args.owners for o in given.replace(",", " ").split()]))
    for path, what in done:
        print(f"  {path}: {what}")
    if not args.no_ci:
        if not args.owners:
            print(f"  note: {PROTECT}")
        print("  note: the gate runs your bot under a user id of its own, apart from the models' keys and the "
              "verdict's files; it needs root or passwordless sudo for that (GitHub's hosted runners have it; on "
              "a self-hosted runner without either it says \"no isolation\" on every run)")
    if not args.no_ci and args.kind in SERVER_KINDS and not args.start:
        print("  note: the workflow cannot start your bot yet: set BOT_START (and BOT_HEALTH_URL) in it, or run "
              "init again with --start CMD --health-url URL --force")
    print(next_steps(target, args.assistant, args.models, gate=not args.no_ci))
    return 0


def next_steps(target: Path, assistant: str, models: str, *, gate: bool) -> str:
    """What to do after init, as one story with what it wrote: the selection and budget of personalens.toml, the
    command that records it, and what a pull request runs."""
    try:
        budget = recording_budget((target / "personalens.toml").read_text(encoding="utf-8"))
        cost = (f"about ${budget.cost[1]:,.0f} (${budget.cost[0]:,.0f} - ${budget.cost[2]:,.0f}) live, within "
                "personalens.toml's max_cost" if budget.cost and budget.cost[2] > 0 else
                "free on the embedded model (it costs time)" if budget.cost else "cost unknown: a model is unpriced")
        selection = f"the {budget.scenarios:,} scenarios personalens.toml selects, {cost}"
    except PersonalensError as exc:  # a personalens.toml of the team's own, left alone, that does not read
        selection = f"personalens.toml's selection (it does not read yet: {exc})"
    choose = ("choose the user agent and judge models (user_model, judge_model, or --models openai|bedrock), "
              if models == "local" else "")
    pulls = ("each pull request runs `personalens gate` (the workflow init wrote does): it replays what the bot still "
             "answers the same and judges the rest live" if gate else
             "pull requests replay offline: pytest suites/, or gate with `personalens gate`")
    return (f"next: edit the [assistants.{assistant}] entry in personalens.toml, {choose}then record on main: "
            f"pytest suites/ --record-mode once ({selection}; `personalens plan` sizes it); commit cassettes/ "
            f"with your code; {pulls}")


def add_commands(sub: Subcommands) -> None:
    cmd = sub.add_parser("init", help="add a PersonaLens suite, config, thresholds and a CI gate to a repository")
    cmd.add_argument("directory", nargs="?", default=".", help="the repository (default: here)")
    cmd.add_argument("--assistant", default="my-bot", metavar="NAME", help="the name of your bot's entry (default my-bot)")
    cmd.add_argument("--kind", choices=sorted(SCAFFOLDS), default="http", help="how the testkit talks to your bot")
    cmd.add_argument("--start", metavar="CMD", help="kinds http and openai: the shell command that starts your bot's "
                                                    "server, from the repository's root (written into the workflow)")
    cmd.add_argument("--health-url", metavar="URL", help="kinds http and openai: a URL that answers 2xx once the bot "
                                                         "is up (the workflow's gate waits for it)")
    cmd.add_argument("--models", choices=PROVIDERS, default="local",
                     help="the user agent's and judge's models: local (embedded, CI replays offline), openai "
                          "(openai:gpt-4o, the OPENAI_API_KEY secret) or bedrock (preset paper, the AWS_ROLE_ARN "
                          "secret); default local")
    cmd.add_argument("--no-ci", action="store_true", help="do not write the GitHub Actions workflow")
    cmd.add_argument("--owners", action="append", metavar="@ORG/TEAM",
                     help="who must review a change to the gate's workflow: a CODEOWNERS line for it (users, teams "
                          "or e-mail addresses; repeat or separate with commas)")
    cmd.add_argument("--force", action="store_true", help="overwrite files that exist (.gitignore is only added to)")
    cmd.set_defaults(func=_init)
