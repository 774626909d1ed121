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
    #: the trusted commit: ``--base``, else the target branch's tip
    sha: str
    #: how it was found, for the header: "--base v1.2" or "merge base of HEAD and origin/main"
    how: str
    #: what the checkout's changes are counted against (the merge base; ``sha`` when given with --base)
    fork_point: str = ""

    @property
    def changes_from(self) -> str:
        return self.fork_point or self.sha


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
    # fully qualified: a tag named "origin/main" must not stand in for the branch
    for ref, shown in ((f"refs/remotes/origin/{branch}", f"origin/{branch}"), (f"refs/heads/{branch}", branch)):
        if not branch.startswith("-") and _is_commit(repo, ref):
            try:
                merge_base = git(repo, "merge-base", "HEAD", ref).strip()
            except GateError:
                raise GateError(f"--target {branch}: HEAD and {shown} share no commit here (a shallow checkout? "
                                "actions/checkout needs fetch-depth: 0)") from None
            tip = git(repo, "rev-parse", f"{ref}^{{commit}}").strip()
            if tip == merge_base:
                return Base(tip, f"merge base of HEAD and {shown}", merge_base)
            # a branch behind its target gets the target's rules of today, not those of the day it branched
            return Base(tip, f"the tip of {shown}; this checkout branched from it at {merge_base[:12]}", merge_base)
    raise GateError(f"--target {branch}: neither origin/{branch} nor {branch} is known here (fetch it: "
                    "actions/checkout with fetch-depth: 0, or git fetch origin; or name the commit with --base)")


def export_tree(repo: Path, sha: str, dest: Path) -> None:
    """The commit's files into ``dest`` byte for byte as committed: blobs read raw (``git cat-file``), so no
    ``.gitattributes`` (export-ignore, export-subst, eol, filters) changes what the gate reads; submodules left out."""
    entries = []
    for record in git(repo, "ls-tree", "-r", "-z", "--full-tree", sha).split("\0"):
        if record:
            meta, path = record.split("\t", 1)
            mode, kind, blob = meta.split()
            if kind == "blob" and ".." not in path.split("/") and not path.startswith("/"):
                entries.append((mode, blob, path))
    dest.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as batch:
        assert batch.stdin is not None and batch.stdout is not None
        for mode, blob, path in entries:
            batch.stdin.write(blob.encode() + b"\n")
            batch.stdin.flush()
            size = int(batch.stdout.readline().split()[2])
            data = batch.stdout.read(size)
            batch.stdout.read(1)
            _place(dest / path, mode, data)
        batch.stdin.close()


def _place(target: Path, mode: str, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode == "120000":
        target.symlink_to(data.decode("utf-8", "surrogateescape"))
        return
    target.write_bytes(data)
    if mode == "100755":
        target.chmod(0o755)


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
