"""Which scenarios a run covers: sample, profiles, domains and task kind.

Precedence: ``profiles`` (explicit ids) replaces ``sample``; ``domains`` and ``task_kind``
then narrow the scenarios. A multi-domain task is kept by ``domains`` only when every one
of its domains is selected, so ``--domains Movies`` means "dialogues about Movies only".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError
from .loader import Dataset
from .models import DOMAINS, Scenario, TaskKind
from .samples import DEFAULT_SAMPLE, SAMPLE_CHOICES, SAMPLES

TASK_KIND_CHOICES = ("sd", "md", "both")


@dataclass(frozen=True)
class Selection:
    sample: str = DEFAULT_SAMPLE
    profiles: tuple[int, ...] | None = None
    domains: tuple[str, ...] | None = None
    task_kind: str = "both"

    def kinds(self) -> set[TaskKind]:
        return {TaskKind.SD, TaskKind.MD} if self.task_kind == "both" else {TaskKind(self.task_kind)}


def parse_profiles(text: str) -> tuple[int, ...]:
    """``"7,53"`` or ``"user7, user53"`` -> ``(7, 53)``."""
    numbers = []
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(?:user)?(\d+)", part, flags=re.IGNORECASE)
        if not match:
            raise UsageError(f"--profiles: {part!r} is not a profile id (expected numbers like 7,53 or user7,user53)")
        numbers.append(int(match.group(1)))
    if not numbers:
        raise UsageError("--profiles: expected at least one profile id, like 7,53")
    return tuple(dict.fromkeys(numbers))


def _domain_key(name: str) -> str:
    return re.sub(r"[\s_-]", "", name).lower()


_DOMAIN_BY_KEY = {_domain_key(d): d for d in DOMAINS}


def parse_domains(text: str) -> tuple[str, ...]:
    """``"movies, rental_cars"`` -> ``("Movies", "Rental Cars")``; case, spaces and ``_`` do not matter."""
    domains = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        domain = _DOMAIN_BY_KEY.get(_domain_key(part))
        if domain is None:
            raise UsageError(f"--domains: {part!r} is not a benchmark domain (one of: {', '.join(DOMAINS)})")
        domains.append(domain)
    if not domains:
        raise UsageError("--domains: expected at least one domain, like Movies,Music")
    return tuple(dict.fromkeys(domains))


def parse_sample(text: str) -> str:
    if text not in SAMPLE_CHOICES:
        raise UsageError(f"--sample: {text!r} is not a published sample (one of: {', '.join(SAMPLE_CHOICES)})")
    return text


def parse_task_kind(text: str) -> str:
    kind = text.lower()
    if kind not in TASK_KIND_CHOICES:
        raise UsageError(f"--task-kind: {text!r} is not one of {', '.join(TASK_KIND_CHOICES)}")
    return kind


def profile_numbers(dataset: Dataset, selection: Selection) -> list[int]:
    """The profile numbers a selection names, checked against what the dataset holds."""
    if selection.profiles is not None:
        wanted, option = list(selection.profiles), "--profiles"
    elif selection.sample == "all":
        return dataset.user_numbers()
    else:
        wanted, option = list(SAMPLES[selection.sample]), f"--sample {selection.sample}"
    missing = [n for n in wanted if not dataset.has_user(n)]
    if missing:
        shown = ", ".join(f"user{n}" for n in missing[:8]) + (" ..." if len(missing) > 8 else "")
        hint = (
            "; the bundled data holds the 50-profile sample only: pass --personalens-data DIR with a full upstream checkout"
            if dataset.bundled else ""
        )
        raise UsageError(f"{option}: {len(missing)} profile(s) not in {dataset.label}: {shown}{hint}")
    return sorted(wanted)


def select_scenarios(dataset: Dataset, selection: Selection) -> list[Scenario]:
    """Scenarios in a stable order: by profile number, then the order of the user's task files. Every file the
    selected scenarios read - each chosen user's task files and profile, the task catalogue - is read and checked
    here, before any case (``--collect-only`` included): a bad one is one :class:`DataError` naming the file, the
    line or field, and what is expected, never a case that fails or a line skipped."""
    kinds = selection.kinds()
    domains = set(selection.domains) if selection.domains else None
    chosen = []
    for number in profile_numbers(dataset, selection):
        found = [scenario for scenario in dataset.scenarios_for(number) if scenario.kind in kinds
                 and (domains is None or set(scenario.domains) <= domains)]
        if found:
            dataset.profile(found[0].user_id)
        chosen += found
    dataset.catalogue()
    return chosen
