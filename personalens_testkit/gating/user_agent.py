"""What the user agent's own faults (:mod:`~personalens_testkit.agents.user_faults`) do to the verdict.

A case whose user agent *hindered* the bot (wrote as the assistant, looped, said nothing, spoke another language)
is ``inconclusive (user agent)``: its scores are kept on its row but count in no figure and no gate, and it is listed
with its reason. One whose user agent *helped* (pasted its profile, stated a
preference in its opening query) cannot pass on that dialogue: a pass becomes ``inconclusive (user agent)``, a
failure stands. A run in which more than ``max_user_agent_faults`` of the cases are so voided is inconclusive as a
whole: the user agent, not the bot, failed.

thresholds.yaml's ``user_agent_faults`` says whether faults change verdicts: ``gate`` always, ``report`` never (they
are found and shown all the same), ``auto`` (the default) gates unless the user agent is the embedded model, whose
135M-parameter user agent breaks the protocol in almost every dialogue (23 of the 25 shipped: it pastes its profile,
repeats itself) -
gating on it would make every default run inconclusive, and says nothing about the bot.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Sequence

from ..results.rows import USER_AGENT_VERDICT, CaseVerdict

Mode = Literal["auto", "gate", "report"]


def gated(mode: Mode, user_agent_embedded: bool) -> bool:
    """Whether the user agent's faults change case verdicts under ``mode``."""
    return mode == "gate" or (mode == "auto" and not user_agent_embedded)


def _field(fault: Any, name: str) -> Any:
    """A fault's field, whether a row holds it (an object) or an evaluation does (a dict)."""
    return fault[name] if isinstance(fault, dict) else getattr(fault, name)


def _direction(fault: Any) -> str:
    return _field(fault, "direction")  # type: ignore[no-any-return]


def effect(faults: Iterable[Any]) -> str | None:
    """What the faults (rows' or findings', as objects or dicts) did to the dialogue: ``hindered`` if any did, else
    ``helped`` if any did, else None (``noted`` findings alone change nothing)."""
    directions = {_direction(fault) for fault in faults}
    return "hindered" if "hindered" in directions else "helped" if "helped" in directions else None


def user_agent_verdict(verdict: CaseVerdict, faults: Sequence[Any], *, is_gated: bool) -> CaseVerdict:
    """A case's verdict once the user agent's faults are weighed: hindered, or helped to a pass - inconclusive
    (user agent); anything else as it was."""
    found = effect(faults) if is_gated else None
    if found == "hindered" or (found == "helped" and verdict in ("pass", "unexpected pass")):
        return USER_AGENT_VERDICT
    return verdict


def why(faults: Sequence[Any]) -> str:
    """The faults that decided, in words, a rule at a time: ``the user agent hindered the bot: turns 1, 3 repeated an
    earlier turn word for word (repeated_turn)``."""
    from ..agents.user_faults import RULE_WORDS  # the dialogue machinery loads with the first case, not the plugin

    found = effect(faults)
    turns: dict[str, list[int]] = {}
    for fault in faults:
        if _direction(fault) == found:
            turns.setdefault(_field(fault, "rule"), []).append(_field(fault, "turn"))
    parts = [f"turn{'s' if len(at) > 1 else ''} {', '.join(map(str, at))} {RULE_WORDS.get(rule, rule)} ({rule})"
             for rule, at in turns.items()]
    return f"the user agent {found} the bot: " + "; ".join(parts)


def faulted_share(rows: Sequence[Any]) -> tuple[int, int, dict[str, int]]:
    """How many of the rows' dialogues the user agent faulted in (hindered or helped), how many were voided
    (``inconclusive (user agent)``), and the dialogues per rule (every rule, ``noted`` ones too)."""
    faulted = voided = 0
    per_rule: dict[str, int] = {}
    for row in rows:
        faults = row.user_faults or ()
        faulted += effect(faults) is not None
        voided += row.verdict == USER_AGENT_VERDICT
        for rule in {_field(fault, "rule") for fault in faults}:
            per_rule[rule] = per_rule.get(rule, 0) + 1
    return faulted, voided, per_rule


def reruns(rows: Sequence[Any]) -> str:
    """What ``--rerun-user-faults`` did over the rows, in words (empty when it did nothing): the dialogues run again,
    how many of them the user agent did not spoil the second time, and those not run again."""
    again = [row for row in rows if row.rerun is not None and row.rerun.first is not None]
    refused = [row.rerun.refused for row in rows if row.rerun is not None and row.rerun.refused]
    if not again and not refused:
        return ""
    failed = sum(row.status == "error" for row in again)
    clean = sum(effect(row.user_faults or ()) is None and row.status != "error" for row in again)
    said = f"{len(again)} dialogue(s) run again with a fresh one ({clean} not spoiled the second time" + (
        f", {failed} ended in an error)" if failed else ")")
    return said + (f", {len(refused)} not run again ({refused[0]})" if refused else "")


def user_agent_difference(base: Iterable[Any], user_model: str) -> str | None:
    """Why a baseline comparison is refused: the base's rows were produced with another user agent (a comparison
    across user agents says nothing about the bot); None when every base row that names its user agent names this
    run's (rows of older versions that name none say nothing)."""
    others = sorted({row.user_model for row in base if row.user_model and row.user_model != user_model})
    if not others:
        return None
    return (f"--baseline: the base's rows were produced with the user agent {', '.join(others)}, this run's is "
            f"{user_model}: a comparison across user agents measures them, not the bot - refused (record the base "
            "with the same user agent)")
