"""What the run records and replays (the replay plan and its cassettes), and what a replay must reproduce.

A run that records keeps its scored rows beside the cassettes (``<assistant>/results.jsonl``);
a whole-run offline replay - nothing under test live - must reproduce them exactly: its cases
pass when they do and fail naming the difference.
"""

from __future__ import annotations

import contextlib
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..callsite import JUDGING_ROLES
from ..data.models import Scenario, case_id
from ..errors import PersonalensError
from ..replay.cassettes import ScenarioCassettes
from ..replay.plan import ReplayPlan
from ..replay.store import assistant_dir
from ..results.fields import load_fields
from ..results.files import newest_per_case
from ..results.recorded import RESULTS_NAME, differences, existing, load_compared, merge_recorded
from ..results.rows import ResultRow
from ..settings import RunSettings
from .confirmation import Base, base_case

if TYPE_CHECKING:
    from ..evaluation import Evaluation
    from ..transcript_file import TranscriptAt


class Recording:
    def __init__(self, settings: RunSettings, all_cases: Sequence[tuple[Scenario, int]], *, assistant_is_bot: bool):
        self.settings = settings
        s = settings
        self.plan = ReplayPlan(
            cassette_dir=s.cassette_dir, assistant=s.assistant, record_mode=s.record_mode, rejudge=s.rejudge,
            judge=s.judge_model, repeat=s.repeat, assistant_is_bot=assistant_is_bot, all_cases=all_cases,
            shown=self.shown,
        )

    @property
    def live_roles(self) -> frozenset[str]:
        """The roles whose calls may reach a live model (``--judge-batch submit``: never the judging roles - their
        calls go to the batch engine at the end of the run)."""
        if self.settings.judge_batch == "submit":
            return self.plan.live_roles - JUDGING_ROLES
        return self.plan.live_roles

    def shown(self, path: Path) -> str:
        """A path as rows and lines show it: relative to the project root when inside it."""
        with contextlib.suppress(ValueError):
            return str(path.relative_to(self.settings.rootdir))
        return str(path)

    def transcript_shown(self, at: TranscriptAt | None, missing: str | None = "(not written)") -> str | None:
        """Where a case's transcript is, as rows and lines show it (``path:line``); ``missing`` when it was not
        written."""
        return missing if at is None else f"{self.shown(at.path)}:{at.line}"

    def summary(self) -> str:
        reproduces = self.shown(existing(self.recorded_path) or self.recorded_path) if self.recorded else ""
        return self.plan.summary(reproduces)

    # -- cassettes ------------------------------------------------------------------------------
    def for_case(self, scenario: Scenario, repeat: int, rerecord: str = "") -> ScenarioCassettes:
        return self.plan.cassettes.for_scenario(case_id(scenario.scenario_id, repeat),
                                                rerecord or self.rerecord_command(f"suites/ -k {scenario.scenario_id}"))

    def cassette_of(self, scenario: Scenario, repeat: int = 1) -> str:
        return self.shown(self.plan.cassettes.path(case_id(scenario.scenario_id, repeat)))

    def rerecord_command(self, target: str) -> str:
        """The command that re-records one case (``target``: its node id, quoted here)."""
        target = target if target.startswith("suites/ ") else f"'{target}'"
        line = f"pytest {target} --assistant {self.settings.assistant} --record-mode all"
        # what shapes a recording goes with it: a case recorded with two dialogues is recorded so again
        return line + (" --rerun-user-faults" if self.settings.rerun_user_faults else "") + (
            " --rejudge" if self.settings.rejudge else "")

    # -- recorded results ------------------------------------------------------------------------
    @property
    def recorded_path(self) -> Path:
        return assistant_dir(self.settings.cassette_dir, self.settings.assistant) / RESULTS_NAME

    @cached_property
    def recorded(self) -> dict[str, dict[str, Any]]:
        """The recorded rows' compared fields, by case id (only those are kept: 4,096 whole rows are ~60 MB)."""
        return load_compared(self.recorded_path) if self.plan.checks_reproduction else {}

    def differences(self, evaluation: Evaluation | ResultRow) -> list[str] | None:
        """In a whole-run replay of a recorded case: what differs from its recording (``[]``: reproduced); else None.
        A case's evaluation, or a scored row of it another run wrote (``--resume``), judged alike."""
        if isinstance(evaluation, ResultRow):
            row = evaluation
            recorded = self.recorded.get(row.case_id)
            if recorded is None or row.scores is None:
                return None
            return differences(recorded, {"scores": row.scores.model_dump(), "turns": row.turns,
                                          "termination": row.termination})
        recorded = self.recorded.get(case_id(evaluation.scenario.scenario_id, evaluation.repeat))
        if recorded is None or evaluation.verdict is None:
            return None
        dialogue = evaluation.dialogue
        now = {"scores": evaluation.verdict.scores.model_dump(), "turns": dialogue.turns,
               "termination": dialogue.termination.value if dialogue.termination else None}
        return differences(recorded, now)

    def base_case(self, scenario: Scenario, repeat: int = 1) -> tuple[Base | None, str | None]:
        """The dialogue and scores the recorded results (the ``--baseline``'s, when one is given) hold for this case,
        to judge again beside a live judgement's floor miss (:mod:`.confirmation`); or None and why not."""
        found = self._base_records
        if isinstance(found, str):
            return None, found
        record = found.get((scenario.scenario_id, repeat))
        if record is None:
            return None, "the recorded results hold no row of this case"
        return base_case(record.get("transcript"), record.get("dialogue_digest"), record.get("scores"))

    @cached_property
    def _base_records(self) -> dict[tuple[Any, Any], dict[str, Any]] | str:
        """The recorded rows' dialogues and scores by (scenario, try), newest per case; or why there are none. Read
        once, when a process first meets a floor missed live (with dialogues, a whole sample's rows are tens of
        megabytes: never read for a run that needs none)."""
        path = existing(self.settings.baseline) if self.settings.baseline is not None else existing(self.recorded_path)
        if path is None:
            return "there are no recorded results to take the base's dialogue from"
        try:
            records = load_fields(path, ("repeat", "finished_at", "transcript", "dialogue_digest", "scores"),
                                  what="recorded results")
        except PersonalensError as exc:
            return f"the recorded results cannot be read ({exc})"
        key = lambda r: (r.get("scenario_id"), r.get("repeat") or 1)  # noqa: E731
        return {key(r): r for r in newest_per_case(records, case=lambda r: repr(key(r)),
                                                   finished=lambda r: r.get("finished_at"))}

    #: why the recorded results were left as they are, if they were (shown at the end of the run)
    kept_back: str | None = None

    def is_baseline(self, path: Path) -> bool:
        """Whether ``path`` (or the older form beside it) is the file this run compares with: never written by it."""
        baseline = self.settings.baseline
        found = existing(path)
        return baseline is not None and found is not None and baseline.resolve() == found.resolve()

    def keep_recorded(self, rows: Iterable[ResultRow]) -> int:
        """At the end of a recording run: its scored rows join the recorded results; returns how many."""
        if self.settings.record_mode == "none" or self.settings.rejudge:
            return 0
        if self.is_baseline(self.recorded_path):
            self.kept_back = (f"the recorded results ({self.shown(self.recorded_path)}) are left as they are: they are "
                              "this run's --baseline; a recording joins them only on main (`personalens promote`)")
            return 0
        return merge_recorded(self.recorded_path, (row for row in rows if row.status != "error"))
