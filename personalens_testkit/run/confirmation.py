"""A floor missed on a live judgement, confirmed or cleared before the verdict.

A judgement made now (not replayed) is one noisy draw: a rating moves a level, a completion verdict flips. A floor
it misses is evidence, not yet a regression. So the run asks the judge again about the floors missed, on the case's
dialogue and - where the recorded results hold the same case's dialogue (the base's) - on the base's, with the same
judge, now, ``R`` times each. The miss is **confirmed** (a regression) when, on one of the floors it missed, every
new judgement of the case's dialogue misses it too and every new judgement of the base's meets it; else it is
**cleared** (listed as unconfirmed, an xfail: the run's gates and baseline decide).

Why both sides: a scenario that sits at its floor is missed by a fair share of any judge's draws, for the base's
dialogue as much as for the case's. Judging only the case's dialogue again confirms such a miss for a bot as good as
the base (measured in ``bench/live_floors.py``). Asking the base's dialogue to meet the floor every time too bounds
it. The recorded judgement of the base's dialogue must have met the floor as well: with the live one that missed it
that is one more pair of judgements, so when both dialogues miss a floor with the same chance ``q`` per judgement,
a case is confirmed with chance at most ``q^(R+1) (1-q)^(R+1) <= 4^-(R+1)``, whatever ``q``. ``R`` is the fewest
with ``floors x cases x 4^-(R+1) <= (1 - confidence) / 2`` (:func:`judgements_for`; with the shipped four floors and
confidence 0.95: 6 at 36 cases, 7 at 400, 9 at 4,096): however many cases a run has and however many of them miss a
floor live, the judge's noise alone confirms any of them in at most half the run's error rate, beside what the
gates and the baseline allow it. A dialogue that broke
a floor (a generic reply where a personal one was due) misses it on nearly every draw while the base's meets it:
confirmed.

The draws stop as soon as no missed floor can still be confirmed (a case draw that meets it, a base draw that misses
it), and only the floors still open are asked: clearing a miss costs a call or two, confirming one ``2R`` calls a
floor.

Without the base's dialogue (a scenario new to the recording, a recording of an older version that kept no
transcript, one whose transcript does not match its fingerprint) the case's dialogue alone is judged again:
confirmed when every new judgement misses the floor too - said so in the row.

The new judgements are drawn live, outside the scenario's cassette (a cassette would play back the first answer),
and are never recorded: a replay of the recording plays back the first judgement, as recorded. Their calls are in
the case's calls and cost; a judgement that fails or is unreadable confirms nothing (the judge's fault is never
the bot's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

from ..errors import JudgeAnswerError, PersonalensError
from ..gating.thresholds import ScenarioFloors, below_floor
from ..llm.base import Message
from ..results.rows import dialogue_digest

if TYPE_CHECKING:  # the plugin reads this module's words at load; the agents load when a run judges
    from ..agents.calls import CallLog
    from ..agents.judge import Judge
    from ..data.context import ScenarioContext

#: the most new judgements of each dialogue (a run of millions of cases would need more to hold its error rate)
MAX_JUDGEMENTS = 12


def judgements_for(cases: int, floors: ScenarioFloors, confidence: float) -> int:
    """``R``: the fewest new judgements of each dialogue with ``floors x cases x 4^-(R+1) <= (1 - confidence) / 2``
    (``floors``: how many the thresholds set; the ``+1``: the live judgement and the base's recorded one)."""
    allowed = (1.0 - confidence) / 2
    count = max(1, sum(1 for floor in floors.model_dump().values() if floor is not None and floor is not False))
    r = 1
    while r < MAX_JUDGEMENTS and count * max(cases, 1) * 0.25 ** (r + 1) > allowed:
        r += 1
    return r


@dataclass
class Confirmation:
    """What the new judgements showed: the floors the first judgement missed, each new judgement's answers to the
    floors still open when it was drawn (None: it failed, and why is in ``errors``), and the decision."""

    missed: list[str]
    #: how many new judgements of each dialogue confirm (``R``); fewer are drawn once nothing can be confirmed
    judgements: int = 0
    case: list[dict[str, Any] | None] = field(default_factory=list)
    base: list[dict[str, Any] | None] | None = None
    errors: list[str] = field(default_factory=list)
    #: the floors confirmed missed ([]: cleared)
    confirmed: list[str] = field(default_factory=list)
    #: why the base's dialogue was not judged (None: it was)
    without_base: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"missed": self.missed, "confirmed": self.confirmed, "judgements": self.judgements, "case": self.case,
                "base": self.base,
                "errors": self.errors, "without_base": self.without_base}


def misses(floors: ScenarioFloors, scores: Mapping[str, Any] | None, metric: str) -> bool | None:
    """Whether these scores miss ``metric``'s floor (None: not answered - a failed judgement decides nothing)."""
    value = None if scores is None else scores.get(metric)
    return None if value is None else below_floor(getattr(floors, metric), value)


