"""Making the bot's identity for a gate run (:class:`~.sandbox.Sandbox`): a user id no account, file or process
holds, the bot's own folder, its copy of the checkout, passage to the interpreter it runs (a closed home folder
is opened only for that), and the variables it may get: ``--bot-env`` names and the base's bot entry's values,
none holding a model's credential."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import random
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import GateError
from ..files import chown_tree
from .sandbox import MODEL_ENV_PREFIXES, Sandbox, processes_of

#: the user ids a gate picks from (no distribution gives them to accounts), where the user namespace maps them
UID_RANGE = (1_600_000_000, 2_000_000_000)


def bot_env_names(names: Iterable[str], source: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``--bot-env`` names, checked: a variable the models read, or one holding the value of another secret
    variable of the gate (a model key under another name), is refused in one line."""
    source = os.environ if source is None else source
    chosen = tuple(dict.fromkeys(names))
    for name in chosen:
        if not name or "=" in name or not name.replace("_", "").isalnum():
            raise GateError(f"--bot-env {name!r}: the name of one environment variable (its value is read from "
                            "the gate's environment)")
        if name.startswith(MODEL_ENV_PREFIXES):
            raise GateError(f"--bot-env {name}: the models' variables ({', '.join(p + '*' for p in MODEL_ENV_PREFIXES)}) "
                            "never reach the bot; give the bot its own secret under another name")
    check_bot_values({name: source.get(name, "") for name in chosen}, "--bot-env", source, own=chosen)
    return chosen


def check_bot_values(values: Mapping[str, str], where: str, source: Mapping[str, str] | None = None, *,
                     own: Iterable[str] = ()) -> None:
    """Values the bot will get (``--bot-env``, the base's bot entry's ``env`` and ``headers``): a GateError in one
    line when one holds the value of a secret variable of the gate other than the bot's own (``own``: a model's
    credential, whatever the name it travels under)."""
    from ..secrets import secret_values

    source = os.environ if source is None else source
    others = {name: value for name, value in source.items() if name not in set(own)}
    model_secrets = {value for value, _ in secret_values(others)}
    for name, value in values.items():
        if any(secret in value for secret in model_secrets):
            raise GateError(f"{where} {name}: holds the value of one of the gate's secret variables (a model's "
                            "credential): the bot gets only its own secrets, each named with --bot-env")


def _mapped_range() -> tuple[int, int] | None:
    """The largest part of UID_RANGE the user namespace maps (all of it outside a container)."""
    low, high = UID_RANGE
    try:
        lines = Path("/proc/self/uid_map").read_text().split("\n")
    except OSError:
        return low, high
    best = None
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            start, count = int(parts[0]), int(parts[2])
            lo, hi = max(low, start), min(high, start + count - 1)
            if lo < hi and (best is None or hi - lo > best[1] - best[0]):
                best = (lo, hi)
    if best is None:  # a small map (a rootless container): the top of what it maps, past ordinary accounts
        for line in lines:
            parts = line.split()
            if len(parts) == 3 and int(parts[0]) + int(parts[2]) - 1 > 70_000:
                start, count = int(parts[0]), int(parts[2])
                best = (max(start, 60_000), start + count - 2)
    return best


