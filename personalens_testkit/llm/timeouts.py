"""A model or bot call that ran out of time, as an error that names the limit it met - the part of
:mod:`.deadlines` every backend shares, HTTP or not (no HTTP client is loaded with it)."""

from __future__ import annotations

from ..errors import DeadlineReached, ModelError
from ..timebox import Deadline, nearest_deadline

#: how close to its deadline a wait that timed out must end to have been cut by it (timers round up)
SLACK_S = 0.05
#: the most a new connection may take (a whole call's limit lowers it)
CONNECT_S = 10.0


def ran_out() -> Deadline | None:
    """The deadline a wait that just timed out was cut by: the nearest in force, if it has (about) passed."""
    nearest = nearest_deadline()
    return nearest if nearest is not None and nearest.left() <= SLACK_S else None


def timed_out(what: str, limit: Deadline, *, model: str, retryable: bool = True) -> ModelError:
    """The error of a call given up at ``limit``: ``{what} within the time limit of 2 s (timeout_s)``. Against a
    final limit (the scenario's) it is :class:`DeadlineReached`: nothing is tried after it."""
    message = f"{what} within {limit.describe()}"
    if limit.final:
        return DeadlineReached(message, model=model)
    return ModelError(message, model=model, retryable=retryable)
