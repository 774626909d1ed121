"""A gate's recording: the cassettes and the recorded results its run wrote, kept in the gate's folder with
each file's SHA-256 (listed in the manifest the gate process writes, ``gate.json``), and what
``personalens promote`` accepts as one of them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..results.recorded import RESULTS_NAME


def keep_recording(source: Path, target: Path) -> dict[str, str]:
    """The recording's files (cassettes and recorded results, nothing else of the base's folder) copied into
    ``target``; each one's SHA-256 by its path under ``target`` (posix)."""
    kept = {}
    for path in sorted(source.rglob("*")):
        if path.is_symlink() or not path.is_file() or not recording_file(path.name):
            continue
        relative = path.relative_to(source).as_posix()
        data = path.read_bytes()
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)
        kept[relative] = hashlib.sha256(data).hexdigest()
    return kept


def recording_file(name: str) -> bool:
    """A file a recording is made of: a cassette or the recorded results."""
    return name.endswith(".json.xz") or name == RESULTS_NAME
