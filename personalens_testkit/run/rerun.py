"""``--rerun-user-faults``: a scenario whose user agent spoiled its dialogue is run again once, with a fresh dialogue.

Spoiled: the checks that cost nothing (:mod:`~personalens_testkit.agents.user_faults`) find that the user agent
hindered the bot, or helped it (:func:`~personalens_testkit.gating.user_agent.effect`). The second dialogue is the one
checked and judged; the first stays on the row (``rerun.first``: its turns, end, faults and transcript; its calls
stay in the row's calls and cost). A faulted second dialogue weighs as any does (``inconclusive (user agent)``): there
is no third.

Only where the dialogue is live (the user agent called, not replayed): a replay follows its recording - the cassette
says how many dialogues it holds -, so a recording and its replay judge the same dialogue, with or without the
option. Within the budget: the second dialogue reserves a case's expected spend in ``--max-cost``'s ledger (settled
when the case ends), and is not run - the first kept, with why - when the budget cannot pay for it or the run is
stopping; its refusal does not stop the run.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..data.models import case_id
from ..gating.user_agent import effect, why
from .stop import StopSignal

if TYPE_CHECKING:
    from ..evaluation import Evaluation
    from .budget import Budget


def _key(evaluation: Evaluation) -> str:
    """The second dialogue's entry in the budget's ledger."""
    return f"{case_id(evaluation.scenario.scenario_id, evaluation.repeat)} (run again)"


@dataclass
class UserAgentRerun:
    """The run's policy (:class:`~personalens_testkit.evaluation.RerunPolicy`)."""

    #: whether the run asks for it (``--rerun-user-faults``)
    asked: bool
    run_dir: Path
    #: the run's budget, once it has one (None: no ``--max-cost``)
    budget: Callable[[], Budget | None] = lambda: None
    _reserved: set[str] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def why(self, evaluation: Evaluation) -> str | None:
        """Why the dialogue is run again (what its user agent did), or None: it is kept."""
        faults = evaluation.user_faults
        return why(faults) if effect(faults) is not None else None

    def refused(self, evaluation: Evaluation) -> str | None:
        """Why it may not be run again now (a stopping run, the budget), or None: its spend is reserved."""
        stopping = StopSignal(self.run_dir).reason()
        if stopping is not None:
            return f"not run again: the run is stopping ({stopping})"
        budget = self.budget()
        if budget is None:
            return None
        try:
            reason = budget.reserve(_key(evaluation), trips=False)
        except OSError as exc:
            return f"not run again: the budget's ledger cannot be written ({exc})"
        if reason is not None:
            return f"not run again: {reason}"
        with self._lock:
            self._reserved.add(_key(evaluation))
        return None

    def settle(self, evaluation: Evaluation) -> None:
        """When the case ends: a second dialogue's reservation closed (its calls are settled with the case's)."""
        key, budget = _key(evaluation), self.budget()
        with self._lock:
            if key not in self._reserved:
                return
            self._reserved.discard(key)
        if budget is not None:
            with contextlib.suppress(OSError):  # the case's own settling says why the ledger cannot be written
                budget.settle(key, ())
