"""One gate run: the base's tree in a folder of its own, the bot from the pull request's checkout, one pytest
run of the base's suite there, its reports and recording in the gate's folder (``--out``), never in the
committed cassettes.

pytest runs with the plugin autoload off (a package the pull request installs cannot add a plugin), its
config and conftest files from the base alone (``-c``, ``--rootdir`` and ``--confcutdir`` in the trusted tree),
a python bot in a process of its own (``--isolate-bot``), the base's recorded results as ``--baseline`` and a
copy of the base's cassettes to replay and record into.

Every process of the pull request's code runs under the run's :class:`~.sandbox.Sandbox` (``--bot-sandbox``):
a user id of its own that can write nothing of the gate's (the trusted tree, the cassettes, the rows and the
reports live in a scratch folder only the gate's user can enter), and whose processes all end with the run,
before anything is kept. The recording the gate keeps is listed, file by file with its digest, in the manifest
the gate writes (``gate.json``); ``personalens promote`` copies nothing that is not listed there as it is.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..assistants.boundary import probe, protected_paths
from ..assistants.bot_identity import bot_checkout, check_bot_values, open_sandbox
from ..assistants.sandbox import Sandbox
from ..errors import GateError, PersonalensError
from ..replay.store import assistant_dir
from ..results.recorded import RESULTS_NAME, existing
from ..settings import SETTINGS, RunSettings, resolve_settings
from .bot import StartedBot
from .elevation import hand_back
from .git import Base, changes, export_tree
from .recording import keep_recording
from .tree import digest, pytest_config, set_writable
from .verdict import GateVerdict, gate_verdict, say_undecided
from .trust import lines, trusted_paths, untrusted_changes, workflow_lines

#: options a gate sets itself: given again after ``--``, they are refused
OWNED = ("--cassette-dir", "--record-mode", "--baseline", "--bot-root", "--isolate-bot", "--results-dir",
         "--json-report", "--html-report", "--junit-report", "--summary-md", "--resume", "--expectations",
         "--thresholds", "--personalens-data", "--rootdir", "-c", "--config-file", "--confcutdir", "-p", "--rejudge",
         "--bot-sandbox")
#: what the gate's folder keeps about the run (read by `personalens promote`)
MANIFEST = "gate.json"
RECORD_MODES = ("none", "new_episodes")


@dataclass
class GateOptions:
    repo: Path
    base: Base
    out: Path
    record_mode: str = "none"
    suites: tuple[str, ...] = ("suites",)
    pytest_args: Sequence[str] = ()
    start: str | None = None
    health_url: str | None = None
    start_timeout_s: float = 60.0
    #: the gate's variables the bot also gets, by name (--bot-env); checked by bot_identity.bot_env_names
    bot_env: tuple[str, ...] = ()
    #: run the bot under a user id of its own where the gate can (--isolation auto); False: --isolation off
    isolation: bool = True
    said: list[str] = field(default_factory=list)
    #: lines for the job summary (the isolation, a changed workflow, the changed files)
    summary: list[str] = field(default_factory=list)


def check_args(args: Sequence[str]) -> None:
    for arg in args:
        name = arg.split("=", 1)[0]
        short = name[:2] if not name.startswith("--") else name  # -c/x, -pfoo: pytest reads attached values too
        if name in OWNED or short in ("-c", "-p", "-o") or name == "--override-ini":
            raise GateError(f"{name}: the gate sets it (the base's files, the run's folder); leave it out of the "
                            "options after --")


def _assistant(args: Sequence[str]) -> dict[str, str]:
    for i, arg in enumerate(args):
        if arg == "--assistant" and i + 1 < len(args):
            return {"assistant": args[i + 1]}
        if arg.startswith("--assistant="):
            return {"assistant": arg.split("=", 1)[1]}
    return {}


def base_settings(tree: Path, args: Sequence[str]) -> RunSettings:
    try:
        return resolve_settings(_assistant(args), tree, os.environ)
    except PersonalensError as exc:
        raise GateError(f"the base's settings: {exc}") from None


def _say(options: GateOptions, line: str) -> None:
    options.said.append(line)
    print(f"personalens gate: {line}", flush=True)


def prepare_out(out: Path) -> None:
    """The gate's folder, emptied: refused when it holds something that is not an earlier gate's."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise GateError(f"--out {out}: not a folder (a link or a file); name a new folder")
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise GateError(f"--out {out}: the folder holds files that are not a gate run's; name an empty or new folder")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / MANIFEST).write_text('{"finished": false}\n', encoding="utf-8")  # a gate's folder from now on


