"""What produced a result row, beyond its case: the one thing a row of another run must share with this run's to
stand for its case (``--resume``, ``personalens merge``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict


class RunIdentity(BaseModel):
    """What produced a row, beyond its case: the assistant, each role's model, the data, the floors that
    decided its status, the testkit. A row stands for a case of another run (``--resume``, ``personalens
    merge``) only when the two identities are equal; a row without one (an older testkit's) stands for none."""

    model_config = ConfigDict(extra="ignore")

    assistant: str
    assistant_kind: str
    #: the reference assistant's model and prompt variant (None for a bot), and the user context it sees
    assistant_model: Optional[str] = None
    assistant_prompt: Optional[str] = None
    assistant_context: str = ""
    #: each benchmark role's model as its spec (a [models] name resolved: renaming an entry changes nothing)
    user_model: str
    judge_model: str
    #: the data: the bundled sample or an upstream folder, and a fingerprint of its content
    data: str
    #: the per-scenario floors that decided the row's status (thresholds.yaml's ``scenario`` table)
    floors: str
    #: the testkit's version
    testkit: str
    #: every setting a case's scores may depend on (all but settings/table.NOT_IN_IDENTITY), by name: its resolved
    #: value as :func:`kept_value` keeps it (any value but a number or a flag as a digest: an address may hold a token)
    settings: dict[str, Optional[str]] = {}
    #: each role's model as it is reached: its spec and a digest of its whole resolved entry (its address included)
    endpoints: dict[str, str] = {}
    #: the bot's whole entry in the assistant catalogue, as a digest (its URL, command, callable, environment...);
    #: empty for the built-in reference assistant
    assistant_entry: str = ""


#: How a one-line message names each field of an identity, in the order they are compared.
IDENTITY_FIELDS: dict[str, str] = {
    "assistant": "assistant", "assistant_kind": "assistant kind", "assistant_model": "assistant model",
    "assistant_prompt": "prompt variant", "assistant_context": "assistant context", "user_model": "user-agent model",
    "judge_model": "judge model", "data": "data", "floors": "per-scenario floors", "testkit": "testkit version",
    "settings": "setting", "endpoints": "the endpoint of", "assistant_entry": "the bot's entry",
}


def digest(value: Any) -> str:
    """A value an identity keeps without showing it: ``#`` and 12 hex digits of the SHA-256 of its JSON."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return "#" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def kept_value(value: Any) -> str | None:
    """How an identity keeps a setting's value: None as None, a number or a flag as its JSON (``5``, ``true``: 1 and
    true stay apart), anything else as its digest."""
    if value is None or isinstance(value, (bool, int, float)):
        return None if value is None else json.dumps(value)
    return digest(value)


def identity_difference(theirs: RunIdentity | None, ours: RunIdentity | None) -> str | None:
    """The first field (of :data:`IDENTITY_FIELDS`) in which two identities differ - ``settings.max_turns``, for
    a field that holds several; ``identity`` when one of them is missing; None when they are equal (or both
    missing: nothing to tell them apart). In a field that holds several, a key one identity lacks is unset (None): a
    setting a later version added, off, is the older version's set-up (``--review-user`` not given is no review)."""
    if theirs is None or ours is None:
        return None if theirs is ours else "identity"
    for name in IDENTITY_FIELDS:
        one, other = getattr(theirs, name), getattr(ours, name)
        if one == other:
            continue
        if isinstance(one, dict):
            key = next((key for key in [*other, *one] if one.get(key) != other.get(key)), None)
            if key is None:
                continue
            return f"{name}.{key}"
        return name
    return None


#: the set-up fields a row states at its top level (rows of older testkits have nothing else to compare)
STATED_FIELDS = ("assistant", "assistant_kind", "assistant_model", "assistant_prompt", "assistant_context",
                 "user_model", "judge_model")


def stated_difference(one: Any, other: Any) -> str | None:
    """The first set-up field two rows state differently at their top level (None: the same)."""
    return next((name for name in STATED_FIELDS if getattr(one, name) != getattr(other, name)), None)


def identity_words(field: str) -> str:
    """How a message names a field (``settings.max_turns``: ``setting max_turns``)."""
    name, _, key = field.partition(".")
    return f"{IDENTITY_FIELDS[name]} {key}" if key else IDENTITY_FIELDS[name]


def identity_value(identity: RunIdentity | None, field: str) -> str:
    """A field of an identity (``settings.max_turns``: one of a field's entries) as a message quotes it."""
    name, _, key = field.partition(".")
    value = None if identity is None else getattr(identity, name, None)
    if key:
        value = value.get(key, "not set") if isinstance(value, dict) else None
    return "none" if value in (None, "") else f'"{value}"'
