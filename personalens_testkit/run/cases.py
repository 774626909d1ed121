"""Which cases a run executes: the selected scenarios, ``--repeat`` tries of each, this ``--shard``'s
slice, less what the ``--resume`` results already scored - rows this very run's set-up produced."""

from __future__ import annotations

from functools import cached_property
from typing import Callable

from ..data.loader import Dataset, open_dataset
from ..data.models import Scenario, case_id
from ..data.selection import select_scenarios
from ..errors import UsageError
from ..results.files import canonical_case, load_rows
from ..results.identity import RunIdentity, identity_difference, identity_value, identity_words
from ..results.rows import ResultRow
from ..settings import RunSettings


class RunCases:
    """``identity``: what produces this run's rows (asked once, when a ``--resume`` file is read)."""

    def __init__(self, settings: RunSettings, identity: Callable[[], RunIdentity]) -> None:
        self.settings = settings
        self._identity = identity
        #: the scored rows of the ``--resume`` file another set-up produced, dropped by --resume-mismatch rerun
        self.set_aside: list[ResultRow] = []
        #: why they were set aside (the first field that differs, as a line says it)
        self.set_aside_why = ""
        self.outside = 0

    @cached_property
    def identity(self) -> RunIdentity:
        """What produces this run's rows (each row carries it; a resumed row must have it)."""
        return self._identity()

    @cached_property
    def dataset(self) -> Dataset:
        return open_dataset(self.settings.data_path)

    @cached_property
    def selected(self) -> list[tuple[Scenario, int]]:
        """(scenario, try) of every selected scenario and ``--repeat`` try, in this ``--shard``."""
        s = self.settings
        cases = [(sc, r) for sc in select_scenarios(self.dataset, s.selection) for r in range(1, s.repeat + 1)]
        if s.shard is not None:
            i, n = s.shard
            cases = [case for k, case in enumerate(cases) if k % n == i - 1]
        return cases

    @cached_property
    def all(self) -> list[tuple[Scenario, int]]:
        """The selected cases (:attr:`selected`) not yet scored in the ``--resume`` results."""
        return [(sc, r) for sc, r in self.selected if case_id(sc.scenario_id, r) not in self.done]

    @cached_property
    def done(self) -> frozenset[str]:
        """The case ids the ``--resume`` results scored (kept rows: not run again)."""
        return frozenset(row.case_id for row in self.resumed)

    def is_done(self, scenario: Scenario, repeat: int) -> bool:
        """Whether the ``--resume`` results scored this case already (its row is kept; it does not run again)."""
        return case_id(scenario.scenario_id, repeat) in self.done

    @cached_property
    def resumed(self) -> list[ResultRow]:
        """The scored rows of the ``--resume`` results, one per case, the newest (errors are run again). A row
        that this run's set-up did not produce (see :class:`~..results.identity.RunIdentity`) is a UsageError
        naming the field, or with ``--resume-mismatch rerun`` is set aside and its case run again."""
        path = self.settings.resume
        if path is None:
            return []
        rows = [row for row in load_rows(path, what="--resume") if row.scored]
        wanted = {canonical_case(case_id(sc.scenario_id, r)): sc.scenario_id for sc, r in self.selected}
        # a row of another selection never joins this run; an edited id of a selected case is that case's
        scored = [row.model_copy(update={"scenario_id": wanted[canonical_case(row.case_id)]}) for row in rows
                  if canonical_case(row.case_id) in wanted]
        #: scored rows of cases this run does not select (another --domains, -k, --repeat or --shard; an edited id)
        self.outside = len(rows) - len(scored)
        ours = self.identity
        differing = [(row, identity_difference(row.identity, ours)) for row in scored]
        mismatched = [(row, field) for row, field in differing if field is not None]
        if not mismatched:
            return scored
        row, field = mismatched[0]
        why = _mismatch(row, field, ours, len(mismatched), len(scored))
        if self.settings.resume_mismatch != "rerun":
            raise UsageError(f"--resume {path}: {why} (field {field}): resume with the set-up that produced them, or "
                             "pass --resume-mismatch rerun to run those cases again")
        self.set_aside, self.set_aside_why = [row for row, _ in mismatched], why
        return [row for row, field in differing if field is None]

    def header_lines(self) -> list[str]:
        """What the shard and the resumed results leave to run (for the run header)."""
        s, lines = self.settings, []
        if s.shard is not None:
            lines.append(f"shard {s.shard[0]}/{s.shard[1]}: {len(self.all)} cases of this slice (join the shards' "
                         "results with `personalens merge`)")
        if s.resume is not None:
            kept = len(self.resumed)  # read first: it sets the rows set aside
            aside = f", {len(self.set_aside)} set aside to run again ({self.set_aside_why})" if self.set_aside else ""
            if self.outside:
                aside += f", {self.outside} left out (cases this run does not select)"
            lines.append(f"resuming {s.resume}: {kept} scored cases kept{aside}, {len(self.all)} to run")
        return lines


def _mismatch(row: ResultRow, field: str, ours: RunIdentity, count: int, total: int) -> str:
    """Why rows of a --resume file are not this run's, in words: the first of them, its first differing field."""
    rows = "the scored rows" if count == total else f"{count} of the {total} scored rows"
    if field == "identity":
        return f"{rows} carry no identity (written by an older testkit): nothing says this run's set-up produced them"
    words = identity_words(field)
    return (f"{rows} were produced by {words} {identity_value(row.identity, field)}, this run's is "
            f"{identity_value(ours, field)}")
