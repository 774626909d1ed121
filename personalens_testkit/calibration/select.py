"""A slice of the calibration set that covers every variant: one dialogue of each variant, then a second of
each, and so on - so a small slice (CI's) still holds every level of every dimension."""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from .dataset import CalibrationDialogue


def balanced_slice(dialogues: Sequence[CalibrationDialogue], size: int | None) -> list[CalibrationDialogue]:
    if size is None or size >= len(dialogues):
        return list(dialogues)
    by_variant: dict[str, list[CalibrationDialogue]] = defaultdict(list)
    for dialogue in dialogues:
        by_variant[dialogue.variant].append(dialogue)
    order: list[CalibrationDialogue] = []
    for rank in range(max(len(group) for group in by_variant.values())):
        order += [group[rank] for group in by_variant.values() if rank < len(group)]
    return order[:size]
