"""The bot's identity under ``personalens gate``: the trust boundary between a pull request's code and the
verdict.

A gate that runs as root (or runs itself again under passwordless ``sudo``: ``gate/elevation.py``) starts every
process of the pull request's code - the ``--start`` server, a ``command`` bot, a ``python`` bot's host - under
a user id of its own, picked for this run and held by no account, file or process of the machine:

- its environment is built, not inherited: :data:`ALLOWED_ENV` (no credential among them), its own ``HOME`` and
  ``TMPDIR`` (a folder only it can write), and the variables named with ``--bot-env``, nothing else;
- it can write nothing the gate made or reads: the trusted tree, the cassettes the run replays and records,
  the rows, the reports, the job summary, the interpreter and its site-packages belong to another user and are
  not writable by others - and :mod:`.boundary` checks exactly that, as the bot's identity, before it starts;
- it can neither signal nor trace the gate's processes, nor read their environment (another user's);
- every process it starts, however it detached (``setsid``, a double fork, a daemon), is ended when the run
  ends (:meth:`Sandbox.end_all`: ``kill(-1)`` as that user id, which the kernel applies to all of them at once,
  until none is left); and it can run at most :data:`MAX_PROCESSES` processes and threads at once.

Where the gate cannot change user (no root, no passwordless sudo, or ``--isolation off``) the bot runs as the
gate's user with the same built environment, and the gate says so in one line and in the job summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import GateError
from ..secrets import register_secret_names

#: the gate's variables the bot sees (with ``LC_*``); none of them holds a credential
ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "CI")
#: variables the models' backends read: never the bot's, even when named with --bot-env
MODEL_ENV_PREFIXES = ("OPENAI_", "AWS_", "PERSONALENS_")
#: processes and threads the bot's user id may run at once (RLIMIT_NPROC): a fork bomb stops there, before it
#: takes the runner's memory (512 forked interpreters fit in a few GiB)
MAX_PROCESSES = 512
#: how long :meth:`Sandbox.end_all` keeps killing before it says processes survived
END_TIMEOUT_S = 10.0
#: the folders where a bot's stray files are looked for (and removed) at the end
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/crash")


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
        ``extra`` (the base's bot entry's ``env``), then its own HOME and TMPDIR. The named variables become
        secrets of this process (redacted in every file and line it writes)."""
        source = os.environ if source is None else source
        register_secret_names(self.pass_env)  # the bot's own secrets: redacted wherever its words are written
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
            with contextlib.suppress(OSError, subprocess.SubprocessError):  # a busy machine: try again, to the deadline
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
            _remove(self.home)
        for folder in SHARED_TEMP:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_uid == self.uid:
                        _remove(entry.path)
                except OSError:
                    continue
        _remove_ipc(self.uid)

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


def _remove(path: str) -> None:
    """A file or a whole tree, however deep (``rm``: no recursion limit), never across a mount, never a link's
    target."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", path], stdin=subprocess.DEVNULL,  # noqa: S603, S607
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)


def _remove_ipc(uid: int) -> None:
    """System V shared memory, semaphores and message queues the bot's user id created (they outlive processes)."""
    for kind, flag in (("shm", "-m"), ("sem", "-s"), ("msg", "-q")):
        try:
            rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = rows[0].split() if rows else []  # key shmid|semid|msqid ... uid ...
        if len(header) < 2 or not header[1].endswith("id") or "uid" not in header:
            continue
        for row in rows[1:]:
            fields = row.split()
            if len(fields) == len(header) and fields[header.index("uid")] == str(uid):
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(["ipcrm", flag, fields[1]], stdin=subprocess.DEVNULL,  # noqa: S603, S607
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)


_KILL_ALL = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"


def processes_of(uid: int) -> list[int]:
    """Live processes with ``uid`` as their real, effective, saved or file-system user id."""
    found = []
    # a process may end between the listing and the read (pathlib's glob stats each entry and raised then): every
    # read of one that ended is skipped
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        status = Path("/proc", pid, "status")
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        state, uids = fields.get("State", "").split(), fields.get("Uid", "").split()
        if uids and str(uid) in uids and state[:1] != ["Z"]:
            found.append(int(status.parent.name))
    return found
