"""Expectations: each scenario's expected outcome, written from a run and committed beside the cassettes, as
large regression suites keep them (web-platform-tests' expectation files, Chromium's TestExpectations,
LLVM lit's XFAIL). A case that meets its expectation is fine; a known failure is reported as xfail with
its reason; a case that newly fails is a regression; one that newly passes is an unexpected pass, with
the command that updates the file::

    version: 1
    assistant: concierge-python
    scenarios:
      user7-SD-Alarm-task-1: pass
      user7-SD-Alarm-task-2: fail personalization            # below the personalization floor
      user7-SD-Alarm-task-3: fail task_completion, personalization
      user7-SD-Alarm-task-4: fail error                      # the bot fails on it
      user7-SD-Books-task-1: flaky                           # its verdict varied across repeats

A scenario the file does not name is expected to pass. Errors of the benchmark's own models are never
expected: they are infrastructure, counted apart.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable, Literal, Optional

import yaml
from pydantic import BaseModel

from ..errors import ConfigError
from ..files import write_atomically
from ..replay.store import assistant_dir
from ..results.rows import CaseVerdict, ResultRow, ShortfallRow
from ..scales import METRIC_NAMES
from .aggregate import REPLY_CHANGED, is_assistant_error
from .thresholds import Thresholds, shortfalls

FILE_NAME = "expectations.yaml"
ERROR = "error"


def location(configured: Path | None, cassette_dir: Path, assistant: str) -> Path:
    """The expectations file: the one configured, or the one beside the assistant's cassettes."""
    return configured or assistant_dir(cassette_dir, assistant) / FILE_NAME


class Expectation(BaseModel):
    outcome: Literal["pass", "fail", "flaky"]
    #: for ``fail``: the floors the scenario misses (metric names), or ``error``: the bot fails on it
    reasons: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"fail {', '.join(self.reasons)}" if self.outcome == "fail" else self.outcome


PASS = Expectation(outcome="pass")


class Expectations(BaseModel):
    assistant: Optional[str] = None
    scenarios: dict[str, Expectation] = {}

    def of(self, scenario_id: str) -> Expectation:
        return self.scenarios.get(scenario_id, PASS)


def parse_expectation(text: str, where: str, path: Path) -> Expectation:
    words = str(text).replace(",", " ").split()
    if words in (["pass"], ["flaky"]):
        return Expectation(outcome=words[0])  # type: ignore[arg-type]
    known = set(METRIC_NAMES) | {ERROR}
    if words[:1] == ["fail"] and len(words) > 1 and set(words[1:]) <= known:
        return Expectation(outcome="fail", reasons=tuple(words[1:]))
    raise ConfigError(path, where, f"expected pass, flaky, or fail followed by the floors it misses (any of "
                                   f"{', '.join(sorted(known))}) (got {text!r})")


def load_expectations(path: Path) -> Expectations:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"cannot be read ({exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, None, f"not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("scenarios", {}), dict):
        raise ConfigError(path, "scenarios", "expected a mapping of scenario ids to pass, fail ... or flaky")
    if data.get("version", 1) != 1:
        raise ConfigError(path, "version", f"must be 1 (got {data.get('version')!r})")
    scenarios = {str(sid): parse_expectation(value, f"scenarios.{sid}", path)
                 for sid, value in (data.get("scenarios") or {}).items()}
    return Expectations(assistant=data.get("assistant"), scenarios=scenarios)


def from_rows(rows: Iterable[ResultRow]) -> dict[str, Expectation]:
    """What a run shows of each scenario: it passed every try, failed every try (the union of what it
    missed), or varied (flaky). Scenarios with only infrastructure errors say nothing and are left out."""
    tries: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for row in rows:
        if row.scored:
            tries[row.scenario_id].append(tuple(s.metric for s in row.shortfalls) if row.status == "failed" else ())
        elif is_assistant_error(row):
            tries[row.scenario_id].append((ERROR,))
    found = {}
    for sid, outcomes in sorted(tries.items()):
        if all(not missed for missed in outcomes):
            found[sid] = PASS
        elif all(outcomes):
            reasons = sorted({reason for missed in outcomes for reason in missed} or {"task_completion"})
            found[sid] = Expectation(outcome="fail", reasons=tuple(reasons))
        else:
            found[sid] = Expectation(outcome="flaky")
    return found


