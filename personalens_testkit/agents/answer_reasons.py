"""What a judge's reasons may say around its one answer (see :mod:`.answer_grammar`): anything but another value.

A reason (a JSON reason field; a reason section after a label line) gives no value of the answer's kind
other than the answer's own: none after the answer's label (``Personalization: 4``), none ending a
statement (``Scratch that, 4.``, ``(possibly 4)``, ``oder 4``, ``I would raise this to 4.``,
``Wait, no. False.``), in any spelling the view sees through (``４``, ``٤``, ``⁴``, ``**4**``,
``4/4``, ``four``), and no JSON. A number inside a statement is the reason's own (``2 things``,
``the 5-star hotel``, ``6:30``, ``10/10 clarity``, ``In turn 2, ...``), and so is "one" naming a thing
(``the previous one.``, ``this one.``, ``a better one.``). The reasoning *before* an
answer may hold anything but a piece of another answer's JSON.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from ..textview import seen


class GrammarError(ValueError):
    """The answer is not in the grammar: the message says how."""

    #: whether the answer was free text (not one JSON object alone): the judge may be asked again, once
    free_text = True


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
    #: the answer's reason fields (its JSON keys, and the headings of its sections in the paper's layout)
    reasons: frozenset[str] = frozenset({"justification"})


def no_cut_answer(view: str, shape: Shape) -> None:
    """The reasoning before the answer holds anything but a piece of another answer's JSON (one cut short)."""
    found = re.search(rf'"{shape.key}"\s*:', view)
    if found:
        raise GrammarError(f"the text before the answer holds JSON ({view[found.start():found.start() + 30]!r}): an "
                           "answer cut short, or another one; exactly one answer is expected")


def reasons_answer_nothing(answer: dict[str, Any], shape: Shape) -> None:
    """Every reason field of ``answer`` is text (a list of texts for notes) that gives no other value."""
    for name in sorted(shape.reasons & set(answer)):
        value = answer[name]
        for item in value if isinstance(value, list) else [value]:
            if item is None:
                continue
            if not isinstance(item, str):
                raise GrammarError(f'"{name}" holds {json.dumps(item)[:60]}: a reason is text')
            gives_no_value(seen(item), f'"{name}"', shape, answer.get(shape.key))


def gives_no_value(view: str, where: str, shape: Shape, answer: Any) -> None:
    """A reason (seen through) gives no value of the answer's kind other than the answer's own: no JSON, none after
    the answer's label (``Personalization: 4``), none ending a statement (``Scratch that, 4.``, ``(possibly 4)``,
    ``oder 4``, ``I would raise this to 4.``)."""
    found = re.search(r"[{}]", view)
    if found:
        raise GrammarError(f"{where} holds JSON ({view[found.start():found.start() + 30]!r}): an answer cut short, or "
                           "another one; exactly one answer is expected")
    if shape.key == "scores":  # a turn-level reason tells how the scores develop ("from 2 to 4"): a list answers again
        found = re.search(r"\[\s*[0-9]", view)
    else:
        label, alone = _values(shape)
        found = next((m for m in label.finditer(view) if _other_value(m, shape, answer)), None) or next(
            (m for m in alone.finditer(view) if _other_value(m, shape, answer) and not _pronoun(view, m)), None)
    if found:
        around = view[max(0, found.start() - 30): found.end() + 30].strip()
        raise GrammarError(f"{where} answers again ({found.group(0).strip()!r} in {around!r}): only the answer "
                           "gives a value, once")


#: words right before "one" that make it name a thing, not a value: "this one", "no one", "the one"
DETERMINERS = frozenset({"the", "this", "that", "these", "those", "each", "every", "any", "no", "another", "which",
                         "what", "whichever", "my", "your", "his", "her", "its", "our", "their", "some", "either",
                         "neither", "one's"})
#: words that lead to a value rather than describe a thing ("to one", "possibly one"): not an adjective of "one"
LEADS = frozenset({"to", "of", "at", "as", "is", "was", "be", "being", "been", "from", "than", "or", "and", "nor",
                   "maybe", "possibly", "perhaps", "probably", "likely", "just", "only", "say", "like", "about",
                   "around", "nearly", "roughly", "exactly", "rather", "even", "it", "with", "make", "call", "give",
                   "gave", "given", "rate", "rated", "score", "scored", "scores", "rating", "ratings", "down", "up",
                   "lower", "raise", "then", "not", "now", "still", "a", "an"})


def _pronoun(view: str, match: re.Match[str]) -> bool:
    """Whether a value found is the word "one" naming a thing: right after a determiner ("the previous one.",
    "this one.", "no one."), or after a determiner and a word describing it ("a better one.", "the same one."),
    the words one space apart. "to one.", "make it one.", "Scratch that, one." and "a one." stay values."""
    if match.group("v").lower() != "one":
        return False
    words = re.search(r"(?:(?<![A-Za-z'])([A-Za-z']+)[ \t]+)?([A-Za-z']+)[ \t]+$", view[max(0, match.start() - 80):
                                                                               match.start()])
    if words is None:
        return False
    before, last = (words.group(1) or "").lower(), words.group(2).lower()
    return last in DETERMINERS or (before in DETERMINERS | {"a", "an"} and last not in LEADS | DETERMINERS)


_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "true": True, "yes": True, "false": False, "no": False}


def _other_value(match: re.Match[str], shape: Shape, answer: Any) -> bool:
    """Whether a value found is one of the answer's scale, and not the answer's own."""
    token = match.group("v").lower()
    if shape.key == "verdict":
        return _WORDS[token] is not answer
    number = _WORDS.get(token, int(token) if token.isdigit() else None)
    denominator = match.group("d")
    on_scale = number is not None and 1 <= number <= shape.top and denominator in (None, str(shape.top))
    return on_scale and not (type(answer) is int and number == answer)


@functools.cache
def _values(shape: Shape) -> tuple[re.Pattern[str], ...]:
    """Where a value of ``shape``'s kind stands as an answer: after the answer's own label, or ending a statement."""
    if shape.key == "verdict":
        value = r"(?P<v>true|false|yes|no)(?![A-Za-z0-9])(?P<d>)"
        label = r"\bverdict\b"
    else:
        value = (r"(?<![A-Za-z0-9])(?<!\d[.,:/])(?<![A-Za-z0-9]-)(?P<v>[0-9]+|one|two|three|four|five)"
                 r"(?:\s*(?:/|out\s+of)\s*(?P<d>[0-9]+))?(?![A-Za-z0-9])(?![.,:/]\d)(?!-[A-Za-z0-9])")
        label = rf"\b(?:{'|'.join(sorted(shape.names))})\b\W{{0,3}}(?:(?:score|rating)s?\b)?"
    alone = value if shape.key != "verdict" else r"(?<![A-Za-z0-9-])" + value
    return (re.compile(rf"{label}\W{{0,4}}(?:is\s+|of\s+|was\s+|=\s*)?\W{{0,4}}{value}", re.IGNORECASE),
            re.compile(rf"{alone}(?=[ \t*_`\"'\u00bb\u201d\u2019]*(?:[.!?;)\]\u2026\u3002\uff01\uff1f\u061f\u061b]|\n|$))",
                       re.IGNORECASE))
