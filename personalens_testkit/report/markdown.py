"""The job summary in Markdown (``summary.md``; also appended to GitHub's step summary, ``$GITHUB_STEP_SUMMARY``).

What a reviewer of a pull request reads first, in this order: the run's verdict on the first line (passed,
regressed or inconclusive, with its one-line reason), the gates and the baseline, then the scenarios that
changed - base -> candidate scores, the first turn where the bot's reply differed with the old and the new
reply, and how many calls of each role replayed from the cassette or ran live.

A bot's replies are untrusted text: each stands in a fenced block whose fence is longer than any run of
backticks in it, so nothing it holds (Markdown, HTML, a fence) can end the block; every other text is escaped.
The summary is bounded (at most :data:`MAX_LISTED` scenarios, and about :data:`BUDGET` bytes): GitHub takes at
most 1 MiB of a step's summary.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Mapping

from ..errors import StorageError
from ..gating.aggregate import GROUP_TITLES, SHORT
from ..gating.compare import GATED_GROUPS, Comparison
from ..scales import HEADLINE
from ..secrets import redact
from .summary import cost_lines
from .changes import ScenarioChange, check_detail, describe_split, score_pair
from .model import RunReport

#: the most changed scenarios the summary details (the others are counted)
MAX_LISTED = 50
#: about the most bytes the summary's changed scenarios take (GitHub caps a step's summary at 1 MiB)
BUDGET = 512 * 1024
#: GitHub's cap on one step's summary: appending beyond it loses the whole summary, so only the verdict goes
STEP_SUMMARY_CAP = 1024 * 1024
#: the most run checks (gates and the like) the table lists
MAX_CHECKS = 100

#: what could start emphasis, code, a link, a table cell, HTML or an entity (``>`` alone opens no tag mid-line)
_SPECIAL = re.compile(r"([\\`*_\[\]|~!#<&])")
_ENTITIES = {"<": "&lt;", "&": "&amp;"}


def inline(text: object) -> str:
    """Text on one line of Markdown, shown as it is: no emphasis, link, table cell break or HTML in it."""
    flat = " ".join(str(text).split())
    return _SPECIAL.sub(lambda m: _ENTITIES.get(m.group(1), "\\" + m.group(1)), flat)


def fenced(text: str) -> str:
    """Untrusted text as a fenced code block: the fence is longer than the longest run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text.replace("\r\n", "\n").replace("\r", "\n")
    return f"{fence}text\n{body}\n{fence}"


def render_markdown(report: RunReport) -> str:
    """The job summary: the verdict first, then the gates and the baseline, then the scenarios that changed."""
    v = report.verdict
    run = report.run
    about = "; ".join(f"{name} {run[key]}" for name, key in (
        ("assistant", "assistant"), ("user agent", "user_model"), ("judge", "judge_model"), ("run", "run_id"))
        if run.get(key))
    parts = [f"## PersonaLens: {inline(v.headline)}", "",
             inline(f"{v.label} ({v.counts})" + (f" - {about}" if about else ""))]
    reasons = v.failures + [r for r in v.undecided if r not in v.failures]
    if len(reasons) > 1:
        parts += [""] + [f"- {inline(reason)}" for reason in reasons]
    parts += _checks(report) + _comparison(report.comparison) + _changes(report.changes)
    costs = cost_lines(report)
    parts += [""] + [inline(line) for line in costs] if costs else []
    return "\n".join(parts) + "\n"


def _checks(report: RunReport) -> list[str]:
    checks = report.verdict.checks
    if not checks:
        return []
    note = "" if report.gates_enforced else " (gates reported, not enforced: nothing under test ran live)"
    lines = ["", f"### Gates and checks{note}", "", "| check | outcome | detail |", "|---|---|---|"]
    lines += [f"| {inline(c.name)} | {'**failed**' if c.outcome == 'failed' else c.outcome} | {inline(check_detail(c))} |"
              for c in checks[:MAX_CHECKS]]
    return lines + ([f"", f"and {len(checks) - MAX_CHECKS} more checks (see the HTML report)"]
                    if len(checks) > MAX_CHECKS else [])


