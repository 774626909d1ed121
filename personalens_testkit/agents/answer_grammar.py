"""The grammar of a judge's answer: where its one value stands, and what may surround it.

An answer is read in exactly one of three shapes, and nothing is ever searched for:

1. **A JSON object** - the whole answer, after an optional ``<think>...</think>`` block, an
   optional ``<response>`` wrapper and an optional code fence. This is what every prompt asks
   for and what a constrained backend returns. A raw line break or tab inside one of its strings (JSON
   asks for ``\n``) is read as the character it is, as the paper's parser reads it: it moves no value.
2. **One JSON object in plain words** - exactly one object carrying the answer's key, and
   text outside it that holds no other JSON (a brace, a ``"key":``: an object nested in an
   answer cut off at its token limit is never read), no character with a numeric value, no
   number word, no true or false, no hedge or re-answer (maybe, possibly, could, higher, on
   reflection, ...); around a verdict, no yes, no, not, met, complete, failed.
   ``Here is my evaluation: {...}`` reads; ``I'd say 3 or 4: {...}`` does not.
3. **The paper's labels** - exactly one line that starts like an answer (``Personalization
   Score: 3``; ``Score``, ``Rating``, the dimension's name; ``VERDICT: True`` for a verdict;
   bullets and numbering around it), holding the value alone (``3/4`` and ``3 out of 4`` on the
   rubric's own scale, the level's own name - ``3 (Strong)`` -, bold marks, a closing period);
   plain words before it, and after it the reason (the paper's sections or prose), which may
   not answer again: no line that starts like a label, no label of this answer anywhere with
   any separator (seen through full-width and look-alike letters), no re-answer phrase.

Anything else is a :class:`GrammarError`: a second candidate (two objects with the key, two
label lines, a label and an object), a hedge or a qualifier on the answer line (``3 or
maybe 4``, ``3 (maybe 4)``, ``true, though arguably false``), an unknown word, a zero-width
character, a digit that is not ASCII, a key given twice in one object.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from .injection_patterns import LOOKALIKE, ZERO_WIDTH

#: at most this many places are tried as the start of a JSON object (bounds the work on hostile text)
MAX_JSON_STARTS = 2_000


class GrammarError(ValueError):
    """The answer is not in the grammar: the message says how."""


@dataclass(frozen=True)
class Shape:
    """What the answer is asked for: its key (``score``, ``verdict``, ``scores``), the names a label may
    carry before ``Score`` (the dimension's, lower case), the scale's top, and whether a label may give it."""

    key: str
    names: frozenset[str]
    top: int
    labelled: bool = True
    #: the key of the reason a labelled answer's section fills
    reason_key: str = "justification"
    #: the rubric whose level names may follow a labelled value (a key of :data:`LEVELS`)
    level_scale: str = ""


_THINK = re.compile(r"^\s*<think>.*?</think>", flags=re.DOTALL | re.IGNORECASE)
_RESPONSE = re.compile(r"^\s*<response>\s*(.*?)\s*</response>\s*$", flags=re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[A-Za-z]*[ \t]*\n(.*?)\n?[ \t]*```\s*$", flags=re.DOTALL)
#: what text around the answer may not hold: a word that gives or qualifies a value (any character with a numeric
#: value - 3, ３, Ⅳ, ⁴, ④, ¾ - is caught by :func:`_numeric`; a JSON fragment by :data:`_JSON_BIT`)
_VALUE_WORD = re.compile(
    r"\b(?:true|false|one|two|three|four|five|six|seven|eight|nine|ten|half|maybe|perhaps|possibly|probably|"
    r"arguably|likely|unsure|uncertain|not sure|either|instead|actually|rather|could|might|borderline|tentative(?:ly)?|"
    r"higher|lower|leaning|reconsider\w*|on (?:second thought|reflection))\b", flags=re.IGNORECASE)
#: ... and, around a verdict, the words that give one
_VERDICT_WORD = re.compile(r"\b(?:yes|no|nope|not|never|met|unmet|satisfied|complete|completed|incomplete|fails?|failed|"
                           r"opposite)\b|[\u2705\u2714\u2713\u274c\u2716\u2717\u2718]", flags=re.IGNORECASE)
#: a piece of JSON outside the one object: another object's brace, a key
_JSON_BIT = re.compile(r'[{}]|"\s*[\w ]+\s*"\s*:')
_DECOR = r"[\s*_#>`\-+\u2022\u00b7\u2013\u2014|]*(?:\(?[0-9]{1,2}[.)]\s*)?[\s*_#>`\-+\u2022\u00b7|]*"
#: the start of a line that gives a labelled answer: "Score:", "**Personalization Score** =", "VERDICT:"
_LABEL_START = re.compile(rf"^{_DECOR}(?P<name>[A-Za-z][A-Za-z ]{{0,40}}?\s+)?(?P<key>score|rating|verdict)"
                          rf"[\s*_`]*[:=]", flags=re.IGNORECASE)
#: a line that starts as an answer would, whatever follows ("Score 4", "1. Rating - 4", "• Verdict → False")
_LINE_LABEL = re.compile(rf"^{_DECOR}(?:[A-Za-z][A-Za-z ]{{0,40}}?\s+)?(?:score|rating|verdict)s?\b", re.IGNORECASE)
#: a level's own name after its value: "3 (Strong)", "4 - Mostly natural"
LEVELS = {
    "personalization": {1: "poor", 2: "basic", 3: "strong", 4: "exceptional"},
    "naturalness": {1: "highly unnatural", 2: "significantly unnatural", 3: "somewhat natural", 4: "mostly natural",
                    5: "fully natural"},
    "coherence": {1: "highly incoherent", 2: "significantly incoherent", 3: "somewhat coherent", 4: "mostly coherent",
                  5: "fully coherent"},
}
#: what re-answers inside a reason: "my score: 4", "on reflection ... 4", "I'd raise it to 4"
_REANSWER = re.compile(
    r"\b(?:(?:my|revised|updated|new|adjusted|corrected|real|true)\s+(?:score|rating|verdict)\b|on (?:second thought|"
    r"reflection)|i(?:'d| would| will)\s+(?:raise|lower|change|revise|adjust|settle|bump|go)|settle on|"
    r"(?:raise|lower|bump|change|revise|adjust)\s+(?:it|this|that|the score|my score)\s+(?:up |down )?to|"
    r"(?:make|call|mark|put|rate)\s+(?:it|that|this)\s+(?:a\s+|an\s+|as\s+)?(?:[0-9]|one|two|three|four|five|true|false)|"
    r"actually\b[^.\n]{0,20}\b[0-9])\b",
    re.IGNORECASE)


def payload(raw: str, shape: Shape) -> dict[str, Any]:
    """The answer's one JSON object (or the object a label line stands for); raises :class:`GrammarError`."""
    body = _unwrapped(raw)
    whole = _json(body)
    if whole is not _NOT_JSON:
        if not isinstance(whole, dict):
            raise GrammarError(f"the answer is JSON but not an object (expected an object with \"{shape.key}\")")
        return whole
    objects, outside = _objects(body, shape.key)
    if len(objects) > 1:
        raise GrammarError(f'the answer holds {len(objects)} JSON objects with "{shape.key}"; exactly one is expected')
    if objects:
        bit = _JSON_BIT.search(outside)
        if bit:
            raise GrammarError(f"the text outside the JSON object holds JSON too ({bit.group(0)!r}): an object cut "
                               "short, or another one; the answer must stand alone")
        _plain(outside, "outside the JSON object", shape)
        return objects[0]
    if not shape.labelled:
        raise GrammarError(f'no JSON object with "{shape.key}"')
    return _labelled(body, shape)


def _unwrapped(raw: str) -> str:
    body = _THINK.sub("", raw, count=1)
    response = _RESPONSE.match(body)
    body = response.group(1) if response else body
    fence = _FENCE.match(body)
    return (fence.group(1) if fence else body).strip()


_NOT_JSON = object()


def _json(text: str) -> Any:
    try:
        return _DECODER.decode(text)  # json.loads(text, object_pairs_hook=_unique_keys, strict=False), its decoder made once
    except GrammarError:
        raise
    except (ValueError, RecursionError):
        return _NOT_JSON


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    for name in names:
        if names.count(name) > 1:
            raise GrammarError(f'one JSON object gives "{name}" {names.count(name)} times')
    return dict(pairs)


#: how every JSON of an answer is read: a key given twice is an error, control characters in strings are kept
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, strict=False)


