"""Benchmark data: models, the upstream-layout loader, the bundled sample, selection."""

from .loader import Dataset, bundled_root, open_dataset
from .models import DOMAINS, Profile, Scenario, Situation, Task, TaskKind, UserTask
from .selection import Selection, select_scenarios

__all__ = [
    "DOMAINS", "Dataset", "Profile", "Scenario", "Selection", "Situation", "Task", "TaskKind",
    "UserTask", "bundled_root", "open_dataset", "select_scenarios",
]
