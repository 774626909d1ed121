"""How a secret can be spelled in a file beyond its plain forms (:mod:`.secrets` holds those), found through one
view of the text (:func:`respelled`): its escapes decoded - ``\\u0073``, ``\\x73``, ``%73``, HTML's ``&#115;`` and
named entities, JSON's ``\\/``, behind any number of backslashes - then seen as every check of untrusted text sees
it (:mod:`.textview`: format characters such as zero-width joiners dropped, NFKC - full-width letters -, look-alike
letters Latin), then without whitespace (a secret cut by line breaks, base64 wrapped at 76 columns). In that view the
secret is looked for as it is and in base64 at any offset (:func:`base64_cores`); what is found is cut from the text
itself, escapes and dropped characters included. The injection check reads untrusted text through the same
:mod:`.textview`, so a spelling one of them sees through, the other does too."""

from __future__ import annotations

import base64
import bisect
import functools
import html.entities
import re
from typing import Any

from .textview import seen, seen_char, seen_through

#: the shortest base64 core kept (the shortest secret's: :data:`.secrets.MIN_SECRET_CHARS`)
MIN_CORE_CHARS = 8


def raw_bytes(value: str) -> bytes:
    """A value's bytes: UTF-8, a byte that was not (an environment variable's, read with surrogateescape) as it was."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte escaped to (a JSON "\\ud800")
        return value.encode("utf-8", "surrogatepass")


def base64_cores(value: str) -> set[str]:
    """The characters of ``value`` in base64 (standard and URL-safe) that do not depend on what comes before or
    after it: at each of the three offsets a value can start at in an encoded stream, the whole characters made of
    its bits alone. Any base64 text holding the value holds one of them."""
    data = raw_bytes(value)
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        start, end = -(-8 * offset // 6), 8 * (offset + len(data)) // 6  # first whole char, past the last
        core = encoded[start:end]
        if len(core) >= MIN_CORE_CHARS:
            cores |= {core, core.replace("+", "-").replace("/", "_")}
    return cores


#: an escape of characters: ``\\uXXXX`` (and a surrogate pair of them), ``\\u{X...}``, ``\\UXXXXXXXX``, ``\\NNN``
#: (octal), a run of ``\\xXX`` or of ``%XX`` (UTF-8 bytes), ``&#N;``, ``&#xH;``, a named HTML entity - behind any
#: number of backslashes, matched from the run's first (possessively: a long run of backslashes costs one pass); one
#: leading character class, so the scan looks for ``\\``, ``%`` and ``&`` at C speed
_ESCAPES = re.compile(
    r"[\\%&](?:(?<=\\)(?<!\\.)\\*+(?:u[dD][89abAB][0-9A-Fa-f]{2}\\+u[dD][c-fC-F][0-9A-Fa-f]{2}|u\{[0-9A-Fa-f]{1,6}\}"
    r"|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}(?:\\+x[0-9A-Fa-f]{2})*|[0-7]{3})"
    r"|(?<=%)[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*|(?<=&)(?:#[0-9]+;?|#[xX][0-9A-Fa-f]+;?|[A-Za-z][A-Za-z0-9]{1,31};?))")
#: a text without any of these holds no escape (a substring test is much faster than the scan)
_ESCAPE_STARTS = ("\\u", "\\U", "\\x", "%", "&", *(f"\\{digit}" for digit in range(8)))
_ESCAPE_STARTS_BYTES = tuple(start.encode() for start in _ESCAPE_STARTS)
#: JSON's one-letter escapes behind up to 8 backslashes (JSON in JSON, three deep), longest first, that the view
#: reads as characters of their own length (the map back stays the same): a line break or tab cut into a secret is
#: whitespace, ``\\/`` a slash, ``\\"`` a quote - standing where the escape starts, so a secret found from it is cut with its escape
_SHORT = tuple(("\\" * count + letter, letter + " " * count if letter in '/"' else " " * (count + 1))
               for count in range(8, 0, -1) for letter in 'nrt/"')
#: the whitespace of ASCII (what ``str.split`` drops), and the line breaks the view makes whitespace
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
_ASCII_BYTES = bytes(range(128))
_ASCII_SPACE_AND_BACKSLASH = _ASCII_SPACE + b"\\"
#: a form shorter than this is not looked for (a secret of whitespace and format characters)
_SHORTEST_FORM = 4
#: beyond this many distinct characters outside ASCII, the quick test gives way to the view itself (linear)
_MOST_FOLDED = 64


def _blanked(text: str) -> str:
    """``text`` with JSON's one-letter escapes (:data:`_SHORT`) read as characters of their own length."""
    if "\\" not in text:
        return text
    run = next(count for count in (8, 4, 2, 1) if "\\" * count in text)  # the longest run, at least
    for escape, same_length in _SHORT[-5 * (2 * run - 1 if run < 8 else 8):]:
        if escape in text:
            text = text.replace(escape, same_length)
    return text


