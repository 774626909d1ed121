"""What a text must hold before a regular expression can match in it: a test of a few substring searches, run
before the expression's own scan, which tries the expression at every position of the text (the judge-injection
flags cost about a millisecond a kilobyte of reply; bench/README.md).

:func:`needs` reads the pattern as Python's own parser reads it (``re._parser``) and finds words every match
contains: the longest run of ASCII characters that a match must contain, or, where the pattern branches, one
such word for each branch (a text must hold one of them). Nothing is guessed, so the test is exact: it says no
only for a text the expression cannot match in. A pattern that needs no such word (every branch may match
without one) is always run.

Case: the text and the words are compared folded (:func:`fold`): ASCII letters in lower case, and the four
characters outside ASCII that a case-insensitive expression matches with an ASCII letter (dotted and dotless
I, long S, the Kelvin sign) as that letter. Folding both sides never turns a match into a miss, so the same
words serve case-sensitive patterns. A branch that must match a letter outside ASCII (a word in another script)
needs a character outside ASCII that has a case or another form - not the punctuation and spaces of
:data:`_CASELESS` (curly quotes, dashes), which match only themselves.
"""

from __future__ import annotations

import functools
import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any, Callable

#: the characters outside ASCII that a case-insensitive expression matches with an ASCII letter
_ASCII_LIKE = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}
_FOLD = str.maketrans({**{chr(c): chr(c + 32) for c in range(ord("A"), ord("Z") + 1)}, **_ASCII_LIKE})
_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT)}

#: the word that stands for "a character outside ASCII that has a case or another form" (see the module's text)
OTHER_LETTER = "\x00other letter"
#: characters outside ASCII that a case-insensitive expression matches only with themselves (spaces, punctuation)
_CASELESS = "\u00a0-\u00a9\u00ab-\u00b4\u00b6-\u00b9\u00bb-\u00bf\u2000-\u206f"
_OTHER_LETTER = re.compile(f"[^\x00-\x7f{_CASELESS}]")
#: such a character in a pattern stands in a word like an ASCII one: a text matched holds it as it is
_CASELESS_CHAR = re.compile(f"[{_CASELESS}]")


def fold(text: str) -> str:
    """``text`` as :func:`needs`'s words are compared with it (see the module's text)."""
    return text.translate(_FOLD)


@functools.cache
def needs(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """Words (folded) one of which is in every text ``pattern`` matches in; None: no such words."""
    return _sequence(_parser.parse(pattern.pattern, pattern.flags))


def may_match(pattern: re.Pattern[str], text: str, folded: str) -> bool:
    """False only where ``pattern`` cannot match in ``text`` (``folded``: its :func:`fold`)."""
    return prefilter(pattern)(text, folded)


@functools.cache
def prefilter(pattern: re.Pattern[str]) -> Callable[[str, str], bool]:
    """:func:`may_match` for one pattern, made once: ``(text, folded) -> bool``."""
    words = needs(pattern)
    if words is None:
        return lambda text, folded: True
    plain = tuple(word for word in words if word is not OTHER_LETTER)
    other = OTHER_LETTER in words

    def may(text: str, folded: str) -> bool:
        return any(map(folded.__contains__, plain)) or (other and _OTHER_LETTER.search(text) is not None)
    return may


def _sequence(items: Any) -> frozenset[str] | None:
    """The best set of words a sequence of parsed items needs: its longest literal run, or an item's own."""
    found: list[frozenset[str]] = []
    run: list[str] = []
    for op, value in list(items) + [(None, None)]:
        if op is C.LITERAL and (value < 128 or chr(value) in _ASCII_LIKE or _CASELESS_CHAR.fullmatch(chr(value))):
            run.append(chr(value))
            continue
        if run:
            found.append(frozenset({fold("".join(run))}))
            run = []
        inner = frozenset({OTHER_LETTER}) if op is C.LITERAL else _item(op, value)
        if inner is not None:
            found.append(inner)
    return max(found, key=_strength, default=None)


def _strength(words: frozenset[str]) -> tuple[int, int]:
    """How rarely a text holds one of ``words``: their shortest length, then fewer words. The stand-in for a letter
    outside ASCII counts as four characters: most replies hold none, as they hold few given four-letter words."""
    return min(4 if word is OTHER_LETTER else len(word) for word in words), -len(words)


def _item(op: Any, value: Any) -> frozenset[str] | None:
    if op is C.SUBPATTERN:
        return _sequence(value[-1])
    if op in _REPEATS:
        low, _high, inner = value
        return _sequence(inner) if low >= 1 else None
    if op is C.BRANCH:
        words: set[str] = set()
        for branch in value[1]:
            needed = _sequence(branch)
            if needed is None:
                return None  # a branch that needs no word: the alternation needs none
            words |= needed
        return frozenset(words)
    return None