def _objects(text: str, key: str) -> tuple[list[dict[str, Any]], str]:
    """The JSON objects in ``text`` that carry ``key``, and the text outside them."""
    decoder = _DECODER
    found: list[dict[str, Any]] = []
    outside: list[str] = []
    position, tries = 0, 0
    start = text.find("{")
    while start != -1 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except GrammarError:
            raise
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and key in value:
            found.append(value)
            outside.append(text[position:start])
            position = end
        start = text.find("{", end)
    outside.append(text[position:])
    return found, " ".join(outside)


def _plain(text: str, where: str, shape: Shape) -> None:
    """Text around the answer gives no value and qualifies none."""
    match = (_numeric(text) or _VALUE_WORD.search(text) or _REANSWER.search(text)
             or (_VERDICT_WORD.search(text) if shape.key == "verdict" else None))
    if match:
        around = text[max(0, match.start() - 30): match.end() + 30].strip()
        raise GrammarError(f"the text {where} gives a value or qualifies one ({match.group(0)!r} in {around!r}): "
                           "the answer must stand alone")


class _Found:
    """A match-like hit: what was found, and where."""

    def __init__(self, text: str, start: int) -> None:
        self._text, self._start = text, start

    def group(self, _: int = 0) -> str:
        return self._text

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._start + len(self._text)


