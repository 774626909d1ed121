"""Where cassettes live and how they are stored: lzma-compressed JSON, written atomically.

One file per assistant and scenario: ``<cassette dir>/<assistant>/<scenario id>.json.xz``; the file names its
scenario inside too (``metadata.scenario``; a re-judging's, its judge), so a cassette under another's name is an
error naming it.
Scenario ids are already safe file names; an assistant name that is not (say ``team/bot``)
is made safe and given a short hash of the original, so two names never share a folder.

The serializer keeps bodies that are not UTF-8 as base64 (``{"base64": ...}``), so any
bytes round-trip. xz sees the whole file: a dialogue's growing prompts repeat each other,
which lzma compresses about ten times better than gzip's 32 KiB window.

A cassette is read a chunk at a time and decompressed no further than ``MAX_CASSETTE_BYTES``, and parsed
only if it holds at most ``MAX_CASSETTE_VALUES`` JSON values (:mod:`~personalens_testkit.untrusted_json`);
one that cannot be replayed - not xz, truncated, empty, not UTF-8 JSON, not a cassette of ours,
too large - is a :class:`~personalens_testkit.errors.CassetteError` naming the file and what is
wrong with it (a missing file is no error: the scenario has no cassette).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import lzma
import os
import re
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from ..errors import CassetteError, dotted
from ..files import BoundedReadError, read_xz, write_bytes_atomically
from ..untrusted_json import UntrustedJsonError, check_values
from .cassette import FORMAT_VERSION, Request, interactions, read_answer

SUFFIX = ".json.xz"
#: The most a cassette may decompress to. The largest recorded here is 0.85 MB (a 30-turn multi-domain
#: dialogue, 13 KB of xz); a 30-turn dialogue whose every reply takes the default max_reply_chars (20,000)
#: makes about 40 MB: the cap is six times that, and bounds what a cassette (an xz bomb: a few KB that
#: decompress to gigabytes) can take in memory.
MAX_CASSETTE_BYTES = 256 << 20
#: The most JSON values (keys included) a cassette may hold: memory follows values, not bytes (``{}`` is 2 bytes
#: of text and 64 of memory; a million tiny interactions under the byte cap took 1.7 GB). The recorded ones hold
#: one value in 56 bytes (25,000 in the largest); at that rate the 40 MB worst case above holds 700,000.
MAX_CASSETTE_VALUES = 2_000_000
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$")


def assistant_folder(name: str) -> str:
    """A stable, collision-free folder name for an assistant name."""
    if _SAFE.match(name):
        return name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60] or "assistant"
    return f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def assistant_dir(cassette_dir: Path, assistant: str) -> Path:
    """The folder of one assistant's cassettes."""
    return cassette_dir / assistant_folder(assistant)


def cassette_path(cassette_dir: Path, assistant: str, scenario_id: str, *, judge: str | None = None) -> Path:
    """The scenario's cassette; with ``judge``, the cassette of a re-judging by that judge model."""
    folder = assistant_dir(cassette_dir, assistant)
    if judge is not None:
        folder = folder / "rejudged" / assistant_folder(judge)
    return folder / f"{scenario_id}{SUFFIX}"


def recorded_cases(folder: Path) -> frozenset[str]:
    """The case ids with a cassette in ``folder``, from one listing of it (not a file check per case: a run
    plans 4,096 cases or 122,133). A cassette's name on something that is not a file (a folder, a broken link)
    is a :class:`CassetteError` naming it: never a case silently without its cassette."""
    try:
        with os.scandir(folder) as entries:
            named = [entry for entry in entries if entry.name.endswith(SUFFIX)]
    except OSError:  # no folder yet (nothing recorded), or one that cannot be read: nothing to replay from it
        return frozenset()
    for entry in named:
        if not entry.is_file():
            what = "a folder" if entry.is_dir() else "a link to nothing" if entry.is_symlink() else "not a file"
            raise CassetteError(Path(entry.path), f"is {what}: a cassette is a file (record it again with "
                                                  "--record-mode all, or remove it)")
    return frozenset(entry.name[: -len(SUFFIX)] for entry in named)


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"cannot store {type(value).__name__} in a cassette")


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and "base64" in obj and isinstance(obj["base64"], str):
        return base64.b64decode(obj["base64"])
    return obj