def pytest_command(options: GateOptions, settings: RunSettings, tree: Path, work: Path, scratch: Path,
                   sandbox_file: Path | None = None, bot_root: Path | None = None) -> list[str]:
    out = options.out.resolve()
    command = [sys.executable, "-m", "pytest", *options.suites]
    if importlib.util.find_spec("xdist") is not None:  # before ours, which imports it
        command += ["-p", "xdist.plugin"]
    command += ["-p", "personalens_testkit.plugin", "-p", "no:cacheprovider", "-c", str(pytest_config(tree)), "--rootdir", str(tree),
                "--confcutdir", str(tree), "--record-mode", options.record_mode, "--cassette-dir", str(work),
                "--results-dir", str(scratch / "runs"), "--bot-root", str(bot_root or options.repo), "--isolate-bot",
                "--json-report", str(out / "report.json"), "--html-report", str(out / "report.html"),
                "--junit-report", str(out / "junit.xml")]
    if any(setting.name == "summary_md" for setting in SETTINGS):
        command += ["--summary-md", str(out / "summary.md")]
    if sandbox_file is not None:
        command += ["--bot-sandbox", str(sandbox_file)]
    recorded = existing(assistant_dir(settings.cassette_dir, settings.assistant) / RESULTS_NAME)
    if recorded is not None:
        command += ["--baseline", str(recorded)]
    else:
        _say(options, f"the base has no recorded results for {settings.assistant!r}: no baseline comparison")
    expectations = settings.expectations or assistant_dir(settings.cassette_dir, settings.assistant) / "expectations.yaml"
    if expectations.is_file():
        command += ["--expectations", str(expectations)]
    return command + list(options.pytest_args)


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no plugin that a package of the pull request brings
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ written into the trusted tree (read-only stops no root)
    return env


def run_gate(options: GateOptions) -> int:
    check_args(options.pytest_args)
    if options.record_mode not in RECORD_MODES:
        raise GateError(f"--record-mode {options.record_mode}: one of {', '.join(RECORD_MODES)}")
    prepare_out(options.out)
    # only the gate's user enters it (mkdtemp: 0700): the trusted tree, the cassettes, the rows
    scratch = Path(tempfile.mkdtemp(prefix="personalens-gate-", dir=os.environ.get("RUNNER_TEMP") or None))
    tree = scratch / "base"
    try:
        return _run_in(options, scratch, tree)
    finally:
        with contextlib.suppress(OSError):
            if tree.exists():
                set_writable(tree, True)
            shutil.rmtree(scratch, ignore_errors=True)
        hand_back(options.out)


def _run_in(options: GateOptions, scratch: Path, tree: Path) -> int:
    export_tree(options.repo, options.base.sha, tree)
    settings = base_settings(tree, options.pytest_args)
    _say(options, f"everything that decides the verdict from {options.base.sha[:12]} ({options.base.how}); "
                  f"the bot {settings.assistant!r} from {options.repo}")
    _check_entry(settings, options.bot_env)
    trusted = trusted_paths(settings, tree, options.suites)
    out_name = _inside(options.out, options.repo)
    found = [c for c in changes(options.repo, options.base.changes_from) if not (out_name and c.path.startswith(out_name + "/"))]
    for line in workflow_lines(found):
        _say(options, line)
        options.summary.append(line)
    changed = lines(untrusted_changes(found, trusted, repo=options.repo, base_tree=tree))
    for line in changed:
        _say(options, line)
    work = scratch / "cassettes"
    if options.record_mode == "none" and settings.cassette_dir.is_dir():
        work = settings.cassette_dir  # offline: replayed from the read-only trusted tree itself
    elif settings.cassette_dir.is_dir():
        shutil.copytree(settings.cassette_dir, work, symlinks=True)  # recorded into: a copy
    else:
        work.mkdir()
    reach = [Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix)]
    sandbox = open_sandbox(pass_env=options.bot_env, wanted=options.isolation, reach=reach)
    try:
        bot_root = bot_checkout(sandbox, options.repo, leave_out=[options.out])
        _boundary(options, sandbox, scratch, tree, work, bot_root)
        command = pytest_command(options, settings, tree, work, scratch, sandbox.save(scratch / "sandbox.json"),
                                 bot_root=bot_root)
        set_writable(tree, False)
        before = None if sandbox.isolated else digest(tree)  # unreachable by the bot when isolated
        with StartedBot(options.start, cwd=bot_root, log=options.out / "bot.log", health_url=options.health_url,
                        timeout_s=options.start_timeout_s, sandbox=sandbox):
            status = subprocess.run(command, cwd=tree, env=_environment(), check=False).returncode
        # every process of the bot's identity has ended here (StartedBot's exit): nothing of it runs on
        if before is not None and digest(tree) != before:
            raise GateError("the base's files changed while the run read them (something wrote into the trusted "
                            "tree): this run's verdict does not count")
        verdict = gate_verdict(options.out / "report.json", status)
        _keep(options, settings, scratch, work, changed, status, verdict)
        say_undecided(verdict)
        hint = " - the gate starts working once the testkit's files (personalens init, a recording) are on the base"
        _say(options, f"verdict: {verdict.outcome}" + (hint if status == 5 and not verdict.decided else ""))
        return verdict.status
    finally:
        sandbox.end_all()
        sandbox.remove_files()


