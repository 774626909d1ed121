"""The repository as git sees it: its root, the trusted base commit, a copy of a commit's tree, what changed."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import GateError

#: the most one git command may take (a whole-tree archive of a large repository included)
GIT_TIMEOUT_S = 300.0


def git(repo: Path, *args: str, stdout: int | None = subprocess.PIPE) -> str:
    """Run git in ``repo``; its output, or a GateError with git's own last line."""
    try:
        done = subprocess.run(["git", *args], cwd=repo, stdout=stdout, stderr=subprocess.PIPE,
                              timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise GateError("git is not installed: the gate reads the trusted commit with it") from None
    except subprocess.TimeoutExpired:
        raise GateError(f"git {args[0]} took more than {GIT_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GateError(f"git {' '.join(args)}: {said[-1] if said else f'exit {done.returncode}'}")
    return done.stdout.decode("utf-8", "surrogateescape") if done.stdout is not None else ""


def repository(path: Path) -> Path:
    """The root of the git checkout holding ``path``."""
    try:
        return Path(git(path, "rev-parse", "--show-toplevel").strip())
    except GateError:
        raise GateError(f"{path}: not inside a git checkout (the gate compares the pull request with its base "
                        "commit)") from None


@dataclass(frozen=True)
class Base:
    sha: str
    #: how it was found, for the header: "--base v1.2" or "merge base of HEAD and origin/main"
    how: str


def _is_commit(repo: Path, ref: str) -> bool:
    try:
        git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return True
    except GateError:
        return False


def resolve_base(repo: Path, base: str | None, target: str | None) -> Base:
    """The trusted commit: ``--base REF``, else the merge base of HEAD with the target branch (``--target``,
    else $GITHUB_BASE_REF, else main), looked up as origin/BRANCH first."""
    if base:
        if base.startswith("-") or not _is_commit(repo, base):
            raise GateError(f"--base {base}: not a commit of this repository (fetch it first; a shallow checkout "
                            "needs fetch-depth: 0)")
        return Base(git(repo, "rev-parse", f"{base}^{{commit}}").strip(), f"--base {base}")
    branch = target or os.environ.get("GITHUB_BASE_REF") or "main"
    for ref in (f"origin/{branch}", branch):
        if not branch.startswith("-") and _is_commit(repo, ref):
            try:
                sha = git(repo, "merge-base", "HEAD", ref).strip()
            except GateError:
                raise GateError(f"--target {branch}: HEAD and {ref} share no commit here (a shallow checkout? "
                                "actions/checkout needs fetch-depth: 0)") from None
            return Base(sha, f"merge base of HEAD and {ref}")
    raise GateError(f"--target {branch}: neither origin/{branch} nor {branch} is known here (fetch it: "
                    "actions/checkout with fetch-depth: 0, or git fetch origin; or name the commit with --base)")


def export_tree(repo: Path, sha: str, dest: Path) -> None:
    """The commit's files (as committed: not the working tree) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(["git", "archive", "--format=tar", sha], cwd=repo, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-f", "-", "-C", str(dest)], stdin=archive.stdout, capture_output=True,
                           timeout=GIT_TIMEOUT_S, check=False)
    assert archive.stdout is not None
    archive.stdout.close()
    archived = archive.wait(timeout=GIT_TIMEOUT_S)
    if archived != 0 or untar.returncode != 0:
        said = (archive.stderr.read() if archive.stderr else b"") + untar.stderr
        raise GateError(f"copying commit {sha[:12]}'s files failed: {said.decode('utf-8', 'replace').strip()[-300:]}")


@dataclass(frozen=True)
class Change:
    #: "adds", "changes" or "deletes"
    verb: str
    path: str


_VERBS = {"A": "adds", "M": "changes", "D": "deletes", "T": "changes"}


def changes(repo: Path, sha: str) -> list[Change]:
    """What the checkout (committed or not, untracked files included) changes against the commit, by path."""
    fields = git(repo, "diff", "--name-status", "--no-renames", "-z", sha, "--").split("\0")
    found = {path: _VERBS.get(status[:1], "changes") for status, path in zip(fields[0::2], fields[1::2]) if path}
    for path in git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0"):
        if path:
            found.setdefault(path, "adds")
    return [Change(verb, path) for path, verb in sorted(found.items())]
