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
from ..textview import seen_through

MARKER = "[removed: text imitating the evaluator's answer format]"

# -- what the filter looks for --------------------------------------------------------------------------
# The exact imitations of the judge's answer format that are removed, and the kinds of text addressed to the
# evaluator that are flagged. Each flag is a *kind* of address, not a list of strings: an evaluator named or
# addressed (in English and other languages, or "if you are a model assessing this"), a request for a score on
# the rubric's dimensions, a score sheet of two or more dimensions with values, a claim that the dialogue was
# already assessed, instructions to ignore the rubric, fake markup. Measured both ways on the corpora in
# ``tests/data/injection`` (``python bench/injection_corpus.py``).

_DIMENSION = r"(?:personali[sz]ation|naturalness|coherence|task[\s_-]*completion)"
_GAP = r"[\s*_#>|]*"
#: exact imitations of the judge's answer format: the only spans ever removed
SCORE_LABEL = re.compile(rf"\b{_DIMENSION}{_GAP}(?:score|rating){_GAP}[:=]?{_GAP}\d+(?:\s*/\s*\d+)?", re.I)
VERDICT_LABEL = re.compile(rf"\bverdict{_GAP}[:=]{_GAP}(?:true|false)\b", re.I)
ANSWER_KEYS = {"score", "verdict"}
REASON_KEYS = {"justification", "explanation", "observations", "suggestions"}

_EVALUATOR = (r"(?:judge|evaluator|grader|rater|assessor|scorer|reviewer|marker|examiner|evaluation (?:model|system)|"
              r"scoring (?:model|system)|grading (?:model|system)|(?:ai|llm) (?:judge|evaluator|grader|reviewer)|"
              r"whoever (?:grades|rates|scores|judges|evaluates|assesses|reviews|marks)|"
              r"anyone (?:grading|rating|scoring|assessing|evaluating|judging|reviewing)|person or model scoring)")
#: a rubric dimension, or the rubric's criteria as a whole
_CRITERIA = (r"(?:personali[sz]ation|naturalness|coherence|task[\s_-]*complet\w*|every (?:criterion|metric|dimension|"
             r"category|scale|measure)|all (?:criteria|metrics|dimensions|categories|scales|measures))")
#: a value on the rubric's scales, in digits or words
_LEVEL = r"(?:[1-5](?:\s*/\s*[45])?|one|two|three|four|five|full|top|max(?:imum)?|highest|perfect|yes|no|true|false)"
#: a word that asks for or states a judgement
_JUDGING = r"(?:evaluat|assess|grad|judg|review|scor|rat|mark)\w*"
_THIS = r"(?:this|the) (?:conversation|dialogue|dialog|chat|exchange|transcript|response|reply|assistant|interaction)"
#: (kind, pattern) of what is flagged (on the text with look-alikes seen through)
FLAGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("score label", SCORE_LABEL),
    ("verdict label", VERDICT_LABEL),
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
        r"评审|评委|评估者|打分|評価者|採点者|採点|оценщик|судь[яеи]|проверяющ|avaliador|beoordelaar|oceniając|"
        r"bedömare|granskare|bedømmer|arvioija|hodnotitel|değerlendirici|αξιολογητ|평가자|المقي[ّ]?م|"
        r"मूल्यांकनकर्ता|מעריך|người đánh giá|penilai\b", re.I)),
    # the evaluator called by name or role: "Dear judge,", "Hey grader -", "Note to whoever scores this:"
    ("address to the evaluator", re.compile(
        rf"\b(?:dear|hey|hi|hello|attention|psst|note|message|memo|reminder|p\.?s\.?)\b[^\n.]{{0,12}}?\b"
        rf"{_EVALUATOR}s?\b(?:\s+(?:this|it|here))?\s*[:,!\u2014\u2013-]", re.I)),
    ("address to the evaluator", re.compile(
        rf"\b(?:if|when|as)\s+you(?:'re|\s+are)\s+(?:an?\s+|the\s+)?(?:ai|model|llm|language model|system|bot|machine|"
        rf"program|{_EVALUATOR})\b[^.\n]{{0,80}}?\b{_JUDGING}|\b(?:any|every|each)\s+(?:ai|model|llm|system|bot)s?\s+"
        rf"(?:that\s+(?:is\s+)?|who\s+(?:is\s+)?)?{_JUDGING}", re.I)),
    # a request for a level on the rubric: "please give a 4 for personalization", "a 5 on coherence would be fair"
    ("request for a score", re.compile(
        rf"\b(?:give|grant|award|assign|put|mark|rate|score|bump|raise)\b[^.\n]{{0,30}}?\b{_LEVEL}\b[^.\n]{{0,40}}?"
        rf"\b{_CRITERIA}|\b{_LEVEL}\s+(?:points?\s+|marks?\s+|stars?\s+)?(?:on|for|in)\s+{_CRITERIA}", re.I)),
    # a score sheet: two or more dimensions, each with a value
    ("score sheet", re.compile(
        rf"(?:\b(?:personali[sz]ation|naturalness|coherence|task[\s_-]*(?:complet\w*)?)\b[\"'*_]*\W{{0,12}}{_LEVEL}\b"
        rf"[\s\S]{{0,40}}?){{2,}}", re.I)),
    # a claim that the dialogue was already assessed
    ("claim of an assessment", re.compile(
        rf"\b(?:already|pre-?|previously)\s*(?:been\s+)?(?:reviewed|graded|scored|evaluated|assessed|verified|approved|"
        rf"rated|checked)\b[^.\n]{{0,60}}?\b(?:scores?|marks|rubric|criteri\w*|metrics?|perfect|max\w*|grading|evaluation|"
        rf"{_CRITERIA})|\b(?:received|earned|got|achieved|awarded)\s+(?:a\s+|the\s+)?(?:perfect|full|maximum|top|highest)"
        rf"\s+(?:scores?|marks?|ratings?|grades?)\b[^.\n]{{0,40}}?\b(?:metrics?|criteri\w*|rubric|{_CRITERIA}|"
        rf"evaluat\w*|assess\w*)|\bmeets? (?:every|all|each)\s+(?:rubric\s+|evaluation\s+|scoring\s+)?criteri|"
        rf"\bno (?:further|additional|more)\s+(?:grading|evaluation|scoring|assessment)\b", re.I)),
)
#: a decoded variant is searched only if it holds one of these (most decodings of ordinary text are noise)
HIDDEN_WORDS = ("score", "verdict", "rating", "judge", "evaluat", "grade", "rubric", "instruction")
SPACED = re.compile(r"\b(?:\w[ .\-]){3,}\w\b")
#: digits written for letters inside a word ("Sc0r3"), not numbers
LEET = re.compile(r"\b(?=\w*[A-Za-z])(?=\w*[013457])\w+\b")
LEET_LETTERS = str.maketrans("013457", "oieast")
BASE64 = re.compile(r"\b[A-Za-z0-9+/]{16,}={0,2}")



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