def _read_fast(data: bytes) -> Any:
    """:meth:`JsonBytesSerializer.deserialize` of ``data`` decoded, read by pydantic-core's parser (twice as fast as
    json's, and as strict) and its ``{"base64": ...}`` objects then made bytes, innermost first, as the hook makes
    them; ``_MISSING`` for what that parser cannot read (not UTF-8, not JSON, a lone surrogate escape, nested too
    deeply, a body's base64 invalid), which goes the slower way and is told apart there. One difference: an object
    that a later duplicate key replaces is never read here, where the hook decoded it, and failed on invalid base64
    in it, before it was dropped; the value read is the same."""
    try:
        value = from_json(data)
        return _bytes_within(value) if type(value) is dict or type(value) is list else value
    except (ValueError, RecursionError):  # binascii.Error (a body's base64 invalid) is a ValueError
        return _MISSING


def _bytes_within(value: Any) -> Any:
    if type(value) is dict:
        for key, inner in value.items():
            if type(inner) is dict or type(inner) is list:
                value[key] = _bytes_within(inner)
        return _hook(value)
    for index, inner in enumerate(value):
        if type(inner) is dict or type(inner) is list:
            value[index] = _bytes_within(inner)
    return value


class JsonBytesSerializer:
    """A cassette as JSON text that can hold bytes (vcrpy's serializer protocol)."""

    @staticmethod
    def serialize(cassette_dict: dict[str, Any]) -> str:
        return json.dumps(cassette_dict, default=_default, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def deserialize(text: str) -> dict[str, Any]:
        return json.loads(text, object_hook=_hook)


class XzPersister:
    """xz-compressed cassette files, written to a temporary file and renamed into place (vcrpy's persister
    protocol: vcrpy's ``use_cassette`` reads and writes ours with it).

    A reader (or a crash) never sees half a cassette, and concurrent xdist workers never
    race on creating the folder.
    """

    @staticmethod
    def load_cassette(cassette_path: str | os.PathLike[str], serializer: Any) -> Any:
        """A cassette's (requests, responses[, metadata]), as vcrpy's persisters give them (each request a
        :class:`~.cassette.Request`); FileNotFoundError when there is no file, a CassetteError naming the file and
        what is wrong with it when it cannot be replayed."""
        path = Path(cassette_path)
        try:
            data = read_xz(path, MAX_CASSETTE_BYTES)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise CassetteError(path, f"cannot be read ({exc.strerror or exc})") from None
        except BoundedReadError as exc:
            limit = " (MAX_CASSETTE_BYTES, the most a cassette may hold)" if exc.too_large else ""
            raise CassetteError(path, f"{exc}{limit}") from None
        try:
            check_values(data, MAX_CASSETTE_VALUES)
        except UntrustedJsonError as exc:
            raise CassetteError(path, f"{exc} (MAX_CASSETTE_VALUES, the most a cassette may hold)") from None
        cassette = _read_fast(data) if serializer is JsonBytesSerializer else _MISSING
        if cassette is _MISSING:  # the serializer's own reading, which says why a file cannot be read
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CassetteError(path, f"not UTF-8 text once decompressed (byte 0x{data[exc.start]:02x} at "
                                          f"position {exc.start:,})") from None
            del data
            try:
                cassette = serializer.deserialize(text)
            except json.JSONDecodeError as exc:
                raise CassetteError(path, f"not JSON once decompressed ({exc.msg}: line {exc.lineno}, column "
                                          f"{exc.colno})") from None
            except RecursionError:
                raise CassetteError(path, "not a cassette of ours: its JSON is nested too deeply") from None
            except (binascii.Error, ValueError) as exc:  # a {"base64": ...} body that is not base64
                raise CassetteError(path, f"not a cassette of ours: a body's base64 is invalid ({exc})") from None
        problem = _not_a_cassette(cassette)
        if problem:
            raise CassetteError(path, f"not a cassette of ours: {problem}")
        recorded, place = cassette.get("metadata", {}), _place_of(path)
        for key, value in place.items():
            if recorded.get(key, value) != value:
                raise CassetteError(path, f"holds the recording of {key} {str(recorded[key])[:120]!r}, not of "
                                          f"{value!r} (cassettes swapped, renamed or moved): put it back where it "
                                          "was, or record this one again with --record-mode all")
        return _interactions(cassette, path)

    @staticmethod
    def save_cassette(cassette_path: str | os.PathLike[str], cassette_dict: dict[str, Any], serializer: Any) -> None:
        """Write ``{"requests", "responses"[, "metadata"]}`` (vcrpy's persister protocol; a request is ours or
        vcrpy's) in the stored form (:func:`~.cassette.interactions`), with ``serializer`` (ours if None)."""
        # the scenario it records, so a cassette under another's name is told apart from a changed dialogue
        cassette_dict = {**cassette_dict, "metadata": {**(cassette_dict.get("metadata") or {}),
                                                       **_place_of(Path(cassette_path))}}
        # preset 3: 4 % larger than 6 (10.9 vs 10.5 KB for the shipped 20-turn dialogues), 5 times faster (4.3 vs
        # 22.8 CPU-ms; bench/README.md); the recording thread writes one per scenario
        stored = {"version": FORMAT_VERSION,
                  "interactions": interactions(cassette_dict["requests"], cassette_dict["responses"]),
                  "metadata": cassette_dict["metadata"]}
        data = lzma.compress((serializer or JsonBytesSerializer).serialize(stored).encode("utf-8"), preset=3)
        write_bytes_atomically(Path(cassette_path), data)


def _place_of(path: Path) -> dict[str, str]:
    """What a cassette's place says it records: its scenario (the file's name) and, for a re-judging's cassette
    (``rejudged/<judge>/``), the judge."""
    place = {"scenario": path.name.removesuffix(SUFFIX)}
    if path.parent.parent.name == "rejudged":
        place["judge"] = path.parent.name
    return place


def _not_a_cassette(cassette: Any) -> str | None:
    """What keeps decoded JSON from being a cassette vcrpy can replay (``where: what``), or None."""
    if not isinstance(cassette, dict) or not isinstance(cassette.get("interactions"), list):
        return f"expected a JSON object with an \"interactions\" list, got {_kind(cassette)}"
    for number, interaction in enumerate(cassette["interactions"]):
        where = ("interactions", number)
        if not isinstance(interaction, dict):
            return f"{dotted(where)}: expected an object, got {_kind(interaction)}"
        for part, fields in (("request", _REQUEST), ("response", _RESPONSE)):
            found = interaction.get(part)
            if not isinstance(found, dict):
                return f"{dotted((*where, part))}: expected an object, got {_kind(found)}"
            for name, kinds in fields:
                value = found.get(name, _MISSING)
                if not isinstance(value, kinds):
                    got = "nothing" if value is _MISSING else _kind(value)
                    return f"{dotted((*where, part, name))}: expected {_KINDS[kinds]}, got {got}"
        response = interaction["response"]
        if not isinstance(response["status"].get("code"), int) or isinstance(response["status"]["code"], bool):
            return f"{dotted((*where, 'response', 'status', 'code'))}: expected a number"
        body = response["body"].get("string", _MISSING)
        if not isinstance(body, _BODY):
            got = "nothing" if body is _MISSING else _kind(body)
            return f"{dotted((*where, 'response', 'body', 'string'))}: expected {_KINDS[_BODY]}, got {got}"
        extra = sorted(set(interaction["request"]) - {name for name, _ in _REQUEST})
        if extra:
            return f"{dotted((*where, 'request'))}: unexpected key {extra[0]!r}"
    if "metadata" in cassette and not isinstance(cassette["metadata"], dict):
        return f"metadata: expected an object, got {_kind(cassette['metadata'])}"
    return None


_MISSING = object()
_BODY = (str, bytes, type(None))
_REQUEST = (("method", str), ("uri", str), ("body", _BODY), ("headers", dict))
_RESPONSE = (("status", dict), ("headers", dict), ("body", dict))
_KINDS = {str: "a string", dict: "an object", _BODY: "a string or null"}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null", bytes: "base64 bytes"}.get(type(value), type(value).__name__)


def _interactions(cassette: dict[str, Any], path: Path) -> Any:
    """The (requests, responses[, metadata]) of a cassette checked by :func:`_not_a_cassette`."""
    requests = []
    for number, item in enumerate(cassette["interactions"]):
        try:
            requests.append(Request.stored(item["request"]))
        except UnicodeEncodeError:
            raise CassetteError(path, f"not a cassette of ours: {dotted(('interactions', number, 'request', 'body'))}: "
                                      "not UTF-8 text (a lone surrogate)") from None
    responses = [read_answer(item["response"]) for item in cassette["interactions"]]
    if cassette.get("metadata"):
        return requests, responses, cassette["metadata"]
    return requests, responses
