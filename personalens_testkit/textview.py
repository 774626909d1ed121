"""Text as a reader sees it: the one normalisation every check of untrusted text reads through.

The judge's answer grammar (:mod:`.agents.answer_grammar`) and the judge-injection filter
(:mod:`.agents.injection`) look at text through this view, so a second answer or a forged
label cannot hide from one of them by a spelling the other sees through:

- characters of Unicode's *format* category (zero-width spaces and joiners, bidi marks, the
  soft hyphen, the word joiner, the BOM...) and the other characters Unicode says are not seen
  (variation selectors, the combining grapheme joiner, Hangul fillers) are dropped;
- every line break Unicode knows (CR, VT, FF, the file/group/record separators, NEL, the line
  and paragraph separators) becomes ``\\n``;
- compatibility forms are folded (NFKC: full-width letters, digits and colons, ligatures,
  superscripts, circled digits) and a decimal digit of any script becomes its ASCII digit;
- Cyrillic and Greek letters that look like Latin ones become those (and look-alike hyphens
  ASCII's), and accents piled on a Latin letter are dropped.

:func:`seen_through` also says, for each character of the view, where it came from in the text, so
a span found in the view can be cut from the text itself.
"""

from __future__ import annotations

import functools
import re
import unicodedata

#: Cyrillic and Greek letters that look like Latin ones (what a look-alike attack uses), and the hyphens and minus
#: that look like ASCII's hyphen-minus
LOOKALIKE = str.maketrans(
    "АВЕКМНОРСТУХІЈЅаеорсухіјѕԁһԛԝ" "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαοριντκε" "\u2010\u2011\u2012\u2212",
    "ABEKMHOPCTYXIJSaeopcyxijsdhqw" "ABEZHIKMNOPTYXaopivtke" "----",
)
#: the characters Unicode says a reader does not see (Default_Ignorable_Code_Point) that are not of the format
#: category: the combining grapheme joiner, Hangul fillers, variation selectors, Mongolian ones, tag-block reserves
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2065\u3164\ufe00-\ufe0f\uffa0"
                        "\ufff0-\ufff8\U000e0000-\U000e0fff]")
#: the line breaks of Unicode other than ``\n`` (what ``str.splitlines`` splits on)
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: the characters the view may change: everything outside ASCII, and the ASCII line breaks other than ``\n``
_ASCII_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"
_CHANGED = re.compile(r"[^\x00-\x7f]+|[\r\x0b\x0c\x1c-\x1e]")


def seen(text: str) -> str:
    """``text`` as a reader sees it (see the module's text): :func:`seen_through`'s view, without the map back."""
    if text.isascii() and not any(char in text for char in _ASCII_BREAKS):
        return text
    return _CHANGED.sub(_seen_run, text)


def _seen_run(match: re.Match[str]) -> str:
    return "".join([seen_char(char) for char in match.group()])


def seen_through(text: str) -> tuple[str, list[int] | None]:
    """The view of ``text`` (see the module's text) and, for each character of it, where it came from (None: nothing
    was changed - the text is its own view)."""
    if text.isascii() and not _CHANGED.search(text):
        return text, None
    out: list[str] = []
    origin: list[int] = []
    done = 0  # unchanged stretches are copied whole; each other character is seen through
    for match in _CHANGED.finditer(text):
        start = match.start()
        out.append(text[done:start])
        origin.extend(range(done, start))
        for i in range(start, match.end()):
            for folded in seen_char(text[i]):
                out.append(folded)
                origin.append(i)
        done = match.end()
    out.append(text[done:])
    origin.extend(range(done, len(text)))
    return "".join(out), origin


@functools.lru_cache(maxsize=4096)
def seen_char(char: str) -> str:
    """One character as the view shows it: nothing, one character or several."""
    if char in LINE_BREAKS:
        return "\n"
    if unicodedata.category(char) == "Cf" or _IGNORABLE.match(char):
        return ""
    folded = unicodedata.normalize("NFKC", char)
    folded = "".join(str(unicodedata.decimal(c)) if not c.isascii() and unicodedata.decimal(c, None) is not None
                     else c for c in folded)
    return _unaccented(folded.translate(LOOKALIKE))


def _unaccented(text: str) -> str:
    """A Latin letter with accents piled on it ("ǵŕád́éŕ") as the plain letter, a lone combining accent as nothing;
    any other character as it is."""
    bare = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return bare if bare.isascii() else text  # a lone combining accent is dropped
