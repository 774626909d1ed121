"""Which cases a run executes: the selected scenarios, ``--repeat`` tries of each, this ``--shard``'s
slice, less what the ``--resume`` results already scored."""

from __future__ import annotations

from functools import cached_property

from ..data.loader import Dataset, open_dataset
from ..data.models import Scenario, case_id
from ..data.selection import select_scenarios
from ..results.files import load_rows
from ..results.rows import ResultRow
from ..settings import RunSettings


class RunCases:
    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings

    @cached_property
    def dataset(self) -> Dataset:
        return open_dataset(self.settings.data_path)

    @cached_property
    def all(self) -> list[tuple[Scenario, int]]:
        """(scenario, try) of every selected scenario and ``--repeat`` try, in this ``--shard``, not yet
        scored in the ``--resume`` results."""
        s = self.settings
        cases = [(sc, r) for sc in select_scenarios(self.dataset, s.selection) for r in range(1, s.repeat + 1)]
        if s.shard is not None:
            i, n = s.shard
            cases = [case for k, case in enumerate(cases) if k % n == i - 1]
        if self.resumed:
            done = {row.case_id for row in self.resumed}
            cases = [(sc, r) for sc, r in cases if case_id(sc.scenario_id, r) not in done]
        return cases

    @cached_property
    def resumed(self) -> list[ResultRow]:
        """The scored rows of the ``--resume`` results (errors are run again)."""
        if self.settings.resume is None:
            return []
        return [row for row in load_rows(self.settings.resume, what="--resume") if row.scored]

    def header_lines(self) -> list[str]:
        """What the shard and the resumed results leave to run (for the run header)."""
        s, lines = self.settings, []
        if s.shard is not None:
            lines.append(f"shard {s.shard[0]}/{s.shard[1]}: {len(self.all)} cases of this slice (join the shards' "
                         "results with `personalens merge`)")
        if s.resume is not None:
            lines.append(f"resuming {s.resume}: {len(self.resumed)} scored cases kept, {len(self.all)} to run")
        return lines
