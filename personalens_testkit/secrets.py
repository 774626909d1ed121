"""Secrets: which environment variables hold one, every form a value can take in a file, and redaction.

A variable is secret when its name looks like one (``*API_KEY*``, ``*_KEY``, ``*TOKEN*``,
``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``, ``*_PASS``, ``*_DSN``, ``*CREDENTIAL*``,
``AWS_ACCESS_KEY_ID``), when the project's config names it (``secret_env = [...]``,
registered by the run), or when its value is a URL with a password in it
(``DATABASE_URL=postgres://user:pw@host/db``: the URL and the password). Values shorter than
8 characters are left alone (they would match ordinary text).

Every file the testkit writes (cassettes, rows, transcripts, reports) and every line it
prints goes through :func:`redact` / :func:`redact_json` / :func:`scrub_text`, which replace
a value in each form a file can hold it: as it is, JSON-escaped (``\\"``, ``\\uXXXX``,
escaped twice for JSON inside JSON), URL-encoded and in base64 (:func:`base64_cores`) - and in any mix of them, character by
character: a secret spelled ``\\u0073\\u006b...`` by a bot, ``%73k-...``, ``\\x73k-...`` or with
HTML's ``&#115;`` is found too (:func:`spelled`).
"""

from __future__ import annotations

import base64
import functools
import html.entities
import json
import os
import re
from typing import Any, Iterable, Mapping
from urllib.parse import quote, quote_plus, urlsplit

_SECRET_ENV = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY_ID|CREDENTIAL|(^|_)KEY$|(^|_)PASS$|(^|_)DSN$)", re.IGNORECASE)
#: the shortest value treated as a secret
MIN_SECRET_CHARS = 8
_extra_names: tuple[str, ...] = ()


def register_secret_names(names: Iterable[str]) -> None:
    """Also treat these environment variables as secrets (the config's ``secret_env``), in this process."""
    global _extra_names
    _extra_names = tuple(sorted(set(_extra_names) | set(names)))