def _check_entry(settings: RunSettings, own: tuple[str, ...]) -> None:
    """The base's bot entry gives the bot (its ``env``) or sends it (``headers``) no model credential."""
    from ..llm.env_refs import expand_env

    entry = settings.assistants.entries.get(settings.assistant)
    for name in ("env", "headers"):
        values = getattr(entry, name, None)
        if isinstance(values, dict) and values:
            check_bot_values({key: expand_env(str(value)) for key, value in values.items()},
                             f"the base's [assistants.{settings.assistant}] {name}:", own=own)


def _boundary(options: GateOptions, sandbox: Sandbox, scratch: Path, tree: Path, work: Path, bot_root: Path) -> None:
    """Say how the bot runs; when isolated, check as the bot's identity that it can write nothing the verdict or
    a later step reads, nor signal the gate (a GateError naming what, before the bot starts)."""
    if not sandbox.isolated:
        line = (f"no isolation ({sandbox.why_not}): the bot runs as the gate's user and could change what decides "
                "the verdict; run the gate as root or with passwordless sudo (docs/pr-gate.md#isolation)")
        _say(options, line)
        options.summary.insert(0, line)
        return
    line = (f"the bot runs as user id {sandbox.uid}, apart from the gate, in its own copy of the checkout: its own "
            f"environment ({len(sandbox.pass_env)} variables named with --bot-env), nothing of the gate's writable, "
            "every process it starts ended with the run")
    _say(options, line)
    options.summary.insert(0, line)
    problems = probe(sandbox, protected=protected_paths(scratch, tree, work, options.out, options.out / MANIFEST),
                     readable=[str(bot_root)])
    if problems:
        raise GateError(f"the bot's identity is not kept apart: {'; '.join(problems[:5])}"
                        + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))


def _inside(path: Path, root: Path) -> str | None:
    with contextlib.suppress(ValueError):
        return path.resolve().relative_to(root.resolve()).as_posix()
    return None


def _keep(options: GateOptions, settings: RunSettings, scratch: Path, work: Path, changed: list[str],
          status: int, verdict: GateVerdict) -> None:
    """The rows, the recording (to promote on main: its cassettes and recorded results only, each listed with its
    digest in the manifest) in the gate's folder; the isolation, workflow and changed-file lines in the job
    summary, after the verdict."""
    kept: dict[str, str] = {}
    for source, name in ((scratch / "runs", "runs"), (work, "cassettes")):
        if name == "cassettes" and options.record_mode == "none":
            continue
        target = options.out / name
        try:
            if target.is_symlink() or target.is_file():
                target.unlink()
            shutil.rmtree(target, ignore_errors=True)
            if name == "runs" and source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            elif name == "cassettes":
                kept = keep_recording(source, target)
        except OSError as exc:
            raise GateError(f"--out {options.out}: keeping the run's {name} failed ({exc})") from None
    cassettes = _inside(settings.cassette_dir, settings.rootdir) or str(settings.cassette_dir)
    # the run's own verdict (gate/verdict.py): "finished" when it ran to a verdict (not one interrupted)
    manifest = {"finished": verdict.decided and verdict.outcome != "interrupted", "outcome": verdict.outcome, "pytest_status": status, "base": options.base.sha, "how": options.base.how, "assistant": settings.assistant,
                "cassette_dir": cassettes, "record_mode": options.record_mode, "said": options.said, "files": kept}
    (options.out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and (options.summary or changed):
        with contextlib.suppress(OSError), open(summary, "a", encoding="utf-8") as handle:
            if options.summary:
                handle.write("\n### How the gate ran\n\n")
                handle.writelines(f"- {line}\n" for line in options.summary)
            if changed:
                handle.write("\n### Files this pull request changes that the gate took from the base\n\n")
                handle.writelines(f"- `{line.replace('`', chr(39))}`\n" for line in changed)
