"""How a secret can be spelled in a file beyond its plain forms (:mod:`.secrets` holds those): in base64, at any
offset (:func:`base64_cores`), and character by character with escapes - ``\\u0073k-...``, ``%73k-...``,
``\\x73k-...``, HTML's ``&#115;``, in any mix (:func:`spelled`, :func:`respelled`)."""

from __future__ import annotations

import base64
import functools
import html.entities
import re
from typing import Any

#: the shortest base64 core kept (the shortest secret's: :data:`.secrets.MIN_SECRET_CHARS`)
MIN_CORE_CHARS = 8


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
        if len(core) >= MIN_CORE_CHARS:
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


def respelled(text: Any, secrets: tuple[tuple[str, str], ...]) -> Any:
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