def secret_values(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(value, placeholder) for every secret environment variable worth hiding, longest first."""
    return list(_secret_values(_process_environment() if env is None else _environment(env), _extra_names))


def _environment(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables' (name, value), read safely while other threads set and delete variables (pytest sets
    and deletes PYTEST_CURRENT_TEST around every test phase): the names are copied at once, and a name
    deleted since is skipped. PYTEST_CURRENT_TEST is left out, so the memo holds across tests."""
    pairs = ((name, env.get(name)) for name in list(env))
    return tuple((name, value) for name, value in pairs if value is not None and name != "PYTEST_CURRENT_TEST")


_decoded: dict[tuple[Any, ...], tuple[tuple[str, str], ...]] = {}  # raw pairs -> decoded: :func:`_process_environment`


def _process_environment() -> tuple[tuple[str, str], ...]:
    """:func:`_environment` of ``os.environ``, its raw pairs copied at once (in C: no thread interleaves) and decoded
    once per distinct environment, not at every call."""
    data = getattr(os.environ, "_data", None)
    if type(data) is not dict:
        return _environment(os.environ)
    current = os.environ.encodekey("PYTEST_CURRENT_TEST")
    raw = tuple([item for item in list(data.items()) if item[0] != current])
    found = _decoded.get(raw)
    if found is None:
        if len(_decoded) >= 8:
            _decoded.clear()
        found = _decoded[raw] = tuple((os.environ.decodekey(k), os.environ.decodevalue(v)) for k, v in raw)
    return found


def _url_password(value: str) -> str | None:
    if "://" not in value or "@" not in value:
        return None
    try:
        return urlsplit(value.strip()).password
    except ValueError:
        return None


@functools.lru_cache(maxsize=8)
def _secret_values(items: tuple[tuple[str, str], ...], extra: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Memoised on the environment's contents: every transcript and row is redacted."""
    found: dict[str, str] = {}
    for name, value in items:
        password = _url_password(value)
        if _SECRET_ENV.search(name) or name in extra or password:
            for secret in (value, password):
                if secret and len(secret) >= MIN_SECRET_CHARS:
                    found.setdefault(secret, f"<{name}>")
    return tuple(sorted(found.items(), key=lambda item: -len(item[0])))


def _json_text(text: str, *, ascii_only: bool = False) -> str:
    """How a string's characters appear inside a JSON string (quotes, backslashes, controls escaped;
    with ``ascii_only``, every other non-ASCII character as ``\\uXXXX``)."""
    return json.dumps(text, ensure_ascii=ascii_only)[1:-1]


@functools.lru_cache(maxsize=8)
def secret_forms(secrets: tuple[tuple[str, str], ...], *, json_only: bool = False) -> tuple[tuple[str, str], ...]:
    """Every form a secret can take in a file of ours, with its placeholder, longest first: as it is,
    JSON-escaped (also as ASCII, and twice over), URL-encoded. ``json_only``: only forms that can
    stand inside a JSON string (for JSON text, where a raw quote would be syntax)."""
    forms: dict[str, str] = {}
    for value, placeholder in secrets:
        once = {_json_text(value), _json_text(value, ascii_only=True)}
        twice = {_json_text(form) for form in once}
        encoded = {quote(value, safe=""), quote_plus(value), quote(value), *base64_cores(value)}
        candidates = once | twice | encoded | (set() if json_only else {value})
        for form in candidates:
            if json_only and form != _json_text(form) and form not in once | twice:
                continue
            forms.setdefault(form, placeholder)
    return tuple(sorted(forms.items(), key=lambda item: -len(item[0])))


def base64_cores(value: str) -> set[str]:
    """The characters of ``value`` in base64 (standard and URL-safe) that do not depend on what comes before or
    after it: at each of the three offsets a value can start at in an encoded stream, the whole characters made of
    its bits alone. Any base64 text holding the value holds one of them."""
    data = value.encode("utf-8")
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        start, end = -(-8 * offset // 6), 8 * (offset + len(data)) // 6  # first whole char, past the last
        core = encoded[start:end]
        if len(core) >= MIN_SECRET_CHARS:
            cores |= {core, core.replace("+", "-").replace("/", "_")}
    return cores


#: an escape of one character: ``\\uXXXX``, ``\\xXX``, ``%XX``, ``&#N;``, ``&#xH;``, a named HTML entity
_ESCAPE = (r"[\\%&](?:(?<=\\)\\*(?:[uU][0-9A-Fa-f]{4,8}|x[0-9A-Fa-f]{2})|(?<=%)[0-9A-Fa-f]{2}|"
           r"(?<=&)(?:#[xX]?[0-9A-Fa-f]+;?|[A-Za-z][A-Za-z0-9]{1,31};?))")  # one leading character class: a fast scan
#: a text without any of these holds no escape (a substring test is much faster than the scan)
_ESCAPE_STARTS = ("\\u", "\\U", "\\x", "%", "&")
_ESCAPES = re.compile(_ESCAPE)
_ESCAPES_BYTES = re.compile(_ESCAPE.encode("ascii"))
#: HTML's named character references, by the character they stand for (``_`` -> ``lowbar;``)
_HTML_NAMES: dict[str, list[str]] = {}
for _name, _char in html.entities.html5.items():
    _HTML_NAMES.setdefault(_char, []).append(_name)
#: the most characters one character of a secret takes when spelled (``\\\\\\\\u0073``, ``%F0%9F%98%80``)
_SPELLED_WIDTH = 16


def _char_forms(char: str) -> list[str]:
    """Every spelling of one character in our files, as regular expressions: ``\\uXXXX`` behind any number
    of backslashes (also as a surrogate pair), ``\\xXX``, ``%XX`` (UTF-8), HTML's ``&#N;``, ``&#xH;`` and
    named entities, a JSON escape, or the character itself."""
    point = ord(char)
    hexes = [f"{point:04x}"] if point <= 0xFFFF else [
        f"{0xD800 + ((point - 0x10000) >> 10):04x}", f"{0xDC00 + ((point - 0x10000) & 0x3FF):04x}"]
    forms = ["".join(rf"\\+u(?i:{h})" for h in hexes), rf"\\+U0*(?i:{point:x})"]
    if point <= 0xFF:
        forms.append(rf"\\+x(?i:{point:02x})")
    forms.append("".join(f"%(?i:{byte:02x})" for byte in char.encode("utf-8")))
    forms += [f"&#0*{point};?", f"&#(?i:x)0*(?i:{point:x});?"]
    forms += [f"&{re.escape(name)}" for name in sorted(_HTML_NAMES.get(char, ()), key=len, reverse=True)]
    if char in '"\\/':
        forms.append(r"\\+" + re.escape(char))
    if char == " ":
        forms.append(r"\+")
    return [*forms, re.escape(char)]


@functools.lru_cache(maxsize=8)
def spelled(secrets: tuple[tuple[str, str], ...]) -> tuple[tuple[re.Pattern[str], re.Pattern[bytes], str, int], ...]:
    """(pattern, bytes pattern, placeholder, widest spelling) for each secret: the secret in any mix of its
    characters' spellings."""
    found = []
    for value, placeholder in secrets:
        text = "".join(f"(?:{'|'.join(_char_forms(char))})" for char in value)
        found.append((re.compile(text), re.compile(text.encode("utf-8")), placeholder, len(value) * _SPELLED_WIDTH))
    return tuple(found)


def _respelled(text: Any, secrets: tuple[tuple[str, str], ...]) -> Any:
    """``text`` (str or bytes) with each secret spelled with escapes (``\\u0073k-...``) replaced by its
    placeholder. A spelled secret holds at least one escape, so only the text around escapes is searched
    (ordinary text - "50% off", "fish & chips" - holds none, and costs one scan)."""
    binary = isinstance(text, bytes)
    if not secrets or not any((start.encode() if binary else start) in text for start in _ESCAPE_STARTS):
        return text
    escapes = _ESCAPES_BYTES if binary else _ESCAPES
    found = [(m.start(), _escaped(m.group(0), binary)) for m in escapes.finditer(text)]
    for (value, _), (pattern, pattern_bytes, placeholder, width) in zip(secrets, spelled(secrets)):
        chars = set(value) if value.isascii() else None  # a secret beyond ASCII: every escape may be part of it
        marks = [at for at, char in found if chars is None or char in chars]
        spans = []
        for low, high in _windows(marks, width, len(text)):
            spans += [(m.start(), m.end()) for m in (pattern_bytes if binary else pattern).finditer(text, low, high)]
        if spans:
            text = _replaced(text, _merged(spans), placeholder.encode("utf-8") if binary else placeholder)
            found = [(m.start(), _escaped(m.group(0), binary)) for m in escapes.finditer(text)]
    return text


def _escaped(escape: Any, binary: bool) -> str | None:
    """The character one escape stands for (None: not a character of an ASCII secret)."""
    text = escape.decode("ascii") if binary else escape
    body = text.lstrip("\\")
    try:
        if body[:1] in ("u", "U", "x") and text.startswith("\\"):
            point = int(body[1:], 16)
        elif text.startswith("%"):
            point = int(text[1:], 16)
        elif text.startswith("&#"):
            number = text[2:].rstrip(";")
            point = int(number[1:], 16) if number[:1] in ("x", "X") else int(number)
        else:
            return html.entities.html5.get(text[1:]) or html.entities.html5.get(text[1:] + ";")
        return chr(point)
    except (ValueError, OverflowError):
        return None


def _windows(marks: list[int], width: int, size: int) -> list[tuple[int, int]]:
    """The stretches of text within ``width`` of an escape, merged."""
    windows: list[tuple[int, int]] = []
    for mark in marks:
        low, high = max(0, mark - width), min(size, mark + width)
        if windows and low <= windows[-1][1]:
            windows[-1] = (windows[-1][0], high)
        else:
            windows.append((low, high))
    return windows


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(set(spans)):
        if out and start < out[-1][1]:
            continue  # found again from an overlapping window
        out.append((start, end))
    return out


def _replaced(text: Any, spans: list[tuple[int, int]], placeholder: Any) -> Any:
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], placeholder]
        last = end
    parts.append(text[last:])
    return text[:0].join(parts)


def scrub_text(data: bytes, secrets: Iterable[tuple[str, str]]) -> bytes:
    """Bytes with every form of every secret replaced by its placeholder."""
    found = tuple(secrets)
    for form, placeholder in secret_forms(found):
        encoded = form.encode("utf-8")
        if encoded in data:
            data = data.replace(encoded, placeholder.encode("utf-8"))
    return _respelled(data, found)


def redact(value: Any, secrets: Iterable[tuple[str, str]] | None = None) -> Any:
    """Any JSON-like value (rows, messages, transcripts) with secret values replaced by their placeholders.

    A structure is searched as its JSON text and parsed back only if a secret is in it.
    """
    found = secret_values() if secrets is None else list(secrets)
    if not found:
        return value
    if isinstance(value, str):
        for form, placeholder in secret_forms(tuple(found)):
            if form in value:
                value = value.replace(form, placeholder)
        return _respelled(value, tuple(found))
    if not isinstance(value, (dict, list, tuple)):
        return value
    text = json.dumps(value, ensure_ascii=False)
    redacted = redact_json(text, found)
    return value if redacted is text else json.loads(redacted)


def redact_json(text: str, secrets: Iterable[tuple[str, str]] | None = None) -> str:
    """JSON text with every secret value, in every form JSON writes it (escaped, as ASCII, escaped
    twice, URL-encoded), replaced by its placeholder; the very same string if none is in it."""
    found = tuple(secret_values() if secrets is None else secrets)
    forms = secret_forms(found, json_only=True)
    redacted = text
    if any(form in redacted for form, _ in forms):
        for form, placeholder in forms:
            redacted = redacted.replace(form, placeholder)
    redacted = _respelled(redacted, found)
    if redacted is text or redacted == text:
        return text
    try:
        json.loads(redacted)
    except ValueError:  # a secret made of digits matched inside a number: redact the strings, one by one
        try:
            data = json.loads(text)
        except ValueError:
            return redacted  # it was not JSON to begin with
        return json.dumps(_strings_redacted(data, found), ensure_ascii=False, separators=(",", ":"))
    return redacted


def _strings_redacted(value: Any, secrets: tuple[tuple[str, str], ...]) -> Any:
    """A parsed JSON value with every string (keys too) redacted; numbers, booleans and nulls as they are."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_strings_redacted(item, secrets) for item in value]
    if isinstance(value, dict):
        return {redact(key, secrets): _strings_redacted(item, secrets) for key, item in value.items()}
    return value

