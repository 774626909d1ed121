"""The grammar of a judge's answer: one answer, standing last, and nothing that answers again.

The rule is structural; no phrase is looked for. The answer is read through the view every check of
untrusted text uses (:mod:`personalens_testkit.textview`: format characters dropped, every line
break a ``\\n``, NFKC, digits of any script ASCII, look-alike letters Latin), so what it finds
cannot hide behind a spelling.

1. **One answer.** The answer's candidates are the JSON objects that carry its key (``score``,
   ``verdict``, ``scores``) and the lines that start like a label (``Personalization Score:``,
   ``Rating``, ``VERDICT``; bullets and numbering around it). There is exactly one: two
   objects, two label lines, a label and an object are an error, whatever they say.
2. **It stands last.** Text before it is the judge's reasoning and may hold anything else
   ("the 6:30 alarm", "2 things", "3 or 4?"). After it comes nothing: after an object, only
   the closers of its wrapper (a code fence, ``</response>``, bold marks); after a label line,
   only the answer's own reason sections (``Justification:``, ``Key Observations:``,
   ``Explanation:``...), the paper's layout. A wrapper around the whole answer
   (``<think>...</think>`` first, ``<response>``, a code fence) is taken off first.
3. **Its value is exact.** A label line holds the value alone (``3``, ``3/4``, ``3 out of 4``,
   the level's own name ``3 (Strong)``, bold marks, a closing period; ``True`` or ``False``)
   in ASCII; an object gives each key once, with a value of the schema's exact type.
4. **Its reasons do not answer.** A reason (a JSON reason field, a reason section) gives no
   value of the answer's kind: no label of it with a value, no JSON, no value that ends a
   statement (``Scratch that, 4.``, ``(possibly 4)``, ``oder 4``, ``Wait, no. False.``). A
   number inside a statement is a reason's (``2 things``, ``5 stars``, ``6:30``).

Anything else is a :class:`GrammarError`, never a guessed score.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..textview import seen
from .answer_reasons import GrammarError, Shape, gives_no_value, no_cut_answer, reasons_answer_nothing

#: at most this many places are tried as the start of a JSON object (bounds the work on hostile text)
MAX_JSON_STARTS = 2_000


_THINK = re.compile(r"^\s*<think>.*?</think>", flags=re.DOTALL | re.IGNORECASE)
_RESPONSE = re.compile(r"^\s*<response>\s*(.*?)\s*</response>\s*$", flags=re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[A-Za-z]*[ \t]*\n(.*?)\n?[ \t]*```\s*$", flags=re.DOTALL)
#: what may follow the answer's object: the closers of a wrapper, and nothing else
_CLOSERS = re.compile(r"(?:\s|`|\*|_|</[A-Za-z]+>)*")
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
def payload(raw: str, shape: Shape) -> dict[str, Any]:
    """The answer's one JSON object (or the object its label line stands for); raises :class:`GrammarError`."""
    body = _unwrapped(raw)
    try:
        whole = _json(body)
        if whole is not _NOT_JSON:
            if not isinstance(whole, dict):
                raise GrammarError(f"the answer is JSON but not an object (expected an object with \"{shape.key}\")")
            reasons_answer_nothing(whole, shape)
            return whole
    except GrammarError as exc:
        exc.free_text = False  # one JSON object, as asked: its answer stands as given
        raise
    lines = body.splitlines()  # every Unicode line break
    view_lines = [seen(line) for line in lines]
    objects = _objects(seen(body), shape.key)[0]
    labels = [i for i, line in enumerate(view_lines) if _LINE_LABEL.match(line)] if shape.labelled else []
    count = len(objects) + len(labels)
    if count == 0:
        if not shape.labelled:
            raise GrammarError(f'no JSON object with "{shape.key}"')
        word, label = ("verdict", "VERDICT: True") if shape.key == "verdict" else ("score", "Score: N")
        raise GrammarError(f'no JSON object and no labelled {word} (expected a JSON object with "{shape.key}", or a '
                           f'line "{label}")')
    if count > 1:
        shown = [json.dumps(o)[:60] for o in objects[:2]] + [lines[i].strip()[:60] for i in labels[:2]]
        raise GrammarError(f"the answer gives {count} answers ({'; '.join(repr(s) for s in shown)}); exactly one "
                           "is expected")
    if objects:
        return _last_object(body, shape)
    return _labelled(lines, view_lines, labels[0], shape)


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


def _objects(text: str, key: str) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """The JSON objects in ``text`` that carry ``key`` (at any depth of nesting), and where each stands."""
    found: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    start, tries = text.find("{"), 0
    while start != -1 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except GrammarError:
            raise
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and _carries(value, key):
            found.append(value)
            spans.append((start, end))
        start = text.find("{", end)
    return found, spans


def _carries(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_carries(v, key) for v in value.values())
    return isinstance(value, list) and any(_carries(v, key) for v in value)


def _last_object(body: str, shape: Shape) -> dict[str, Any]:
    """The answer's one object, read from the text as written, with nothing after it but a wrapper's closers."""
    objects, spans = _objects(body, shape.key)
    if len(objects) != 1 or shape.key not in objects[0]:
        raise GrammarError(f'the answer\'s JSON object with "{shape.key}" is not written in plain JSON (braces, '
                           "quotes or keys outside ASCII, or its key nested in another object)")
    after = seen(body[spans[0][1]:])
    if not _CLOSERS.fullmatch(after):
        raise GrammarError(f"text follows the answer's JSON object ({after.strip()[:60]!r}): the answer must be "
                           "the last thing the judge writes")
    no_cut_answer(seen(body[:spans[0][0]]), shape)
    reasons_answer_nothing(objects[0], shape)
    return objects[0]


def _labelled(lines: list[str], view_lines: list[str], index: int, shape: Shape) -> dict[str, Any]:
    """The answer of the one label line at ``index``: its value, then nothing but the answer's reason sections."""
    if any(not char.isascii() and (char.isdigit() or char.isnumeric()) for char in lines[index]):
        raise GrammarError(f"the answer line {lines[index].strip()[:80]!r} holds a digit outside ASCII")
    value = _value(view_lines[index], shape)
    no_cut_answer("\n".join(view_lines[:index]), shape)
    sections = _sections(view_lines[index + 1:], shape)
    for name, text in sections.items():
        gives_no_value(text, f"the {name} section", shape, value)
    reason = sections.get(shape.reason_key) or "\n\n".join(sections.values())
    return {shape.key: value, shape.reason_key: reason}


def _heading(shape: Shape) -> re.Pattern[str]:
    """A reason section's heading: ``Justification:``, ``**Key Observations**:``, ``EXPLANATION -``."""
    names = "|".join(sorted(shape.reasons))
    return re.compile(rf"^[\s*_#>`\-]*(?:[A-Za-z]+\s+)?(?P<name>{names})(?:[\s*_`]*[:\-][ \t]*|[\s*_`#]*$)",
                      re.IGNORECASE)


def _sections(lines: list[str], shape: Shape) -> dict[str, str]:
    """The reason sections after the answer line, by name; any other text there is a :class:`GrammarError`."""
    heading = _heading(shape)
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        start = heading.match(line)
        if start:
            current = sections.setdefault(start.group("name").lower(), [])
            current.append(line[start.end():])
        elif current is not None:
            current.append(line)
        elif line.strip():
            raise GrammarError(f"text follows the answer line ({line.strip()[:60]!r}): after the answer come only "
                               f"its {', '.join(sorted(shape.reasons))} sections")
    return {name: "\n".join(body).strip() for name, body in sections.items()}


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
