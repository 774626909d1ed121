"""Kept for code written against earlier versions: the run is :class:`personalens_testkit.run.state.Run`."""

from .run.state import Run as RunState
from .run.state import new_run_id

__all__ = ["RunState", "new_run_id"]
