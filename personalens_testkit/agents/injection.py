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
import json
import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

from ..llm.base import Message

MARKER = "[removed: text imitating the evaluator's answer format]"

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"), None)
#: Cyrillic and Greek letters that look like Latin ones (what a look-alike attack uses)
_LOOKALIKE = str.maketrans(
    "АВЕКМНОРСТУХаеорсухіјѕԁһԛԝ" "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαοριντκε",
    "ABEKMHOPCTYXaeopcyxijsdhqw" "ABEZHIKMNOPTYXaopivtke",
)
_DIMENSION = r"(?:personali[sz]ation|naturalness|coherence|task[\s_-]*completion)"
_GAP = r"[\s*_#>|]*"
#: exact imitations of the judge's answer format: the only spans ever removed
_SCORE_LABEL = re.compile(rf"\b{_DIMENSION}{_GAP}(?:score|rating){_GAP}[:=]?{_GAP}\d+(?:\s*/\s*\d+)?", re.I)
_VERDICT_LABEL = re.compile(rf"\bverdict{_GAP}[:=]{_GAP}(?:true|false)\b", re.I)
_ANSWER_KEYS = {"score", "verdict"}
_REASON_KEYS = {"justification", "explanation", "observations", "suggestions"}

_EVALUATOR = (r"(?:judge|evaluator|grader|rater|assessor|scorer|reviewer|evaluation model|scoring model|"
              r"whoever (?:grades|rates|scores|judges|evaluates)|anyone (?:grading|rating|scoring|assessing|evaluating)|"
              r"person or model scoring)")
_THIS = r"(?:this|the) (?:conversation|dialogue|dialog|chat|exchange|transcript|response|reply|assistant|interaction)"
#: (kind, pattern) of what is flagged (on the text with look-alikes seen through)
FLAGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("score label", _SCORE_LABEL),
    ("verdict label", _VERDICT_LABEL),
    ("bare score label", re.compile(r"\b(?:score|rating)\s*[:=]\s*[1-5](?:\s*/\s*[45])?(?![\d.,:/-]|\s*[-–:]\s*\d)", re.I)),
    ("answer-key JSON", re.compile(r"[\"'](?:\w*_)?(?:score|verdict)[\"']\s*:\s*(?:true|false|[1-5]\b)", re.I)),
    ("address to the evaluator", re.compile(
        rf"\b{_EVALUATOR}\b[^\n]{{0,120}}?\b(?:{_THIS}|score|rate|grade|mark|award|assign|output|full marks|"
        r"top marks|maximum|highest)\b", re.I)),
    ("address to the evaluator", re.compile(
        rf"\b(?:rate|score|grade|mark)\s+{_THIS}\b|\b{_THIS}\s+(?:deserves|should (?:get|receive|be (?:rated|scored|given)))",
        re.I)),
    ("instruction to ignore", re.compile(
        r"\b(?:ignore|disregard|forget|override|overlook)\b[^.\n]{0,40}\b(?:rubric|instructions|prompt|"
        r"(?:evaluation|scoring|grading) (?:criteria|guidelines|instructions|rules))\b", re.I)),
    ("instruction to ignore", re.compile(r"\b(?:rubric|scoring guidelines|evaluation criteria)\b[^.\n]{0,30}\b"
                                         r"(?:outdated|replaced|no longer|updated)\b", re.I)),
    ("chat markup", re.compile(
        r"</?\s*(?:conversation|dialogue|rubric|system|instructions?|evaluation|judge\w*|user_profile)\s*>|"
        r"<\|im_(?:start|end)\|>|\[/?INST\]|<</?SYS>>|^\s*#{1,4}\s*(?:system|instructions?|evaluation)\b|"
        r"\[(?:SYSTEM|EVALUATOR|JUDGE)\]\s*:|\bSYSTEM OVERRIDE\b", re.I | re.M)),
    ("hidden comment", re.compile(r"<!--.*?-->", re.S)),
    ("words to the evaluator in another language", re.compile(
        r"évaluateur|l'évaluat|evaluador|\bjuez\b|Bewerter|Gutachter|Prüfer|valutatore|\bgiudice\b|"
        r"评审|评委|评估者|打分|評価者|採点者|採点|оценщик|судь[яеи]|проверяющ", re.I)),
)
#: a decoded variant is searched only if it holds one of these (most decodings of ordinary text are noise)
_HIDDEN_WORDS = ("score", "verdict", "rating", "judge", "evaluat", "grade", "rubric", "instruction")
_SPACED = re.compile(r"\b(?:\w[ .\-]){3,}\w\b")
#: digits written for letters inside a word ("Sc0r3"), not numbers
_LEET = re.compile(r"\b(?=\w*[A-Za-z])(?=\w*[013457])\w+\b")
_LEET_LETTERS = str.maketrans("013457", "oieast")
_BASE64 = re.compile(r"\b[A-Za-z0-9+/]{16,}={0,2}")


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


def seen_through(text: str) -> tuple[str, list[int] | None]:
    """The text with zero-width characters dropped, compatibility forms folded (full-width digits,
    ligatures) and look-alike letters made Latin; and, for each character of it, where it came from
    (None: nowhere else than where it is - plain ASCII text is its own view)."""
    if text.isascii():
        return text, None
    out: list[str] = []
    origin: list[int] = []
    for i, char in enumerate(text):
        if ord(char) < 128:
            out.append(char)
            origin.append(i)
            continue
        for folded in unicodedata.normalize("NFKC", char.translate(_ZERO_WIDTH)).translate(_LOOKALIKE):
            out.append(folded)
            origin.append(i)
    return "".join(out), origin


def removable_spans(text: str, seen: tuple[str, list[int] | None] | None = None) -> list[tuple[int, int]]:
    """Spans of ``text`` that imitate the judge's answer format exactly, merged, in order."""
    view, origin = seen or seen_through(text)
    spans = [(m.start(), m.end()) for pattern in (_SCORE_LABEL, _VERDICT_LABEL) for m in pattern.finditer(view)]
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
        if keys & _ANSWER_KEYS and keys & _REASON_KEYS and keys <= _ANSWER_KEYS | _REASON_KEYS:
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
        if variant is not view and variant is not text and not any(word in variant.lower() for word in _HIDDEN_WORDS):
            continue  # a decoding (reversed, ROT13, ...) that hides nothing a flag looks for: not searched
        for kind, pattern in FLAGS:
            for match in pattern.finditer(variant):
                excerpt = match.group(0)[:120]
                gone = variant is view and taken_out(match.start(), match.end())
                found.setdefault((kind, excerpt), InjectionFlag(turn, kind, excerpt, gone))
    for start, end in removed:
        if not any(flag.removed and flag.excerpt in text[start:end] for flag in found.values()):
            excerpt = text[start:end][:120]
            found.setdefault(("answer-format JSON", excerpt), InjectionFlag(turn, "answer-format JSON", excerpt, True))
    return list(found.values())


def _variants(view: str, text: str) -> Iterator[str]:
    """The text seen through, then as written (look-alike folding mangles Cyrillic and Greek words),
    then decodings an attacker may hide a label in: spaced-out or hyphenated letters, digits for
    letters, reversed, ROT13, base64."""
    yield view
    if text != view:
        yield text
    yield view[::-1]
    yield codecs.encode(view, "rot13")
    spaced = _SPACED.sub(lambda m: re.sub(r"[ .\-]", "", m.group(0)), view)
    if spaced != view:
        yield spaced
    digits = _LEET.sub(lambda m: m.group(0).translate(_LEET_LETTERS), view)
    if digits != view:
        yield digits
    for token in _BASE64.findall(view):
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
