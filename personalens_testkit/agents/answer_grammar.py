"""The grammar of a judge's answer: where its one value stands, and what may surround it.

An answer is read in exactly one of three shapes, and nothing is ever searched for:

1. **A JSON object** - the whole answer, after an optional ``<think>...</think>`` block, an
   optional ``<response>`` wrapper and an optional code fence. This is what every prompt asks
   for and what a constrained backend returns.
2. **One JSON object in plain words** - exactly one object carrying the answer's key, and
   text outside it that gives or qualifies no value: no digit, no number word, no true or
   false, no hedge (maybe, possibly, arguably, between, actually, ...), no "final"; around
   a verdict, no yes, no, met, complete, failed. ``Here is my evaluation: {...}`` reads;
   ``I'd say 3 or 4: {...}`` does not.
3. **The paper's labels** - exactly one line ``Personalization Score: 3`` (``Score``,
   ``Rating``, the dimension's name before it; ``VERDICT: True`` for a verdict) holding
   the value alone (``3/4`` and ``3 out of 4`` on the rubric's own scale, bold marks and a
   closing period allowed); plain words before it, and after it only the paper's sections
   (``Justification:``, ``Key Observations:``, ``Explanation:``, ...), whose text is a reason
   and never a value - but may not repeat the answer's own label (``Personalization Score:``,
   ``VERDICT:``) anywhere.

Anything else is a :class:`GrammarError`: a second candidate (two objects with the key, two
label lines, a label and an object), a hedge or a qualifier on the answer line (``3 or
maybe 4``, ``3 (maybe 4)``, ``true, though arguably false``), an unknown word, a zero-width
character, a digit that is not ASCII, a key given twice in one object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

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


_THINK = re.compile(r"^\s*<think>.*?</think>", flags=re.DOTALL | re.IGNORECASE)
_RESPONSE = re.compile(r"^\s*<response>\s*(.*?)\s*</response>\s*$", flags=re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[A-Za-z]*[ \t]*\n(.*?)\n?[ \t]*```\s*$", flags=re.DOTALL)
#: what text around the answer may not hold: a digit of any script, or a word that gives or qualifies a value
_VALUE_WORD = re.compile(
    r"\d|\b(?:true|false|final|finally|one|two|three|four|five|six|seven|eight|nine|ten|half|maybe|perhaps|possibly|"
    r"probably|arguably|likely|unsure|either|between|instead|actually|rather)\b", flags=re.IGNORECASE)
#: ... and, around a verdict, the words that give one
_VERDICT_WORD = re.compile(r"\b(?:yes|no|not|met|unmet|satisfied|complete|completed|incomplete|fails?|failed)\b",
                           flags=re.IGNORECASE)
_DECOR = r"[\s*_#>`\-]*"
#: the start of a line that gives a labelled answer: "Score:", "**Personalization Score** =", "VERDICT:"
_LABEL_START = re.compile(rf"^{_DECOR}(?P<name>[A-Za-z][A-Za-z ]{{0,40}}?\s+)?(?P<key>score|rating|verdict)"
                          rf"{_DECOR}\s*[:=]", flags=re.IGNORECASE)
_SECTION = re.compile(r"^[\s*_#>`\-]*(key observations|observations|justification|explanation|reasoning|reason|"
                      r"improvement suggestions|suggestions for improvement|suggestions)[\s*_`]*[:\-]", flags=re.I)


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
        return json.loads(text, object_pairs_hook=_unique_keys)
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


def _objects(text: str, key: str) -> tuple[list[dict[str, Any]], str]:
    """The JSON objects in ``text`` that carry ``key``, and the text outside them."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
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
    match = _VALUE_WORD.search(text) or (_VERDICT_WORD.search(text) if shape.key == "verdict" else None)
    if match:
        around = text[max(0, match.start() - 30): match.end() + 30].strip()
        raise GrammarError(f"the text {where} gives a value or qualifies one ({match.group(0)!r} in {around!r}): "
                           "the answer must stand alone")


def _labelled(body: str, shape: Shape) -> dict[str, Any]:
    lines = body.splitlines()
    at = [i for i, line in enumerate(lines) if _LABEL_START.match(line)]
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
    rest = [line for line in lines[index + 1:] if line.strip()]
    again = _again(shape).search("\n".join(rest))
    if again:
        raise GrammarError(f"the answer gives its label a second time ({again.group(0).strip()!r} after the answer "
                           "line); exactly one is expected")
    if rest and not _SECTION.match(rest[0]):
        raise GrammarError(f"after the answer line comes {rest[0].strip()[:60]!r}, not a section such as "
                           "'Justification:'")
    return {shape.key: value, shape.reason_key: _reason(lines[index + 1:])}


def _again(shape: Shape) -> re.Pattern[str]:
    """The answer's own label anywhere in a line: ``Personalization Score: 4`` mid-sentence, ``VERDICT: True``."""
    if shape.key == "verdict":
        return re.compile(r"\bverdict\W{0,3}[:=]\W{0,3}(?:true|false)\b", re.IGNORECASE)
    names = "|".join(sorted(shape.names))
    return re.compile(rf"\b(?:{names})\W{{0,3}}(?:score|rating)\W{{0,3}}[:=]", re.IGNORECASE)


def _value(line: str, shape: Shape) -> Any:
    start = _LABEL_START.match(line)
    assert start is not None
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
    match = re.fullmatch(rf"[\s*_`]*([0-9])[\s*_`]*(?:(?:/|out of)\s*{shape.top}[\s*_`]*)?\.?\s*", tail,
                         flags=re.IGNORECASE | re.ASCII)
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
