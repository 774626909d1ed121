"""What produced a result row, beyond its case: the one thing a row of another run must share with this run's to
stand for its case (``--resume``, ``personalens merge``)."""

from __future__ import annotations

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


#: How a one-line message names each field of an identity, in the order they are compared.
IDENTITY_FIELDS: dict[str, str] = {
    "assistant": "assistant", "assistant_kind": "assistant kind", "assistant_model": "assistant model",
    "assistant_prompt": "prompt variant", "assistant_context": "assistant context", "user_model": "user-agent model",
    "judge_model": "judge model", "data": "data", "floors": "per-scenario floors", "testkit": "testkit version",
}


def identity_difference(theirs: RunIdentity | None, ours: RunIdentity | None) -> str | None:
    """The first field (of :data:`IDENTITY_FIELDS`) in which two identities differ; ``identity`` when one of
    them is missing; None when they are equal (or both missing: nothing to tell them apart)."""
    if theirs is None or ours is None:
        return None if theirs is ours else "identity"
    return next((name for name in IDENTITY_FIELDS if getattr(theirs, name) != getattr(ours, name)), None)


#: the set-up fields a row states at its top level (rows of older testkits have nothing else to compare)
STATED_FIELDS = ("assistant", "assistant_kind", "assistant_model", "assistant_prompt", "assistant_context",
                 "user_model", "judge_model")


def stated_difference(one: Any, other: Any) -> str | None:
    """The first set-up field two rows state differently at their top level (None: the same)."""
    return next((name for name in STATED_FIELDS if getattr(one, name) != getattr(other, name)), None)


def identity_value(identity: RunIdentity | None, field: str) -> str:
    """A field of an identity as a message quotes it."""
    value = None if identity is None else getattr(identity, field, None)
    return "none" if value in (None, "") else f'"{value}"'
