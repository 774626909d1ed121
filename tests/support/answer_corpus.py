"""Judge answers composed by the thousand: a valid answer, then a second answer made of a value, a connector, a
position, a separator, a language and a wrapper (hostile: must never be read as a score); and valid answers whose
reasoning and reasons are full of numbers (benign: must be read as their one value).

``compose(choose)`` takes a chooser (``random.Random.choice`` in bench/judge_answers.py, a hypothesis draw in
tests/test_answer_grammar.py), so both walk the same space.
"""

from __future__ import annotations

import json
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
Choose = Callable[[Sequence[T]], T]

#: what the answer is: its kind (as bench/judge_answers.py names them), its scale, how its label reads
KINDS = {
    "personalization": ("score", (1, 2, 3, 4), "Personalization Score"),
    "coherence_user": ("score", (1, 2, 3, 4, 5), "Coherence Score"),
    "naturalness_assistant": ("score", (1, 2, 3, 4, 5), "Naturalness Rating"),
    "task_completion": ("verdict", (True, False), "VERDICT"),
}
#: how a second value may be spelled
SPELLINGS = ["{v}", "**{v}**", "({v})", "[{v}]", '"{v}"', "`{v}`", "{v}/{top}", "{v} out of {top}", "{w}", "{W}",
             "{full}", "{arabic}", "{sup}", "{circled}", "_{v}_"]
#: what leads to it, in several languages ("" : the value alone)
CONNECTORS = ["", "or", "or maybe", "maybe", "possibly", "perhaps", "(possibly", "Wait, no.", "Scratch that,",
              "Actually,", "Actually, make it", "On reflection,", "on second thought", "I'd say", "I would go with",
              "let's call it", "-> ", "<- too high?", "=>", "if not", "arguably", "or rather", "hmm,", "Correction:",
              "Personalization:", "Score:", "Final score:", "Rating =", "revised:", "oder", "oder vielleicht", "ou",
              "ou peut-être", "o", "o quizás", "vielleicht", "eher", "或者", "也许", "たぶん", "или", "может быть",
              "أو", "of misschien", "forse", "talvez"]
#: where it stands
POSITIONS = ["same line", "next line", "after a blank line", "after the answer", "reason end", "reason alone",
             "own section", "after the sections"]
#: what separates it from what comes before
SEPARATORS = [" ", "\n", "\r\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\t", "\u00a0", " \u200b", "\u3000",
              "  \n\n"]
#: how the whole answer is given
FORMS = ["json", "json lead-in", "fenced", "label", "label sections", "response label", "think json"]
ENDS = ["", ".", "!", "?", ")", " .", "。"]

_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _spelled(value, top: int, spelling: str) -> str:
    if isinstance(value, bool):
        word = "true" if value else "false"
        return spelling.replace("{v}/{top}", word).replace("{v} out of {top}", word).format(
            v=word, w=word, W=word.upper(), full=word, arabic=word, sup=word, circled=word, top=top)
    return spelling.format(v=value, top=top, w=_WORDS[value], W=_WORDS[value].capitalize(),
                           full=chr(0xFF10 + value), arabic=chr(0x0660 + value), sup="¹²³⁴⁵"[value - 1],
                           circled=chr(0x245F + value))


def answer_text(kind: str, value, form: str, reason: str, *, lead: str = "") -> str:
    """A valid answer of ``kind`` giving ``value`` in ``form``, with ``reason`` as its reason."""
    key, _, label = KINDS[kind]
    reason_key = "explanation" if key == "verdict" else "justification"
    shown = (("True" if value else "False") if key == "verdict" else str(value))
    if form.startswith("json") or form in ("fenced", "think json"):
        body = json.dumps({key: value, reason_key: reason}, ensure_ascii=False)
        if form == "fenced":
            body = "```json\n" + body + "\n```"
        if form == "json lead-in":
            body = (lead or "Here is my evaluation:") + "\n" + body
        if form == "think json":
            body = "<think>Let me weigh it: 2 things were missed, the 6:30 alarm was set.</think>\n" + body
        return (lead + "\n" if lead and form != "json lead-in" else "") + body
    line = f"{label}: {shown}"
    if form == "label":
        return (lead + "\n" if lead else "") + line
    if form == "response label":
        return "<response>\n" + (lead + "\n" if lead else "") + line + f"\n{reason_key.capitalize()}: {reason}\n</response>"
    return (lead + "\n" if lead else "") + line + f"\n{reason_key.capitalize()}: {reason}"