def decide(floors: ScenarioFloors, missed: Sequence[str], case: Sequence[Mapping[str, Any] | None],
           base: Sequence[Mapping[str, Any] | None] | None, judgements: int, *,
           base_recorded: Mapping[str, Any] | None = None) -> list[str]:
    """The floors of ``missed`` the new judgements confirm: ``judgements`` of the case's that all miss it and - when
    the base's dialogue was judged - its recorded judgement (``base_recorded``) and ``judgements`` new ones that all
    meet it."""
    confirmed = []
    for metric in missed:
        case_misses = [misses(floors, scores, metric) for scores in case]
        base_misses = ([misses(floors, scores, metric) for scores in [base_recorded, *base]] if base is not None
                       else [False] * (judgements + 1))
        if (len(case_misses) >= judgements and len(base_misses) > judgements and all(m is True for m in case_misses)
                and all(m is False for m in base_misses)):
            confirmed.append(metric)
    return confirmed


class Base(NamedTuple):
    """The base's case: its recorded dialogue and the scores its recorded judgement gave it."""

    messages: list[Message]
    scores: Mapping[str, Any]


def base_case(transcript: Sequence[Mapping[str, Any]] | None, digest: str | None, scores: Mapping[str, Any] | None
              ) -> tuple[Base | None, str | None]:
    """The recorded (base) case, or None and why not: a transcript must be there and match the fingerprint it was
    recorded with, and its judgement must have scored it."""
    if not transcript:
        return None, "the recorded results keep no dialogue of this case"
    if digest is None or dialogue_digest(transcript) != digest:
        return None, "the recorded dialogue does not match its fingerprint"
    if not isinstance(scores, Mapping):
        return None, "the recorded case has no scores"
    try:
        return Base([Message(role=turn["role"], content=turn["content"]) for turn in transcript], scores), None
    except (KeyError, TypeError):
        return None, "the recorded dialogue is not a list of role and content"


def confirm(judge: Judge, ctx: ScenarioContext, messages: Sequence[Message], floors: ScenarioFloors,
            missed: Sequence[str], log: CallLog, *, judgements: int, base: Base | None,
            without_base: str | None = None) -> Confirmation:
    """Ask the judge again about the missed floors, the case's dialogue and the base's (when given) in turn, up to
    ``judgements`` times each, while one can still be confirmed; decide (see above)."""
    found = Confirmation(missed=list(missed), base=None if base is None else [], judgements=judgements,
                         without_base=without_base if base is None else None)
    draw = _drawer(judge, ctx, log, found.errors)
    open_ = [m for m in missed if base is None or misses(floors, base.scores, m) is False]
    for _ in range(judgements):
        if not open_:
            break
        found.case.append(draw(messages, open_))
        open_ = [m for m in open_ if misses(floors, found.case[-1], m) is True]
        if base is not None and open_:
            found.base.append(draw(base.messages, open_))
            open_ = [m for m in open_ if misses(floors, found.base[-1], m) is False]
    found.confirmed = decide(floors, missed, found.case, found.base, judgements,
                             base_recorded=None if base is None else base.scores)
    return found


def _drawer(judge: Judge, ctx: ScenarioContext, log: CallLog, errors: list[str]
            ) -> Callable[[Sequence[Message], Sequence[str]], dict[str, Any] | None]:
    def draw(messages: Sequence[Message], metrics: Sequence[str]) -> dict[str, Any] | None:
        try:
            answers = judge.dimensions(metrics, ctx, messages, log)
        except PersonalensError as exc:  # the judge's fault (a dead endpoint, a deadline): it confirms nothing
            errors.append(_why(exc))
            return None
        errors.extend(_why(a) for a in answers.values() if isinstance(a, JudgeAnswerError))
        read = {name: a for name, a in answers.items() if not isinstance(a, JudgeAnswerError)}
        return read or None
    return draw


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def unconfirmed_why(found: Mapping[str, Any] | None) -> str:
    """Why a live judgement's miss is not a regression, in a few words (``found``: a :class:`Confirmation`'s
    ``as_dict()``, None when the rule does not judge again)."""
    if not found:
        return "one judgement: the judge's noise can explain one score"
    case, base, errors = found.get("case") or [], found.get("base"), found.get("errors") or []
    if not case and errors:  # nothing was judged again (the run is stopping, say)
        return f"{errors[0]}: not confirmed"
    if base is not None and not case:
        return "the base's recorded judgement missed it too: not confirmed"
    said = (f"judged again: the case's dialogue {len(case)} time(s), the base's {len(base)}" if base is not None else
            f"judged again {len(case)} time(s), alone ({found.get('without_base')})")
    if errors:
        said += f"; {len(errors)} answer(s) failed: {errors[0]}"
    return said + ": not confirmed"
