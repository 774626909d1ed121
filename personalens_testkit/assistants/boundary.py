"""The trust boundary, checked from the bot's side: before a gate starts the bot, one interpreter runs as the
bot's user id (:class:`~.sandbox.Sandbox`) and says what of the gate's it could write (a protected file or
folder, or a folder above one, where it could put another in its place), what of its checkout it cannot
read, and whether it can signal the gate or read its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Sequence

from .sandbox import Sandbox

#: GitHub's workflow-command files: what the bot wrote there, a later step would read or run
GITHUB_FILES = ("GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE")

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
    """What the bot must not write: ``paths``; the interpreter's own folders (stdlib, site-packages, scripts, the
    installed testkit) and the files there that run at every start (``*.pth``, ``sitecustomize``); the files of
    GitHub's workflow commands later steps read (the job summary, ``GITHUB_ENV``, ``GITHUB_OUTPUT``, ...)."""
    from .. import __file__ as testkit

    found = [str(p) for p in paths if p]
    schemes = sysconfig.get_paths()
    folders = [schemes[key] for key in ("stdlib", "platstdlib", "purelib", "platlib", "scripts") if key in schemes]
    found += [*folders, sys.prefix, sys.base_prefix, str(Path(testkit).parent)]
    for folder in {schemes.get("purelib"), schemes.get("platlib"), schemes.get("stdlib")} - {None}:
        try:
            found += sorted(str(entry) for entry in Path(str(folder)).iterdir()
                            if entry.suffix == ".pth" or entry.stem in ("sitecustomize", "usercustomize"))
        except OSError:
            continue
    found += [os.environ[name] for name in GITHUB_FILES if os.environ.get(name)]
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

