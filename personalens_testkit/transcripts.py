"""A case as text: its transcript (kept in its process's transcripts file: :mod:`.transcript_file`), and the
messages of a case that fails (below a floor, or not reproducing its recording)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from .evaluation import Evaluation


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
    lines += _first_dialogue(evaluation.rerun)
    return "\n".join(lines) + "\n"


def _first_dialogue(rerun: dict[str, object] | None) -> list[str]:
    """``--rerun-user-faults``: the dialogue run again, not judged, and why; or why it was not run again."""
    if rerun is None:
        return []
    first = rerun.get("first")
    if not isinstance(first, dict):
        return ["## User agent", f"{rerun['why']}; {rerun.get('refused') or 'kept as recorded'}"]
    lines = ["## First dialogue (run again, not judged)", f"why: {rerun['why']}",
             f"turns: {first['turns']}; ended by: {first['termination'] or 'not finished'}", ""]
    for message in first["transcript"]:
        lines += [f"{str(message['role']).upper()}: {message['content']}", ""]
    return lines


def describe_shortfalls(evaluation: Evaluation, found: Sequence[Any], transcript_path: object) -> str:
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
