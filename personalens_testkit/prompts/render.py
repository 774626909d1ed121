"""Prompt templates (the ``*.txt`` files of this package) and the text blocks that fill them.

Layout rule for every prompt: the parts fixed for a scenario come first and the growing
dialogue last, so a server's prompt-prefix cache (llama.cpp, Bedrock) reuses the prefix.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from string import Template
from typing import Iterable, Mapping

from ..data.context import ScenarioContext
from ..llm.base import Message


@cache
def template(name: str) -> Template:
    text = (resources.files("personalens_testkit.prompts") / f"{name}.txt").read_text(encoding="utf-8")
    return Template(text)


@cache
def _pieces(name: str) -> tuple[tuple[str, str | None], ...] | None:
    """The template as (text, name of the value after it) pieces, read once with :class:`Template`'s own pattern;
    None for a template :meth:`Template.substitute` refuses (an invalid placeholder), which then says why."""
    whole, found, start = template(name), [], 0
    for match in whole.pattern.finditer(whole.template):
        if match.group("invalid") is not None:
            return None
        named = match.group("named") or match.group("braced")
        text = match.string[start:match.start()]
        found.append((text + "$", None) if named is None else (text, named))  # "$$" writes one "$"
        start = match.end()
    found.append((whole.template[start:], None))
    return tuple(found)


def fill(name: str, **values: str) -> str:
    """``template(name).substitute(**values)``, from the pieces read once: the same text, the same KeyError for a
    value not given."""
    pieces = _pieces(name)
    if pieces is None:
        return template(name).substitute(**values)
    return "".join(text if named is None else text + str(values[named]) for text, named in pieces)


def bullet_pairs(pairs: Iterable[tuple[str, object]]) -> str:
    return "\n".join(f"- {key}: {_value(value)}" for key, value in pairs)


def _value(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def demographics_block(ctx: ScenarioContext) -> str:
    return bullet_pairs(ctx.demographics.items())


def situation_block(ctx: ScenarioContext) -> str:
    return bullet_pairs(ctx.situation_pairs)


def preferences_block(ctx: ScenarioContext) -> str:
    """One bullet list for a single-domain task; one headed list per domain for a multi-domain task."""
    if len(ctx.preferences) == 1:
        (prefs,) = ctx.preferences.values()
        return bullet_pairs(prefs.items())
    return "\n\n".join(f"{domain}:\n{bullet_pairs(prefs.items())}" for domain, prefs in ctx.preferences.items())


def interactions_block(interactions: Mapping[str, str]) -> str:
    """Past-interaction summaries by domain: the summary itself for one domain, one tagged summary per domain otherwise."""
    if len(interactions) == 1:
        (summary,) = interactions.values()
        return summary.strip()
    return "\n".join(f"<{domain}>\n{summary.strip()}\n</{domain}>" for domain, summary in interactions.items())


_CONVERSATION_TAG = re.compile(r"</?\s*conversation\s*>", flags=re.IGNORECASE)


def dialogue_block(messages: Iterable[Message], *, style: str = "brackets") -> str:
    """Render turns one per line: ``[USER]: ...`` (``brackets``) or ``User: ...`` (``plain``).

    Text that would close or open the enclosing ``<conversation>`` block is neutralised,
    so a message can never step outside the data it is quoted in.
    """
    lines = []
    for message in messages:
        content = _CONVERSATION_TAG.sub(lambda m: m.group(0).replace("<", "&lt;"), message.content.strip())
        label = f"[{message.role.upper()}]" if style == "brackets" else message.role.capitalize()
        lines.append(f"{label}: {content}")
    return "\n".join(lines)


#: Where a model that runs past its own message starts writing another speaker's turn.
SPEAKER_STOPS = ("\n[USER]:", "\n[ASSISTANT]:", "\nUser:", "\nAssistant:")
_NEXT_SPEAKER = re.compile(r"\n\s*(?:\[?\s*(?:user|assistant)\s*\]?\s*:|</[a-z_]+>)", flags=re.IGNORECASE)


#: how a reply is kept when the model runs on past its own message: ``speaker`` (the default, ours) cuts it where the
#: model starts writing another speaker's turn (and asks the server to stop there); ``none`` keeps the text whole, as
#: the paper's code does (``src/generate_dialogue.py`` appends the model's text as it comes; ``--preset paper``)
REPLY_CUTS = ("speaker", "none")


def reply_stops(cut: str) -> tuple[str, ...]:
    """The stop sequences a reply is asked with under ``cut``."""
    return SPEAKER_STOPS if cut == "speaker" else ()


def kept_reply(text: str, cut: str) -> str:
    """A model's reply as the dialogue keeps it under ``cut`` (:data:`REPLY_CUTS`)."""
    return own_message(text) if cut == "speaker" else text.strip()


def own_message(text: str) -> str:
    """A reply as one speaker's message: no leading speaker label, nothing after it that the model
    invented (a next speaker's turn, or a closing tag copied from the prompt's layout)."""
    text = strip_speaker_label(text)
    match = _NEXT_SPEAKER.search(text)
    return (text[: match.start()] if match else text).strip()


_LEADING_LABEL = re.compile(r"^\s*\[?\s*(?:user|assistant)\s*\]?\s*:\s*", flags=re.IGNORECASE)


def strip_speaker_label(text: str) -> str:
    """Drop a speaker label a model may put before its message (``USER:``, ``[ASSISTANT]:``)."""
    return _LEADING_LABEL.sub("", text.strip(), count=1).strip()