def _unused(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return False
        except KeyError:
            pass
    return not processes_of(uid)


def pick_uid(chooser: random.Random | None = None) -> int | None:
    """A user id no account, group or process holds, from the mapped part of UID_RANGE."""
    span = _mapped_range()
    if span is None:
        return None
    chooser = chooser or random.SystemRandom()
    for _ in range(64):
        uid = chooser.randint(*span)
        if _unused(uid):
            return uid
    return None


def _homes() -> set[str]:
    """The home folders of the machine's people (and root's): kept closed to the bot."""
    return {entry.pw_dir for entry in pwd.getpwall() if entry.pw_uid == 0 or entry.pw_uid >= 1000} - {"/"}


def passage_for(paths: Iterable[Path], *, into_homes: bool) -> list[str]:
    """Let other users pass through (``o+x``, never list) every folder above ``paths``, and read the folders
    themselves; the folders changed. A closed home folder stays closed unless ``into_homes`` (the interpreter the
    bot must run lives there): its files that others may read would be the bot's to read."""
    opened: list[str] = []
    homes = set() if into_homes else _homes()
    for path in paths:
        try:
            resolved = Path(path).resolve()
        except OSError:
            continue
        chain = [*reversed(resolved.parents), resolved] if resolved.is_dir() else list(reversed(resolved.parents))
        for folder in chain:
            want = stat.S_IXOTH | (stat.S_IROTH if folder == resolved else 0)
            try:
                mode = folder.stat().st_mode
                if mode & want == want:
                    continue
                if str(folder) in homes:
                    break
                folder.chmod(stat.S_IMODE(mode) | want)
                opened.append(str(folder))
            except OSError:
                continue
    return opened


def _plain(folder: str, names: list[str]) -> list[str]:
    """What a copy of a checkout leaves out: anything but files, folders and links (a socket, a pipe)."""
    left = []
    for name in names:
        with contextlib.suppress(OSError):
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                left.append(name)
    return left


def bot_checkout(sandbox: Sandbox, repo: Path, *, leave_out: Iterable[Path] = ()) -> Path:
    """Where the bot runs: when isolated, a copy of the checkout in the bot's folder, its own to read and write
    (``.git`` and ``leave_out`` left out), and passage to the checkout itself where no home folder must be opened
    for it (a path the bot names absolutely still works); else the checkout itself."""
    if sandbox.uid is None or sandbox.home is None:
        return repo
    skip = {Path(repo, ".git").resolve(), *(Path(p).resolve() for p in leave_out)}
    copy = Path(sandbox.home) / "checkout"
    try:
        shutil.copytree(repo, copy, symlinks=True, ignore=lambda folder, names: [
            *_plain(folder, names), *(n for n in names if Path(folder, n).resolve() in skip)])
        chown_tree(copy, sandbox.uid, sandbox.uid)
    except (OSError, shutil.Error) as exc:
        raise GateError(f"copying the checkout {repo} for the bot into {copy} failed ({str(exc)[:300]})") from None
    passage_for([repo], into_homes=False)
    return copy


def open_sandbox(*, pass_env: Sequence[str], wanted: bool, reach: Iterable[Path]) -> Sandbox:
    """The identity for this run's bot: a fresh user id when the gate is root and ``wanted``; else the gate's
    user, with the reason. ``reach``: what the bot runs (the interpreter), made reachable."""
    if not wanted:
        return Sandbox(pass_env=tuple(pass_env), why_not="--isolation off")
    if os.geteuid() != 0:
        return Sandbox(pass_env=tuple(pass_env),
                       why_not="the gate is not root and sudo asks for a password (or is missing)")
    uid = pick_uid()
    if uid is None:
        return Sandbox(pass_env=tuple(pass_env), why_not="no unused user id in this user namespace's map")
    try:
        home = Path(tempfile.mkdtemp(prefix="personalens-bot-", dir=_shared_temp()))
        os.chown(home, uid, uid)
    except OSError as exc:
        raise GateError(f"the bot's folder could not be made in {_shared_temp()} ({exc})") from None
    passage_for([*reach, home.parent], into_homes=True)
    return Sandbox(uid=uid, home=str(home), pass_env=tuple(pass_env))


def _shared_temp() -> str:
    """A world-writable, sticky folder the bot can reach (its home goes there; the gate's scratch does not)."""
    for folder in (tempfile.gettempdir(), "/tmp"):
        with_mode = os.stat(folder).st_mode
        if with_mode & stat.S_ISVTX and with_mode & stat.S_IWOTH:
            return folder
    return "/tmp"
