"""What a run replays, records and checks, decided from its settings and the cassettes on disk.

- ``none`` (the default) and ``--rejudge`` only replay: the cases that have a cassette run,
  the others are left out (the header says how many and how to record them); none at all
  is an error, never a green run of zero cases.
- The live roles: none in ``none`` mode (nothing is started or contacted), the judge alone
  when re-judging, none in ``once`` mode when every case has its cassette, else all.
- A whole-run offline replay: nothing under test is live (see :attr:`ReplayPlan.checks_reproduction`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

from ..callsite import JUDGING_ROLES, ROLES
from ..data.models import Scenario, case_id
from ..errors import UsageError
from .cassettes import Cassettes, CassetteSettings
from .store import recorded_cases



@dataclass
class ReplayPlan:
    cassette_dir: Path
    assistant: str
    record_mode: str
    rejudge: bool
    judge: str
    repeat: int
    #: the assistant under test is a bot (called live in every mode)
    assistant_is_bot: bool
    #: every selected (scenario, try)
    all_cases: Sequence[tuple[Scenario, int]]
    #: how paths are shown (relative to the project root)
    shown: Callable[[Path], str] = str

    @cached_property
    def cassettes(self) -> Cassettes:
        return Cassettes(CassetteSettings(
            cassette_dir=self.cassette_dir, assistant=self.assistant, record_mode=self.record_mode,
            rejudge=self.rejudge, judge=self.judge, assistant_is_bot=self.assistant_is_bot,
        ))

    @cached_property
    def recorded(self) -> frozenset[str]:
        """The cases with a cassette when the run was planned."""
        return recorded_cases(self.cassettes.folder)

    def has_cassette(self, scenario: Scenario, repeat: int) -> bool:
        return case_id(scenario.scenario_id, repeat) in self.recorded

    @property
    def replays_only(self) -> bool:
        """Every case needs a recorded dialogue: an offline replay, or a re-judging."""
        return self.record_mode == "none" or self.rejudge

    @cached_property
    def runnable(self) -> list[tuple[Scenario, int]]:
        """The cases this run can execute: all of them, or, when only replaying, those with a cassette."""
        if not self.replays_only:
            return list(self.all_cases)
        return [(s, r) for s, r in self.all_cases if self.has_cassette(s, r)]

    @cached_property
    def live_roles(self) -> frozenset[str]:
        """The roles whose model calls may reach a live model (the others only replay)."""
        if self.record_mode == "none":
            return frozenset()
        if self.rejudge:
            return JUDGING_ROLES
        if self.record_mode == "once" and all(self.has_cassette(s, r) for s, r in self.all_cases):
            return frozenset()
        return frozenset(ROLES)

    def summary(self, reproduces: str = "") -> str:
        """One line for the run header: what replays, what records, and how to record the rest
        (``reproduces``: where the recorded results a whole-run replay must reproduce are)."""
        folder = self.cassettes.folder
        selected = len(self.all_cases)
        recorded = len(self.runnable) if self.replays_only else sum(self.has_cassette(s, r) for s, r in self.all_cases)
        what = "scenarios" if self.repeat == 1 else f"cases ({self.repeat} tries of each scenario)"
        if self.rejudge:
            judge = "from its cassettes" if self.record_mode == "none" else f"live ({self.judge}), record mode {self.record_mode}"
            return f"re-judging {recorded} of {selected} selected {what} recorded in {folder}; judge {judge}"
        if self.record_mode == "none":
            line = f"replaying {recorded} of {selected} selected {what} offline from {folder}"
            if selected - recorded:
                line += f"; record the other {selected - recorded} with --record-mode once (live models)"
            if self.checks_reproduction and reproduces:
                line += f"; each must reproduce its recorded result ({reproduces})"
            return line
        return f"record mode {self.record_mode}: {recorded} of {selected} selected {what} have a cassette in {folder}"

    def check_runnable(self) -> None:
        """A run that can execute nothing is an error, never a green run of zero cases."""
        if self.replays_only and self.all_cases and not self.runnable:
            what = "re-judge" if self.rejudge else "replay offline"
            raise UsageError(
                f"nothing to {what}: none of the {len(self.all_cases)} selected scenarios has a cassette in "
                f"{self.cassettes.folder}; record them with --record-mode once (live models), "
                "or choose another --cassette-dir or --assistant"
            )

    @property
    def checks_reproduction(self) -> bool:
        """A whole-run offline replay (nothing under test is live): cases must reproduce the recorded results."""
        return self.record_mode == "none" and not self.rejudge and not self.assistant_is_bot
