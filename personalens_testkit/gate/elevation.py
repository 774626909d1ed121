"""A gate that is not root runs itself again under passwordless ``sudo`` (GitHub's hosted runners), once, so
that it can give the bot a user id of its own (:mod:`personalens_testkit.assistants.sandbox`); the folder it
wrote goes back to the user who ran it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ..files import chown_tree


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


def hand_back(out: Path) -> None:
    """A gate re-run under sudo gives its folder back to the user who ran it (a later step may remove it)."""
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if not (os.environ.get(ELEVATED) and uid and gid and uid.isdigit() and gid.isdigit() and out.is_dir()):
        return
    with contextlib.suppress(OSError):
        chown_tree(out, int(uid), int(gid))
