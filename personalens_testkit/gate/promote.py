"""``personalens promote GATE_DIR``: the explicit step, on main, that makes a gate run's recording the committed
one. A gate never writes the committed cassettes or recorded results; this copies the files its run recorded
(cassettes, the recorded results) into the repository's cassette folder, and refuses a file that changed on
the repository since the gate's base - a recording made against other files would replace them unseen."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from ..errors import GateError
from ..replay.store import assistant_folder
from .git import git
from .run import MANIFEST


def _blob(data: bytes) -> str:
    """git's id of a file's bytes (so a file compares with the base's without reading the base's bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 (git's own id, not security)


def _manifest(gate_dir: Path) -> dict:
    try:
        manifest = json.loads((gate_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GateError(f"{gate_dir}: not a gate run's folder ({MANIFEST}: {exc})") from None
    if not isinstance(manifest, dict) or not {"base", "assistant", "cassette_dir", "record_mode"} <= set(manifest):
        raise GateError(f"{gate_dir / MANIFEST}: not a gate run's manifest")
    return manifest


def promote(gate_dir: Path, repo: Path) -> list[str]:
    """Copy what the gate run recorded into the repository; the repository-relative paths written."""
    manifest = _manifest(gate_dir)
    if manifest["record_mode"] == "none":
        raise GateError(f"{gate_dir}: the gate ran offline (--record-mode none): it recorded nothing to promote")
    base = str(manifest["base"])
    try:
        git(repo, "merge-base", "--is-ancestor", base, "HEAD")
    except GateError:
        raise GateError(f"the gate's base {base[:12]} is not in this branch's history: promote on the branch the "
                        "pull request was merged into") from None
    folder = assistant_folder(str(manifest["assistant"]))
    source = gate_dir / "cassettes" / folder
    relative = f"{str(manifest['cassette_dir']).rstrip('/')}/{folder}"
    if relative.startswith("/") or ".." in relative.split("/"):
        raise GateError(f"{gate_dir / MANIFEST}: cassette_dir {manifest['cassette_dir']!r} is not inside the repository")
    at_base = _base_blobs(repo, base, relative)
    written = []
    for path in sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink()):
        name = f"{relative}/{path.relative_to(source).as_posix()}"
        target = repo / name
        new = path.read_bytes()
        now = target.read_bytes() if target.is_file() else None
        if now == new:
            continue
        if (_blob(now) if now is not None else None) != at_base.get(name):
            raise GateError(f"{name}: changed on this branch since the gate's base {base[:12]}: run the gate "
                            "again on the pull request, then promote that run")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        written.append(name)
    return written


def _base_blobs(repo: Path, base: str, folder: str) -> dict[str, str]:
    listing = git(repo, "ls-tree", "-r", "-z", base, "--", folder + "/")
    blobs = {}
    for entry in listing.split("\0"):
        if entry:
            meta, name = entry.split("\t", 1)
            blobs[name] = meta.split()[2]
    return blobs
