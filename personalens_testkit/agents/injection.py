"""Assistant text addressed to the judge rather than the user: flagged, and only exact imitations
of the judge's own answer format taken out of what the judge reads.

The judge reads the assistant's words as written, inside the ``<conversation>`` block it is
told to treat as data. Regular expressions cannot tell an attack from ordinary text ("final
score: 112-105", "ignore the list above", "the judges score each routine"), so nothing is
removed on suspicion. Two things happen instead:

- **flagged**: spans that look addressed to the evaluator (score or verdict labels, the
  judge's JSON, instructions to ignore the rubric, words to a grader in several languages,
  fake closing tags and chat markup, hidden comments, obfuscated labels) are listed in the
  row's ``injection_flags``. A flag never changes what the judge reads.
- **removed**: only text that imitates the judge's *answer format* exactly - a rubric
  dimension with a score ("Personalization Score: 4"), the paper's verdict ("VERDICT: True"),
  a JSON object made of the judge's answer keys (``{"score": 4, "justification": ...}``) -
  is replaced by :data:`MARKER` in the judge's copy. Look-alike letters, zero-width
  characters and full-width digits are seen through.

Measured on the corpora in ``tests/data/injection`` (see bench/README.md): ordinary replies
altered 0 times; the flag rate of the attacks is reported there.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Sequence

from ..llm.base import Message
from .pattern_needs import fold, prefilter
from .injection_patterns import (
    ANSWER_KEYS, BASE64, HIDDEN_WORDS, LEET, LEET_LETTERS, REASON_KEYS, SCORE_LABEL, SPACED, VERDICT_LABEL, FLAGS,
)
from ..textview import seen_through

MARKER = "[removed: text imitating the evaluator's answer format]"


@dataclass(frozen=True)
class InjectionFlag:
    #: the assistant reply's number (1 = its first reply)
    turn: int
    kind: str
    excerpt: str
    #: whether the span was taken out of the judge's copy (an exact imitation of its answer format)
    removed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def removable_spans(text: str, seen: tuple[str, list[int] | None] | None = None) -> list[tuple[int, int]]:
    """Spans of ``text`` that imitate the judge's answer format exactly, merged, in order."""
    view, origin = seen or seen_through(text)
    spans = [(m.start(), m.end()) for pattern in (SCORE_LABEL, VERDICT_LABEL) for m in pattern.finditer(view)]
    spans += list(_answer_objects(view))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return [_original(origin, start, end) for start, end in merged]


def _original(origin: list[int] | None, start: int, end: int) -> tuple[int, int]:
    """A span of the seen-through view as a span of the text it came from."""
    return (start, end) if origin is None else (origin[start], origin[end - 1] + 1)


def _answer_objects(view: str) -> Iterator[tuple[int, int]]:
    """JSON objects made only of the judge's answer keys: an answer key and at least one reason key."""
    decoder = json.JSONDecoder()
    start = view.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(view, start)
        except (ValueError, RecursionError):
            start = view.find("{", start + 1)
            continue
        keys = set(value) if isinstance(value, dict) else set()
        if keys & ANSWER_KEYS and keys & REASON_KEYS and keys <= ANSWER_KEYS | REASON_KEYS:
            yield start, end
        start = view.find("{", end)


def find_injections(messages: Sequence[Message]) -> list[InjectionFlag]:
    """Every flagged span of the assistant's replies (none of the user's)."""
    flags = []
    turn = 0
    for message in messages:
        if message.role != "assistant":
            continue
        turn += 1
        flags += _flags(message.content, turn)
    return flags


def _flags(text: str, turn: int) -> list[InjectionFlag]:
    view, origin = seen = seen_through(text)
    removed = removable_spans(text, seen)

    def taken_out(start: int, end: int) -> bool:
        first, last = _original(origin, start, end)
        return any(low <= first and last <= high for low, high in removed)

    found: dict[tuple[str, str], InjectionFlag] = {}
    for variant in _variants(view, text):
        if variant is not view and variant is not text and not any(map(variant.lower().__contains__, HIDDEN_WORDS)):
            continue  # a decoding (reversed, ROT13, ...) that hides nothing a flag looks for: not searched
        folded = fold(variant)
        for (kind, pattern), may_match in zip(FLAGS, _prefilters()):
            if not may_match(variant, folded):
                continue  # it holds none of the words every match holds (see .pattern_needs): no scan
            for match in pattern.finditer(variant):
                excerpt = match.group(0)[:120]
                gone = variant is view and taken_out(match.start(), match.end())
                found.setdefault((kind, excerpt), InjectionFlag(turn, kind, excerpt, gone))
    for start, end in removed:
        if not any(flag.removed and flag.excerpt in text[start:end] for flag in found.values()):
            excerpt = text[start:end][:120]
            found.setdefault(("answer-format JSON", excerpt), InjectionFlag(turn, "answer-format JSON", excerpt, True))
    return list(found.values())


@functools.cache
def _prefilters() -> tuple[Callable[[str, str], bool], ...]:
    """Each flag's :func:`~.pattern_needs.prefilter`, in the order of :data:`FLAGS` (made at the first reply)."""
    return tuple(prefilter(pattern) for _, pattern in FLAGS)


def _variants(view: str, text: str) -> Iterator[str]:
    """The text seen through, then as written (look-alike folding mangles Cyrillic and Greek words),
    then decodings an attacker may hide a label in: spaced-out or hyphenated letters, digits for
    letters, reversed, ROT13, base64."""
    yield view
    if text != view:
        yield text
    yield view[::-1]
    yield codecs.encode(view, "rot13")
    spaced = SPACED.sub(lambda m: re.sub(r"[ .\-]", "", m.group(0)), view)
    if spaced != view:
        yield spaced
    digits = LEET.sub(lambda m: m.group(0).translate(LEET_LETTERS), view)
    if digits != view:
        yield digits
    for token in BASE64.findall(view):
        try:
            decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if decoded.isprintable():
            yield decoded


def neutralise(messages: Sequence[Message]) -> list[Message]:
    """The dialogue as the judge reads it: exact imitations of its answer format in the assistant's
    replies replaced by :data:`MARKER`, everything else as written. Spans are found on the original
    text and replaced in one pass, so the marker itself is never read or cut again."""
    judged = []
    for message in messages:
        content = message.content
        if message.role == "assistant":
            spans = removable_spans(content)
            if spans:
                parts, last = [], 0
                for start, end in spans:
                    parts += [content[last:start], MARKER]
                    last = end
                content = "".join(parts) + content[last:]
        judged.append(Message(message.role, content, cache_prefix=message.cache_prefix))
    return judged
