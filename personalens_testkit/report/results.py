"""Result rows: one JSON line per scenario, written as each case ends.

Only the controlling pytest process writes ``results.jsonl`` (workers send their rows
with the test report), so rows never interleave; each row is one ``write`` followed by
a flush, so a killed run keeps every row written before it died. Transcripts are also
written as readable text files, one per scenario, by whichever process ran it.
"""

from __future__ import annotations

import contextlib
import errno
import json
from pathlib import Path
from typing import IO, Any, Literal, Optional

from pydantic import BaseModel

from ..agents.judge import Scores
from ..errors import StorageError
from ..files import reserve
from ..evaluation import Evaluation
from ..gating.thresholds import Shortfall

Status = Literal["passed", "failed", "error"]


class RunInfo(BaseModel):
    """What every row of a run shares: its id and the parts it was run with."""

    run_id: str
    assistant: str
    assistant_kind: str
    assistant_context: str
    assistant_model: Optional[str]
    user_model: str
    judge_model: str
    record_mode: Optional[str] = None


class ResultRow(BaseModel):
    schema_version: int = 1
    run_id: str
    scenario_id: str
    user_id: str
    task_id: str
    task_kind: str
    domains: list[str]
    status: Status
    assistant: str
    assistant_kind: str
    assistant_context: str
    assistant_model: Optional[str]
    user_model: str
    judge_model: str
    record_mode: Optional[str] = None
    cassette: Optional[str] = None
    repeat: int = 1
    scores: Optional[Scores]
    reasons: dict[str, str]
    observations: list[str]
    suggestions: list[str]
    shortfalls: list[dict[str, Any]]
    injection_flags: list[dict[str, Any]] = []
    turn_personalization: Optional[list[int]] = None
    preference_leak: Optional[dict[str, Any]] = None
    error: Optional[dict[str, Any]]
    turns: int
    max_turns: int
    termination: Optional[str]
    notes: list[str]
    transcript: list[dict[str, str]]
    transcript_path: Optional[str]
    calls: list[dict[str, Any]]
    started_at: str
    finished_at: str
    seconds: float


def build_row(
    run: RunInfo, evaluation: Evaluation, *, status: Status, found: list[Shortfall], transcript_path: str | None,
    cassette: str | None = None,
) -> ResultRow:
    scenario, dialogue, verdict = evaluation.scenario, evaluation.dialogue, evaluation.verdict
    error = evaluation.error
    return ResultRow(
        **run.model_dump(),
        scenario_id=scenario.scenario_id, user_id=scenario.user_id, task_id=scenario.task.task_id,
        task_kind=scenario.kind.value, domains=list(scenario.domains), status=status, cassette=cassette,
        scores=verdict.scores if verdict else None,
        reasons=verdict.reasons if verdict else {},
        observations=verdict.observations if verdict else [],
        suggestions=verdict.suggestions if verdict else [],
        shortfalls=[s.as_dict() for s in found], repeat=evaluation.repeat,
        turn_personalization=evaluation.turn_personalization, injection_flags=evaluation.injection_flags, preference_leak=evaluation.preference_leak,
        error=None if error is None else {
            "kind": error.kind, "phase": error.phase, "message": error.message, "raw_answer": error.raw_answer,
            "source": error.source, "endpoint": error.endpoint, "cause": error.cause, "disk_full": error.disk_full,
        },
        turns=dialogue.turns, max_turns=evaluation.max_turns,
        termination=dialogue.termination.value if dialogue.termination else None,
        notes=list(dialogue.notes), transcript=dialogue.transcript(), transcript_path=transcript_path,
        calls=[c.as_dict() for c in dialogue.log.records],
        started_at=evaluation.started_at, finished_at=evaluation.finished_at, seconds=evaluation.seconds,
    )