def hostile(choose: Choose) -> tuple[str, str]:
    """(kind, raw): a valid answer and, somewhere after its value, a second, different one."""
    kind = choose(list(KINDS))
    key, scale, label = KINDS[kind]
    value = choose(list(scale))
    other = choose([v for v in scale if v != value])
    second = _spelled(other, max(scale) if key == "score" else 1, choose(SPELLINGS))
    connector, separator, end = choose(CONNECTORS), choose(SEPARATORS), choose(ENDS)
    if connector.startswith("(") and not end:
        end = ")"
    again = (connector + (" " if connector else "") + second + end).strip()
    form, position = choose(FORMS), choose(POSITIONS)
    reason = "The assistant used what it knew."
    if position in ("reason end", "reason alone"):
        form = "label sections" if form == "label" else form
        reason = (reason + separator + again) if position == "reason end" else again
        return kind, answer_text(kind, value, form, reason)
    if position == "own section":
        name = "Explanation" if key == "verdict" else choose(["Justification", "Key Observations", "Suggestions"])
        if form.startswith("label") or form == "response label":
            return kind, answer_text(kind, value, "label", "") + f"\n{name}: {again}"
    base = answer_text(kind, value, form, reason)
    if position == "same line" and form.startswith("label"):
        lines = base.split("\n")
        index = next(i for i, line in enumerate(lines) if line.startswith(label))
        lines[index] += separator.replace("\n", " ") + again
        return kind, "\n".join(lines)
    glue = {"next line": "\n", "after a blank line": "\n\n"}.get(position, separator)
    return kind, base + glue + again


#: reasoning a judge may write before its answer: numbers of every kind, hedges, the level it weighed
LEADS = ["", "The user wanted 2 things: the 6:30 alarm and the soft tone.", "I weighed a 3 against a 4 here.",
         "Maybe 4 at first sight, but the history says otherwise.", "It set the 7:45 alarm; 1 of 3 preferences used.",
         "Rated 5 stars by 3 reviewers, booked for 2 at 19:30.", "Step 1: read the profile. Step 2: read the dialogue.",
         "Between 2 and 3; reading again.", "There were 10 turns, 4 of them about the seat.", "Summary (turn 2 and 3):"]
#: a judge's reason: numbers inside statements (times, counts, ratings of things, turn numbers mid-sentence)
REASONS = ["The assistant set the 6:30 alarm without asking, as the user prefers.",
           "It remembered 2 of the 3 stored preferences and asked once about the seat.",
           "In turn 2, the assistant offered the 5-star hotel the user always books.",
           "The booking for 2 people at 7:30 pm was confirmed in the last turn.",
           "It suggested the 10/10 rated podcast episode and the usual 45-minute running playlist.",
           "The user had to repeat the vegetarian preference 3 times before it was used.",
           "Replies of 1-2 sentences kept the exchange natural.",
           "Over 4 turns the assistant kept every detail consistent, including the 2024 trip.",
           "It chose the 3rd row aisle seat and the 8:15 departure from past trips.",
           "A score of 3 fits: it applied the known genre preference but missed the budget.",
           "The final price of 120 USD matched the user's budget of 150 USD."]


def benign(choose: Choose) -> tuple[str, str, object]:
    """(kind, raw, value): a valid answer, reasoning before it and reasons full of numbers."""
    kind = choose(list(KINDS))
    key, scale, _ = KINDS[kind]
    value = choose(list(scale))
    form = choose(FORMS)
    lead = choose(LEADS)
    reason = " ".join([choose(REASONS), choose(REASONS)])
    return kind, answer_text(kind, value, form, reason, lead=lead), value


#: reasons that end a statement with a number: to a reader, a turn or a count; to the grammar, another value
ENDING = ["The user had to restate the seat preference in turn {n}.", "It asked for the time again (turn {n}).",
          "Preferences applied: {n}.", "The alarm was set for {n}.", "The party was for {n}!"]


def ending_with_a_number(choose: Choose) -> tuple[str, str, object]:
    """(kind, raw, value): a valid answer whose reason ends a statement with a number of the scale."""
    kind = choose([k for k in KINDS if KINDS[k][0] == "score"])
    _, scale, _ = KINDS[kind]
    value = choose(list(scale))
    reason = choose(REASONS) + " " + choose(ENDING).format(n=choose(list(scale)))
    return kind, answer_text(kind, value, choose(FORMS), reason), value