def _bytes_text(data: bytes) -> str:
    """Escaped bytes as the characters they spell: UTF-8, else one character a byte (Latin-1)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


@functools.lru_cache(maxsize=4096)
def _escaped(escape: str) -> str | None:
    """The character(s) an escape stands for (None: not an escape after all - ``&nosuchname;``, past U+10FFFF)."""
    try:
        if escape[0] == "\\":
            body = escape.lstrip("\\")
            if body[0] == "x":
                return _bytes_text(bytes.fromhex(body.replace("\\", "").replace("x", "")))
            if body[0] in "01234567":
                return chr(int(body, 8))
            if "\\" in body:  # a surrogate pair: one character
                high, low = int(body[1:5], 16), int(body.rsplit("u", 1)[1], 16)
                return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            return chr(int(body[1:].strip("{}"), 16))
        if escape[0] == "%":
            return _bytes_text(bytes.fromhex(escape.replace("%", "")))
        if escape.startswith("&#"):
            number = escape[2:].rstrip(";")
            return chr(int(number[1:], 16) if number[:1] in ("x", "X") else int(number))
        return html.entities.html5.get(escape[1:]) or html.entities.html5.get(escape[1:] + ";")
    except (ValueError, OverflowError):
        return None


class _View:
    """A text as a secret is looked for in it (see the module's text), and the way back from the view to the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        #: per escape decoded: (start, end) in the text, and how many characters it stands for
        self._escapes: list[tuple[int, int, int]] = []
        text = _blanked(text)
        if any(start in text for start in _ESCAPE_STARTS):
            text = _ESCAPES.sub(self._decode, text)
        #: JSON's escaped backslash, as one backslash (and a space: the same length)
        self.decoded = text.replace("\\\\", "\\ ") if "\\\\" in text else text
        self.folded = seen(self.decoded)
        self.bare = "".join(self.folded.split())
        #: the way back from the bare view to the text, made when first needed
        self._back: tuple[list[int], list[int] | None, list[int]] | None = None

    def _decode(self, match: re.Match[str]) -> str:
        escape = match.group()
        char = _escaped(escape)
        if char is None:
            return escape
        self._escapes.append((match.start(), match.end(), len(char)))
        return char

    def spans(self, form: str) -> list[tuple[int, int]]:
        """Where ``form`` stands in the view, as spans of the text itself."""
        found: list[tuple[int, int]] = []
        at = self.bare.find(form)
        while at != -1:
            found.append(self._span(at, at + len(form)))
            at = self.bare.find(form, at + len(form))
        return found

    def _span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the text that characters ``start`` to ``end`` of the bare view come from."""
        if self._back is None:
            kept = [i for i, char in enumerate(self.folded) if not char.isspace()]  # what str.split keeps
            starts, shift = [], 0  # each escape's start in the decoded text
            for first, last, size in self._escapes:
                starts.append(first - shift)
                shift += last - first - size
            self._back = (kept, seen_through(self.decoded)[1], starts)
        kept, origin, starts = self._back
        first, last = kept[start], kept[end - 1]
        if origin is not None:
            first, last = origin[first], origin[last]
        start, end = self._source(first, starts)[0], self._source(last, starts)[1]
        while end < len(self.text) and self.text[end - 1] == "\\":  # ends in a one-letter escape: cut it whole
            end += 1
        return start, end

    def _source(self, index: int, starts: list[int]) -> tuple[int, int]:
        """The span of the text that character ``index`` of the decoded text comes from."""
        before = bisect.bisect_right(starts, index) - 1
        if before < 0:
            return index, index + 1
        start, end, size = self._escapes[before]
        if index < starts[before] + size:
            return start, end
        at = end + index - starts[before] - size
        return at, at + 1


def _may_hold(data: bytes, forms: tuple[bytes, ...]) -> bool:
    """Whether the view of ``data`` (UTF-8 without escapes of characters) may hold one of ``forms`` (ASCII, without a
    backslash): the view made at C speed - JSON's one-letter escapes and every backslash dropped, each distinct
    character beyond ASCII folded where it stands, whitespace dropped. It holds every form the view holds (the folds
    are the view's, character by character; a backslash is in no form)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:  # bytes that are not UTF-8: the view itself decides
        return True
    skeleton = data
    if b"\\" in skeleton:
        for escape in (b"\\n", b"\\r", b"\\t"):
            skeleton = skeleton.replace(escape, b"")
    beyond = data.translate(None, _ASCII_BYTES)
    if beyond:
        distinct = set(beyond.decode("utf-8"))  # each character's bytes stand together: they decode alike
        if len(distinct) > _MOST_FOLDED:
            return True
        for char in distinct:
            folded, raw = _folded_bare(char), char.encode("utf-8")
            if folded != raw:
                skeleton = skeleton.replace(raw, folded)
    skeleton = skeleton.translate(None, _ASCII_SPACE_AND_BACKSLASH)
    return any(form in skeleton for form in forms)


@functools.lru_cache(maxsize=4096)
def _folded_bare(char: str) -> bytes:
    """One character beyond ASCII as the view shows it, whitespace dropped, in UTF-8."""
    return "".join(c for c in seen_char(char) if not c.isspace()).encode("utf-8", "surrogatepass")


@functools.lru_cache(maxsize=8)
def _forms_bytes(secrets: tuple[tuple[str, str], ...]) -> tuple[bytes, ...] | None:
    """The forms of :func:`_forms` in UTF-8, for :func:`_may_hold`; None if one holds a backslash or is not ASCII
    (then the view itself is made)."""
    found = tuple(form.encode("utf-8", "surrogatepass") for form, _ in _forms(secrets))
    return None if any(b"\\" in form or not form.isascii() for form in found) else found


@functools.lru_cache(maxsize=8)
def _forms(secrets: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """(form, placeholder) for each secret as the view shows it, and its base64 cores, longest first."""
    found: dict[str, str] = {}
    for value, placeholder in secrets:
        for form in {_View(value).bare, *base64_cores(value)}:
            if len(form) >= _SHORTEST_FORM:
                found.setdefault(form, placeholder)
    return tuple(sorted(found.items(), key=lambda item: -len(item[0])))


def respelled(text: Any, secrets: tuple[tuple[str, str], ...]) -> Any:
    """``text`` (str or bytes) with each secret, in any spelling the view sees through, replaced by its placeholder;
    the very same object if none is in it."""
    if not secrets:
        return text
    forms = _forms(secrets)
    binary = isinstance(text, (bytes, bytearray))
    data = bytes(text) if binary else text.encode("utf-8", "surrogatepass")
    quick = _forms_bytes(secrets)
    if quick is not None and not any(start in data for start in _ESCAPE_STARTS_BYTES) and not _may_hold(data, quick):
        return text
    view = _View(text.decode("utf-8", "surrogateescape") if binary else text)
    spans: list[tuple[int, int, str]] = []
    for form, placeholder in forms:
        spans += [(start, end, placeholder) for start, end in view.spans(form)]
    if not spans:
        return text
    parts, last = [], 0
    for start, end, placeholder in sorted(spans):
        if start < last:  # overlaps a span already cut (another form of it, or of another secret): cut to its end
            last = max(last, end)
            continue
        parts += [view.text[last:start], placeholder]
        last = end
    parts.append(view.text[last:])
    done = "".join(parts)
    return done.encode("utf-8", "surrogateescape") if binary else done