class ResultsWriter:
    """Appends rows to a JSON Lines file; opened lazily, so a run without cases writes nothing.

    Room for the next rows is reserved on disk ahead of them (see :func:`~personalens_testkit.files.reserve`):
    when the disk fills up, the run learns it while it can still write the row of every case it
    has run, and stops before the next case - rows written always equal cases run. A write that
    fails all the same leaves no torn row: the file is cut back to its last whole row.
    """

    #: room kept reserved ahead of the last row: at least this, and four times the largest row so far
    MIN_RESERVE = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self.count = 0
        self._largest = 0
        #: set when the rows written so far are safe but there is no room reserved for another
        self.out_of_room: StorageError | None = None

    def open(self) -> None:
        """Create the file (and its folder) and reserve room for the first rows; raises StorageError."""
        if self._file is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab", buffering=0)  # unbuffered: a failed write leaves nothing pending
        except OSError as exc:
            raise StorageError(self.path, exc) from exc
        self._reserve()

    def write(self, row: dict[str, Any]) -> None:
        self.write_json(json.dumps(row, ensure_ascii=False))

    def write_json(self, line: str) -> None:
        """A row already written as one line of JSON. Raises StorageError if it cannot be written; sets
        :attr:`out_of_room` if it was written but no room is left for another (the run must stop)."""
        self.open()
        assert self._file is not None
        data = (line + "\n").encode("utf-8")
        end = self._file.tell()
        try:
            view = memoryview(data)
            while view:  # a raw write may take part of the data
                written = self._file.write(view)
                if not written:
                    raise OSError(errno.EIO, "the write took nothing")
                view = view[written:]
        except OSError as exc:
            self._cut(end)
            raise StorageError(self.path, exc) from exc
        self.count += 1
        self._largest = max(self._largest, len(data))
        try:
            self._reserve()
        except StorageError as exc:
            self.out_of_room = exc

    def _reserve(self) -> None:
        assert self._file is not None
        room = max(self.MIN_RESERVE, 4 * self._largest)
        try:
            reserve(self._file.fileno(), self._file.tell(), room)
        except OSError as exc:
            raise StorageError(self.path, exc) from exc

    def _cut(self, end: int) -> None:
        """Drop whatever part of a failed row reached the file."""
        assert self._file is not None
        with contextlib.suppress(OSError):
            self._file.truncate(end)
            self._file.seek(end)

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every complete row of a results file (a torn last line from a crash is skipped)."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.endswith("\n") and line.strip():
                rows.append(json.loads(line))
    return rows


def format_transcript(evaluation: Evaluation) -> str:
    scenario = evaluation.scenario
    lines = [
        f"# {scenario.scenario_id}",
        f"task: {scenario.task.task_id} - {scenario.task.user_intent}",
        f"goal: {scenario.task.goal}",
        f"turns: {evaluation.dialogue.turns} of at most {evaluation.max_turns}; "
        f"ended by: {evaluation.dialogue.termination.value if evaluation.dialogue.termination else 'not finished'}",
        "",
    ]
    for message in evaluation.dialogue.messages:
        lines.append(f"{message.role.upper()}: {message.content}")
        lines.append("")
    if evaluation.verdict is not None:
        lines.append("## Judge")
        for name, value in evaluation.verdict.scores.model_dump().items():
            lines.append(f"- {name}: {value} - {evaluation.verdict.reasons.get(name, '')}")
    if evaluation.error is not None:
        lines.append("## Error")
        lines.append(evaluation.error.describe())
    return "\n".join(lines) + "\n"


def describe_shortfalls(evaluation: Evaluation, found: list[Shortfall], transcript_path: Path) -> str:
    """Why a case failed: the floors it missed, every score with the judge's reason, the transcript's path."""
    assert evaluation.verdict is not None
    lines = [f"{evaluation.scenario.scenario_id} is below its thresholds:"]
    lines += [f"  - {s.describe()}" for s in found]
    lines.append("judged scores and the judge's reasons:")
    for name, value in evaluation.verdict.scores.model_dump().items():
        lines.append(f"  {name} = {value}: {evaluation.verdict.reasons.get(name, '')}")
    ended = evaluation.dialogue.termination.value if evaluation.dialogue.termination else "?"
    lines.append(f"turns: {evaluation.dialogue.turns}, ended by: {ended}")
    lines.append(f"transcript: {transcript_path}")
    return "\n".join(lines)


def describe_replay_change(evaluation: Evaluation, changed: list[str]) -> str:
    """Why a replayed case failed: what differs from the recording."""
    lines = [f"{evaluation.scenario.scenario_id} did not reproduce its recorded result:"]
    lines += [f"  - {line}" for line in changed]
    lines.append("a replay answers every call from the cassette, so this means the prompts, the parsing or the "
                 "scoring changed; re-record if that was intended (--record-mode all)")
    return "\n".join(lines)