def write_expectations(path: Path, expectations: Expectations) -> None:
    lines = ["# Each scenario's expected outcome (personalens expectations update RESULTS rewrites it from a run).",
             "# pass: must meet every floor; fail <floors>: a known failure; flaky: either outcome is expected.",
             "version: 1"]
    if expectations.assistant:
        lines.append(f"assistant: {expectations.assistant}")
    lines.append("scenarios:" if expectations.scenarios else "scenarios: {}")
    lines += [f"  {sid}: {expectation}" for sid, expectation in sorted(expectations.scenarios.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def update_expectations(path: Path, rows: list[ResultRow]) -> tuple[Expectations, dict[str, str]]:
    """The file with the scenarios of these rows set to what the rows show (others kept); and what changed."""
    old = load_expectations(path) if path.is_file() else Expectations()
    new = dict(old.scenarios)
    changes = {}
    for sid, expectation in from_rows(rows).items():
        before = old.of(sid)
        if before != expectation:
            changes[sid] = f"{before} -> {expectation}"
        if expectation == PASS:
            new.pop(sid, None)  # the default need not be written
        else:
            new[sid] = expectation
    assistant = old.assistant or next((row.assistant for row in rows if row.assistant), None)
    updated = Expectations(assistant=assistant, scenarios=new)
    write_expectations(path, updated)
    return updated, changes


def case_verdict(expectation: Expectation, missed: Iterable[str], error_source: str | None = None,
                 error_kind: str | None = None, *, judged_live: bool = False) -> CaseVerdict:
    """A case against its expectation: ``missed`` are the floors it is below; ``error_source`` is set when
    it has no score (``assistant``: the bot's failure; anything else: infrastructure); an ``error_kind`` of
    :data:`~.aggregate.REPLY_CHANGED` is a bot that answered differently in an offline replay.

    ``judged_live``: its scores came from a judge called now, not replayed - one noisy judgement. A new floor miss
    there is ``unconfirmed``: evidence, not a regression (the run's decision over its gates and the baseline says
    whether the bot got worse). A bot's error is never noise, and never covered by ``flaky`` either."""
    if error_kind == REPLY_CHANGED:
        return "reply changed"
    if error_source is not None and error_source != "assistant":
        return "not scored"
    reasons = {ERROR} if error_source == "assistant" else set(missed)
    if not reasons:
        return "unexpected pass" if expectation.outcome == "fail" else "pass"
    known = expectation.outcome == "fail" and reasons <= set(expectation.reasons)
    if known or (expectation.outcome == "flaky" and ERROR not in reasons):
        return "expected failure"
    return "unconfirmed" if judged_live and ERROR not in reasons else "regression"


def row_verdict(row: ResultRow, expectations: Expectations | None) -> CaseVerdict:
    """A row's verdict: the one recorded when it ran, or worked out from it (a row of an older version)."""
    if row.verdict is not None:
        return row.verdict  # type: ignore[return-value]
    expectation = expectations.of(row.scenario_id) if expectations else PASS
    source = (row.error.source if row.error else "setup") if row.status == "error" else None
    missed = ([s.metric for s in row.shortfalls] or ["reproduction"]) if row.status == "failed" else []
    return case_verdict(expectation, missed, source, row.error.kind if row.error else None)


def row_reproduced_now(row: ResultRow, differing: Iterable[str], expectation: Expectation) -> ResultRow:
    """A scored row of another run (``--resume``) in a whole-run replay, judged as the replay judges its own cases: by
    whether it reproduces its recording (``differing``: what differs from the recorded row; none: reproduced),
    whatever it scored - no floor applies there. A row that says failed stays failed."""
    failed = bool(list(differing)) or row.status == "failed"
    return row.model_copy(update={"status": "failed" if failed else "passed", "shortfalls": [],
                                  "expected": str(expectation), "verdict": "regression" if failed else "pass"})


def row_judged_now(row: ResultRow, thresholds: Thresholds, expectation: Expectation) -> ResultRow:
    """A scored row of another run (``--resume``) as this run judges it: its shortfalls against ``thresholds``'
    floors, its status and its verdict against ``expectation``, from its scores alone. What the row says of itself
    can only make it worse: a row that says failed stays failed (a replay that did not reproduce its recording fails
    with scores above every floor); one that says passed over a score below a floor fails. Nor does it earn the
    leniency of a live judgement (``unconfirmed``): whether its judge was called live is the row's own word, so a
    floor missed by a resumed row is a regression unless the expectations know it."""
    found = shortfalls(thresholds.scenario, row.scores.model_dump()) if row.scores is not None else []
    failed = bool(found) or row.status == "failed"
    missed = [s.metric for s in found] or (["reproduction"] if failed else [])
    return row.model_copy(update={
        "status": "failed" if failed else "passed", "shortfalls": [ShortfallRow(**s.as_dict()) for s in found],
        "expected": str(expectation), "verdict": case_verdict(expectation, missed)})
