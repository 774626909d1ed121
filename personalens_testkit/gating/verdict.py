"""The run's verdict, decided in one place for the plugin and every command: what fails a run beyond
its cases - the aggregate gates (when enforced) and the baseline comparison - one line each."""

from __future__ import annotations

from typing import Iterable

from pydantic import BaseModel

from .aggregate import GateResult
from .compare import Comparison

BASELINE_DROP = "baseline: a score dropped significantly beyond the margin (see the comparison above)"


class RunVerdict(BaseModel):
    #: one line per reason the run fails (empty: it passes beyond its cases)
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


def run_verdict(gates: Iterable[GateResult], *, gates_enforced: bool = True,
                comparison: Comparison | None = None) -> RunVerdict:
    failures = [gate.describe() for gate in gates if gates_enforced and gate.passed is False]
    if comparison is not None and comparison.failed:
        failures.append(BASELINE_DROP)
    return RunVerdict(failures=failures)
