"""How many scenarios a process evaluates at once: ``--concurrency K``, or the number ``--concurrency auto`` picks.

A scenario on remote models mostly waits for them, so lanes are threads, and threads of one process come cheaper than
xdist workers (each a whole pytest process: about 115 MB, seconds of CPU to start). ``auto`` picks
:data:`PER_CORE` lanes a usable core for the whole run, at most :data:`MOST`, shared out over the run's processes
(``-n N``: N workers), and no more than ``--max-concurrency`` (lanes past the endpoint's limit only wait for it).
It picks 1 when nothing is called live (a replay is the process's own work: threads would only share the CPU) or
when an embedded model is (its server takes one scenario at a time).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ..settings.table import AUTO

if TYPE_CHECKING:
    from .state import Run

#: lanes a usable core when ``auto`` picks: measured on 2 cores against a server answering in 200 ms, one process with
#: 32 lanes finished 97 scenarios in 13 s, where ``-n 2 --concurrency 8`` took 23 s and ``-n 16`` 45 s (issue 48)
PER_CORE = 16
#: the most lanes ``auto`` picks for a run
MOST = 64


def lanes(setting: int | str, *, workers: int, cores: int, live: bool, embedded: bool,
          max_concurrency: int | None) -> int:
    """The scenarios one process evaluates at once. ``workers``: xdist's ``-n`` (0: none); ``cores``: the usable
    cores; ``live``: some model is called live; ``embedded``: an embedded model is."""
    if setting != AUTO:
        return int(setting)
    if not live or embedded:
        return 1
    whole = min(MOST, PER_CORE * max(1, cores), max_concurrency or MOST)
    return max(1, whole // max(1, workers))


def of_run(run: Run) -> int:
    """The scenarios this process of the run evaluates at once."""
    s = run.settings
    return lanes(s.concurrency, workers=run.workers, cores=usable_cores(), live=bool(run.recording.live_roles),
                 embedded=run.models.uses_embedded, max_concurrency=s.limits.max_concurrency)


def describe(setting: int | str, chosen: int, workers: int) -> str | None:
    """The header's word on what ``auto`` picked (None when the number was given)."""
    if setting != AUTO:
        return None
    where = f"in each of {workers} workers" if workers else "in this process"
    return f"--concurrency auto: {chosen} scenario{'s' if chosen != 1 else ''} at once {where}"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a container or ``taskset`` limits it)."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
