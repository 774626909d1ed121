"""``personalens promote GATE_DIR``: the explicit step, on main, that makes a gate run's recording the committed
one. A gate never writes the committed cassettes or recorded results; this copies the files its run recorded
(cassettes, the recorded results) into the repository's cassette folder, and refuses a file that changed on
the repository since the gate's base - a recording made against other files would replace them unseen - and
any file that is not exactly as the gate's manifest lists it (its SHA-256, written by the gate process)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from ..errors import GateError, PersonalensError
from ..files import BoundedReadError, read_xz
from ..replay.store import MAX_CASSETTE_BYTES, assistant_folder
from ..results.recorded import RESULTS_NAME
from ..settings import resolve_settings
from .git import git
from .recording import recording_file
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
    configured = _cassette_dir(repo)
    if str(manifest["cassette_dir"]).rstrip("/") != configured:
        raise GateError(f"{gate_dir / MANIFEST}: cassette_dir {manifest['cassette_dir']!r} is not this repository's "
                        f"cassette folder ({configured!r}): a gate folder is untrusted input; run the gate again")
    folder = assistant_folder(str(manifest["assistant"]))
    source = gate_dir / "cassettes" / folder
    relative = f"{str(manifest['cassette_dir']).rstrip('/')}/{folder}"
    if relative.startswith("/") or ".." in relative.split("/"):
        raise GateError(f"{gate_dir / MANIFEST}: cassette_dir {manifest['cassette_dir']!r} is not inside the repository")
    at_base = _base_blobs(repo, base, relative)
    listed = _listed(gate_dir, manifest, folder)
    chosen = []  # every file checked before any is written: all of them, or none
    for path in sorted(source.rglob("*")):
        name = f"{relative}/{path.relative_to(source).as_posix()}"
        if path.is_dir() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file() or path.parent != source:
            raise GateError(f"{name}: not a cassette or the recorded results: a gate folder holds only those")
        if not recording_file(path.name):
            raise GateError(f"{name}: not a cassette or the recorded results: a gate folder holds only those")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != listed.pop(path.name, None):  # before anything decodes it
            raise GateError(f"{name}: not as the gate recorded it (its digest is not the one {MANIFEST} lists for "
                            "it, or it lists none): nothing promoted; run the gate again")
        _check_recorded(path, name)
        target = repo / name
        now = target.read_bytes() if target.is_file() else None
        if now == data:
            continue
        if (_blob(now) if now is not None else None) != at_base.get(name):
            raise GateError(f"{name}: changed on this branch since the gate's base {base[:12]}: run the gate "
                            "again on the pull request, then promote that run")
        chosen.append((path, target, name))
    if listed:
        raise GateError(f"{relative}/{sorted(listed)[0]}: listed in {MANIFEST} but missing from {gate_dir}: nothing "
                        "promoted (download the whole gate folder)")
    for path, target, _ in chosen:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return [name for *_, name in chosen]


def _listed(gate_dir: Path, manifest: dict, folder: str) -> dict[str, str]:
    """The recorded files of the bot's folder the gate's manifest lists, by name, with their SHA-256."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise GateError(f"{gate_dir / MANIFEST}: lists no recorded files with their digests (a gate of an older "
                        "testkit, or not a gate's): run the gate again")
    prefix = folder + "/"
    return {name[len(prefix):]: digest for name, digest in files.items()
            if name.startswith(prefix) and "/" not in name[len(prefix):]}


def _base_blobs(repo: Path, base: str, folder: str) -> dict[str, str]:
    listing = git(repo, "ls-tree", "-r", "-z", base, "--", folder + "/")
    blobs = {}
    for entry in listing.split("\0"):
        if entry:
            meta, name = entry.split("\t", 1)
            blobs[name] = meta.split()[2]
    return blobs


def _cassette_dir(repo: Path) -> str:
    """The repository's cassette folder as its config names it (relative to the repository)."""
    try:
        settings = resolve_settings({}, repo, os.environ)
    except PersonalensError as exc:
        raise GateError(f"the repository's settings: {exc}") from None
    with contextlib.suppress(ValueError):
        return settings.cassette_dir.resolve().relative_to(repo.resolve()).as_posix()
    raise GateError(f"the cassette folder {settings.cassette_dir} is outside the repository: nothing to promote into")


def _check_recorded(path: Path, name: str) -> None:
    """A recording's file reads back: a cassette (``*.json.xz``), or the recorded results line by line."""
    try:
        data = read_xz(path, MAX_CASSETTE_BYTES)
        for line in (bytes(data).splitlines() if path.name == RESULTS_NAME else [bytes(data)]):
            if line.strip():
                json.loads(line)
    except (BoundedReadError, OSError, ValueError) as exc:
        raise GateError(f"{name}: does not read back ({exc}): nothing promoted") from None