def _comparison(c: Comparison | None) -> list[str]:
    """The baseline's paired differences of the gated groups (overall, single-, multi-domain)."""
    if c is None:
        return []
    lines = ["", f"### Baseline (candidate - base, {c.confidence:.0%} CI over paired scenarios, {c.margin_text()})", ""]
    cov = c.coverage
    if cov is not None:
        lines += [f"{cov.paired} of the base's {cov.base} scored scenarios paired; only in base {cov.only_in_base}, "
                  f"only in candidate {cov.only_in_candidate}, errored in the candidate {cov.errored_in_candidate}.", ""]
    lines += ["| group | metric | n | difference | |", "|---|---|---|---|---|"]
    for r in c.results:
        d = r.difference
        if r.group not in GATED_GROUPS or d.mean is None:
            continue
        interval = f" [{d.low:+.3f}, {d.high:+.3f}]" if d.low is not None and d.high is not None else ""
        flag = "**significant drop**" if r.significant_drop else "" if r.evaluated else "not evaluated"
        lines.append(f"| {GROUP_TITLES.get(r.group, r.group)} | {inline(SHORT[r.metric])} | {r.n} | "
                     f"{d.mean:+.3f}{interval} | {flag} |")
    return lines


def _changes(changes: list[ScenarioChange]) -> list[str]:
    if not changes:
        return ["", "### Scenarios that changed", "",
                "None: every bot reply matched the recording, and no score or verdict changed."]
    heads = " | ".join(inline(SHORT[m]) for m in HEADLINE)
    lines = ["", f"### Scenarios that changed ({len(changes)})", "",
             f"| scenario | verdict | {heads} | first differing turn | calls (replayed, live) |",
             "|---|---|" + "---|" * len(HEADLINE) + "---|---|"]
    listed = changes[:MAX_LISTED]
    for c in listed:
        scores = " | ".join(score_pair(c, m) for m in HEADLINE)
        turn = str(c.reply_change.turn) if c.reply_change is not None else "-"
        lines.append(f"| {inline(c.case_id)} | {inline(c.verdict)} | {scores} | {turn} | {inline(describe_split(c.calls))} |")
    used, shown = 0, 0
    for c in listed:
        detail = _detail(c)
        used += sum(len(line.encode("utf-8")) + 1 for line in detail)
        if used > BUDGET:
            break
        lines += detail
        shown += 1
    if len(changes) > shown:
        lines += ["", f"and {len(changes) - shown} more changed scenario(s) not detailed here: see the HTML report "
                      "and the rows' `reply_change` field"]
    return lines


def _detail(c: ScenarioChange) -> list[str]:
    scores = ", ".join(f"{SHORT[m]} {score_pair(c, m)}" for m in HEADLINE)
    lines = ["", f"#### {inline(c.case_id)}: {inline('; '.join(c.why))}", "",
             f"- verdict: {inline(c.verdict)}",
             f"- scores ({'base -> candidate' if c.in_base else 'candidate'}): {inline(scores)}",
             f"- calls: {inline(describe_split(c.calls))}"]
    change = c.reply_change
    if change is not None:
        lines += ["", f"Turn {change.turn}, the recorded (old) reply:", "", fenced(redact(change.recorded)), "",
                  f"Turn {change.turn}, the new reply:", "", fenced(redact(change.reply))]
    return lines


def append_step_summary(text: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Append the job summary to ``$GITHUB_STEP_SUMMARY`` when it is set (None when it is not). Where the step's
    summary would pass GitHub's 1 MiB, only the verdict line is appended. Raises StorageError."""
    target = (os.environ if environ is None else environ).get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    try:
        size = path.stat().st_size if path.exists() else 0
        if size + len(text.encode("utf-8")) > STEP_SUMMARY_CAP:
            text = text.splitlines()[0] + "\n\n(the full job summary would pass GitHub's 1 MiB: see summary.md)\n"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(("\n" if size else "") + text)
    except OSError as exc:
        raise StorageError(path, exc if exc.errno else OSError(errno.EIO, str(exc))) from exc
    return path
