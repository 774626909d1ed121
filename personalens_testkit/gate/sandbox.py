"""The bot's identity under a gate: the trust boundary between the pull request's code and the verdict.

A gate that runs as root (or re-runs itself under passwordless ``sudo``, as on GitHub's hosted runners) starts
every process of the pull request's code - the ``--start`` server, a ``command`` bot, a ``python`` bot's host -
under a user id of its own, picked for this run and held by no account, file or process of the machine:

- its environment is built, not inherited: :data:`ALLOWED_ENV` (no credential among them), its own ``HOME`` and
  ``TMPDIR`` (a folder only it can write), and the variables named with ``--bot-env``, nothing else;
- it can write nothing the gate made or reads: the trusted tree, the cassettes the run replays and records,
  the rows, the reports, the job summary, the interpreter and its site-packages belong to another user and are
  not writable by others - and :func:`probe` checks exactly that, as the bot's identity, before the bot starts;
- it can neither signal nor trace the gate's processes, nor read their environment (another user's);
- every process it starts, however it detached (``setsid``, a double fork, a daemon), is ended when the run
  ends (:meth:`Sandbox.end_all`: ``kill(-1)`` as that user id, which the kernel applies to all of them at once,
  until none is left); and it can run at most :data:`MAX_PROCESSES` processes and threads at once.

Where the gate cannot change user (no root, no passwordless sudo, or ``--isolation off``) the bot runs as the
gate's user with the same built environment, and the gate says so in one line and in the job summary.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import random
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import GateError

#: the gate's variables the bot sees (with ``LC_*``); none of them holds a credential
ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "CI")
#: variables the models' backends read: never the bot's, even when named with --bot-env
MODEL_ENV_PREFIXES = ("OPENAI_", "AWS_", "PERSONALENS_")
#: processes and threads the bot's user id may run at once (RLIMIT_NPROC): a fork bomb stops there, before it
#: takes the runner's memory (512 forked interpreters fit in a few GiB)
MAX_PROCESSES = 512
#: the user ids a gate picks from (no distribution gives them to accounts), where the user namespace maps them
UID_RANGE = (1_600_000_000, 2_000_000_000)
#: how long :meth:`Sandbox.end_all` keeps killing before it says processes survived
END_TIMEOUT_S = 10.0
#: the folders where a bot's stray files are looked for (and removed) at the end
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")


@dataclass(frozen=True)
class Sandbox:
    """How the pull request's processes run. ``uid`` None: as the gate's user (``why_not`` says why)."""

    uid: int | None = None
    #: the bot's own folder: its HOME and TMPDIR
    home: str | None = None
    #: the gate's variables the bot also gets, by name (--bot-env)
    pass_env: tuple[str, ...] = ()
    why_not: str = ""

    @property
    def isolated(self) -> bool:
        return self.uid is not None

    # -- what the bot sees -------------------------------------------------------------------
    def environment(self, source: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The bot's whole environment: the allowlist and the named variables from ``source`` (the gate's), then
        ``extra`` (the base's bot entry's ``env``), then its own HOME and TMPDIR."""
        source = os.environ if source is None else source
        env = {name: value for name, value in source.items() if name in ALLOWED_ENV or name.startswith("LC_")}
        env.update({name: source[name] for name in self.pass_env if name in source})
        env.update(extra or {})
        if self.home:
            env.update(HOME=self.home, TMPDIR=self.home, TMP=self.home, TEMP=self.home)
        if self.uid is not None:
            env.update(USER=f"personalens-bot-{self.uid}", LOGNAME=f"personalens-bot-{self.uid}")
        return env

    def popen(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """A process of the bot: under its user id (with its process limit) when isolated."""
        if self.uid is None:
            return subprocess.Popen(list(argv), cwd=cwd, env=dict(env), **kwargs)  # noqa: S603 (the bot's command)
        limit = shutil.which("prlimit")
        prefix = [limit, f"--nproc={MAX_PROCESSES}", "--"] if limit else []
        return subprocess.Popen([*prefix, *argv], cwd=cwd, env=dict(env), user=self.uid, group=self.uid,  # noqa: S603
                                extra_groups=[], umask=0o077, **kwargs)

    # -- the end -----------------------------------------------------------------------------
    def processes(self) -> list[int]:
        """The live processes (not zombies) whose real, effective or saved user id is the bot's."""
        return [] if self.uid is None else processes_of(self.uid)

    def end_all(self, timeout_s: float = END_TIMEOUT_S) -> int:
        """End every process of the bot's user id, however it detached; how many rounds it took. A GateError
        when some still run after ``timeout_s`` (the run's verdict must not count then)."""
        if self.uid is None:
            return 0
        deadline, rounds = time.monotonic() + timeout_s, 0
        while self.processes():
            if time.monotonic() >= deadline:
                raise GateError(f"the bot's processes {self.processes()[:5]} still run {timeout_s:g} s after the "
                                "run ended: this run's verdict does not count")
            rounds += 1
            # kill(-1) as the bot's user id: every process it may signal, which is all of its own, at once (the
            # kernel holds off forks while it runs, so none is born between two kills)
            subprocess.run([sys.executable, "-I", "-S", "-c", _KILL_ALL], user=self.uid, group=self.uid,  # noqa: S603
                           extra_groups=[], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False, timeout=max(1.0, deadline - time.monotonic()),
                           cwd="/", env={})  # runs as the bot: never with the gate's environment
            time.sleep(min(0.02 * rounds, 0.2))
        return rounds

    def remove_files(self) -> None:
        """The bot's folder, and what its user id left at the top of the shared temporary folders."""
        if self.uid is None:
            return
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)
        for folder in SHARED_TEMP:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_uid != self.uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                except OSError:
                    continue

    # -- to the run's pytest processes (--bot-sandbox FILE) ----------------------------------
    def save(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self)), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Path) -> Sandbox:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(uid=data["uid"], home=data["home"], pass_env=tuple(data["pass_env"]), why_not=data["why_not"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise GateError(f"--bot-sandbox {path}: not a gate's sandbox file ({exc})") from None


_KILL_ALL = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"


def processes_of(uid: int) -> list[int]:
    """Live processes with ``uid`` as their real, effective, saved or file-system user id."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        state, uids = fields.get("State", "").split(), fields.get("Uid", "").split()
        if uids and str(uid) in uids and state[:1] != ["Z"]:
            found.append(int(status.parent.name))
    return found


# -- building the identity ------------------------------------------------------------------
def bot_env_names(names: Iterable[str], source: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``--bot-env`` names, checked: a variable the models read, or one holding the value of another secret
    variable of the gate (a model key under another name), is refused in one line."""
    from ..secrets import secret_values

    source = os.environ if source is None else source
    chosen = tuple(dict.fromkeys(names))
    for name in chosen:
        if not name or "=" in name or not name.replace("_", "").isalnum():
            raise GateError(f"--bot-env {name!r}: the name of one environment variable (its value is read from "
                            "the gate's environment)")
        if name.startswith(MODEL_ENV_PREFIXES):
            raise GateError(f"--bot-env {name}: the models' variables ({', '.join(p + '*' for p in MODEL_ENV_PREFIXES)}) "
                            "never reach the bot; give the bot its own secret under another name")
    others = {name: value for name, value in source.items() if name not in chosen}
    model_secrets = {value for value, _ in secret_values(others)}
    for name in chosen:
        value = source.get(name, "")
        if any(secret in value for secret in model_secrets):
            raise GateError(f"--bot-env {name}: holds the value of one of the gate's secret variables (a model's "
                            "credential under another name): the bot gets its own secret, never the judge's")
    return chosen


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


def can_elevate() -> bool:
    """Whether ``sudo`` runs without a password here (GitHub's hosted runners)."""
    sudo = shutil.which("sudo")
    if not sudo:
        return False
    try:
        return subprocess.run([sudo, "-n", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # noqa: S603
                              stderr=subprocess.DEVNULL, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


#: set in the environment of a gate re-run under sudo (so it re-runs once)
ELEVATED = "PERSONALENS_GATE_ELEVATED"


def elevated_command(argv: Sequence[str]) -> list[str]:
    """The gate's command line again, under ``sudo`` as root: the environment kept (``-E``), PATH too."""
    return ["sudo", "-n", "-E", "env", f"PATH={os.environ.get('PATH', '')}", f"{ELEVATED}=1", sys.executable,
            "-m", "personalens_testkit.cli", *argv]


def passage_for(paths: Iterable[Path]) -> list[str]:
    """Let other users pass through (``o+x``, never list) every folder above ``paths``, and read the folders
    themselves, so the bot's identity reaches its checkout and the interpreter it runs; the folders changed."""
    opened: list[str] = []
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
                if mode & want != want:
                    folder.chmod(stat.S_IMODE(mode) | want)
                    opened.append(str(folder))
            except OSError:
                continue
    return opened


def open_sandbox(*, scratch: Path, pass_env: Sequence[str], wanted: bool, reach: Iterable[Path]) -> Sandbox:
    """The identity for this run's bot: a fresh user id when the gate is root and ``wanted``; else the gate's
    user, with the reason."""
    if not wanted:
        return Sandbox(pass_env=tuple(pass_env), why_not="--isolation off")
    if os.geteuid() != 0:
        return Sandbox(pass_env=tuple(pass_env),
                       why_not="the gate is not root and sudo asks for a password (or is missing)")
    uid = pick_uid()
    if uid is None:
        return Sandbox(pass_env=tuple(pass_env), why_not="no unused user id in this user namespace's map")
    home = Path(tempfile.mkdtemp(prefix="personalens-bot-", dir=_shared_temp()))
    os.chown(home, uid, uid)
    passage_for([*reach, home.parent])
    return Sandbox(uid=uid, home=str(home), pass_env=tuple(pass_env))


def _shared_temp() -> str:
    """A world-writable, sticky folder the bot can reach (its home goes there; the gate's scratch does not)."""
    for folder in (tempfile.gettempdir(), "/tmp"):
        with_mode = os.stat(folder).st_mode
        if with_mode & stat.S_ISVTX and with_mode & stat.S_IWOTH:
            return folder
    return "/tmp"


# -- checking it ----------------------------------------------------------------------------
_PROBE = r'''
import json, os, stat, sys
spec = json.loads(sys.argv[1])
found = []
def writable(path):
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return False
    want = os.W_OK | (os.X_OK if stat.S_ISDIR(st.st_mode) else 0)
    return os.access(path, want)
for path in spec["protected"]:
    if not os.path.lexists(path):
        continue
    if writable(path):
        found.append(f"{path} is writable by the bot")
        continue
    parent = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            sticky = os.stat(parent).st_mode & stat.S_ISVTX
        except OSError:
            break
        if writable(parent) and not sticky:
            found.append(f"{parent} (above {path}) is writable by the bot: it could put another in its place")
            break
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
for path in spec["readable"]:
    if not os.access(path, os.R_OK | os.X_OK):
        found.append(f"{path} cannot be read by the bot (its checkout)")
pid = spec["gate_pid"]
try:
    os.kill(pid, 0)
    found.append(f"the bot can signal the gate's process {pid}")
except PermissionError:
    pass
except OSError:
    pass
try:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        handle.read(1)
    found.append(f"the bot can read the gate's environment (/proc/{pid}/environ)")
except OSError:
    pass
print(json.dumps(found))
'''


def protected_paths(*paths: Path | str | None) -> list[str]:
    """What the bot must not write: ``paths`` and the interpreter's own folders (stdlib, site-packages, scripts,
    the installed testkit), the job summary."""
    from .. import __file__ as testkit

    found = [str(p) for p in paths if p]
    schemes = sysconfig.get_paths()
    found += [schemes[key] for key in ("stdlib", "platstdlib", "purelib", "platlib", "scripts") if key in schemes]
    found += [sys.prefix, sys.base_prefix, str(Path(testkit).parent)]
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        found.append(summary)
    return list(dict.fromkeys(found))


def probe(sandbox: Sandbox, *, protected: Sequence[str], readable: Sequence[str]) -> list[str]:
    """As the bot's identity: what of ``protected`` it could write, what of ``readable`` it cannot read, and
    whether it can signal the gate or read its environment. An empty list: the boundary holds."""
    if sandbox.uid is None:
        return []
    spec = json.dumps({"protected": list(protected), "readable": list(readable), "gate_pid": os.getpid()})
    try:
        done = sandbox.popen([sys.executable, "-I", "-S", "-c", _PROBE, spec], cwd=Path("/"),
                             env=sandbox.environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        out, err = done.communicate(timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"the bot's identity could not run the interpreter {sys.executable} ({exc})"]
    try:
        found = json.loads(out)
    except ValueError:
        said = err.decode("utf-8", "replace").strip().splitlines()
        return [f"the bot's identity could not run the interpreter {sys.executable} "
                f"({said[-1] if said else f'exit {done.returncode}'})"]
    return [str(line) for line in found]