def _numeric(text: str) -> _Found | None:
    """The first character with a numeric value (a digit of any script, a Roman numeral, a superscript, ¾)."""
    for at, char in enumerate(text):
        if (char.isdigit() or char.isnumeric()) and unicodedata.numeric(char, None) is not None:
            return _Found(char, at)
    return None


def _folded(text: str) -> str:
    """Text as a reader sees it: compatibility forms folded (full-width letters and colons), look-alike letters
    made Latin, zero-width characters dropped - so a second answer cannot hide from the checks below."""
    return unicodedata.normalize("NFKC", text.translate(ZERO_WIDTH)).translate(LOOKALIKE)


def _labelled(body: str, shape: Shape) -> dict[str, Any]:
    lines = body.splitlines()
    at = [i for i, line in enumerate(lines) if _LINE_LABEL.match(_folded(line))]
    if not at:
        word, label = ("verdict", "VERDICT: True") if shape.key == "verdict" else ("score", "Score: N")
        raise GrammarError(f'no JSON object and no labelled {word} (expected a JSON object with "{shape.key}", or a '
                           f'line "{label}")')
    if len(at) > 1:
        shown = "; ".join(repr(lines[i].strip()[:60]) for i in at[:4])
        raise GrammarError(f"the answer gives {len(at)} labelled values ({shown}); exactly one is expected")
    index = at[0]
    value = _value(lines[index], shape)
    _plain("\n".join(lines[:index]), "before the answer line", shape)
    rest = _folded("\n".join(lines[index + 1:]))
    again = _again(shape).search(rest) or _REANSWER.search(rest)
    if again:
        raise GrammarError(f"the reason after the answer line answers again ({again.group(0).strip()!r}); exactly "
                           "one answer is expected")
    return {shape.key: value, shape.reason_key: _reason(lines[index + 1:])}


def _again(shape: Shape) -> re.Pattern[str]:
    """The answer's own label anywhere, with any separator: ``Personalization Score 4``, ``... Score - 4``,
    ``... Score is 4``, ``VERDICT → False`` (on folded text: a full-width colon or a Cyrillic letter is seen through)."""
    value = r"(?:is\s+|of\s+|was\s+)?\W{0,4}"
    if shape.key == "verdict":
        return re.compile(rf"\bverdict\b{value}(?:true|false|yes|no)\b", re.IGNORECASE)
    names = "|".join(sorted(shape.names))
    return re.compile(rf"\b(?:{names})\W{{0,3}}(?:score|rating)s?\b{value}(?:[0-9]|one|two|three|four|five)\b",
                      re.IGNORECASE)


def _value(line: str, shape: Shape) -> Any:
    start = _LABEL_START.match(line)
    if start is None:
        raise GrammarError(f"the line {line.strip()[:80]!r} starts like an answer but is not one (expected "
                           f"\"{'VERDICT: True' if shape.key == 'verdict' else 'Score: N'}\")")
    key = start.group("key").lower()
    name = " ".join((start.group("name") or "").lower().split())
    wanted = "verdict" if shape.key == "verdict" else "score"
    if (key == "verdict") != (wanted == "verdict") or (name and name.removeprefix("final ").removeprefix("overall ")
                                                       not in shape.names | {"final", "overall"}):
        raise GrammarError(f"the label {line.strip()[:60]!r} is not this answer's (expected "
                           f"{'VERDICT' if wanted == 'verdict' else 'a score'})")
    tail = line[start.end():]
    if wanted == "verdict":
        match = re.fullmatch(r"[\s*_`]*(true|false)[\s*_`]*\.?\s*", tail, flags=re.IGNORECASE)
        if match is None:
            raise GrammarError(f"the answer line {line.strip()[:80]!r} does not hold just True or False")
        return match.group(1).lower() == "true"
    match = re.fullmatch(rf"[\s*_`]*([0-9])[\s*_`]*(?:(?:/|out of)\s*{shape.top}[\s*_`]*)?"
                         rf"(?:(?:\(|[-\u2013\u2014:,]\s*)(?P<level>[A-Za-z ]+)\)?)?\.?\s*", tail, flags=re.IGNORECASE)
    if match is not None and match.group("level"):
        named = LEVELS.get(shape.level_scale, {}).get(int(match.group(1)))
        if named != " ".join(match.group("level").lower().split()):
            match = None  # a word after the value that is not the level's own name: a qualifier
    if match is None:
        raise GrammarError(f"the answer line {line.strip()[:80]!r} does not hold just one whole number "
                           f"(a hedge, a range, a qualifier or an unknown word)")
    return int(match.group(1))


def _reason(lines: list[str]) -> str:
    """The text of the justification (or explanation) section, else every section's text."""
    text = "\n".join(lines).strip()
    sections = re.split(r"(?im)^[\s*_#>`\-]*(justification|explanation)[\s*_`]*[:\-][ \t]*", text)
    if len(sections) >= 3:
        return sections[2].strip()
    return text
