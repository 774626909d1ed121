"""``kind = "reference"``: the paper's reference assistant on any model (the built-in ``reference`` is one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Literal, Optional

from ..entries import Entry
from . import AssistantKind

if TYPE_CHECKING:
    from ..base import Assistant
    from ..build_context import BuildContext


class ReferenceEntry(Entry):
    """The paper's reference assistant on any model (a spec or a [models] name)."""

    kind: Literal["reference"]
    model: str = "local"
    #: the paper's prompt variant: claude, llama or mistral (None: chosen by the model's family, as the paper does)
    prompt: Optional[Literal["claude", "llama", "mistral"]] = None


def reference_variant(entry: ReferenceEntry, describe: Callable[[str], str] = str) -> str:
    """The reference assistant's prompt variant: the entry's, or the one for its model's family."""
    from ..reference import variant_for

    return entry.prompt or variant_for(describe(entry.model))


def build(name: str, entry: ReferenceEntry, ctx: BuildContext) -> Assistant:
    from ..reference import ReferenceAssistant

    return ReferenceAssistant(ctx.model(entry.model, "assistant"), context=entry.switches(), name=name,
                              variant=reference_variant(entry, ctx.describe), reply_cut=ctx.reply_cut)


KIND = AssistantKind("reference", ReferenceEntry, build, is_bot=False, order=0)
