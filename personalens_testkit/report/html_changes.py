"""The top of the HTML report, what a reviewer reads first: the run's verdict (passed, regressed or inconclusive,
with its reason), the scenarios that changed (base -> candidate scores, the first turn where the bot's reply
differed with the old and the new reply, calls replayed and live per role), and the run's checks - each gate
once - as one table. Every text from a row is escaped: a bot's reply is shown, never interpreted."""

from __future__ import annotations

from html import escape

from ..gating.aggregate import HEADLINE, SHORT
from .changes import ScenarioChange, check_detail, describe_split, score_pair
from .model import RunReport

#: the most changed scenarios listed (the rest are counted; every dialogue is further down)
MAX_LISTED = 50



def verdict_html(report: RunReport) -> str:
    """The run's verdict, as the exit code and JUnit give it: its headline (with the first reason), the counts,
    and every reason when there are several."""
    v = report.verdict
    reasons = v.failures + [r for r in v.undecided if r not in v.failures]
    failures = "".join(f"<li class='fail'>{escape(f)}</li>" for f in reasons) if len(reasons) > 1 else ""
    return (f"<div class='verdict {'ok' if v.outcome == 'passed' else 'bad'}' id='verdict'><b>Verdict: "
            f"{escape(v.headline)}</b><br><span class='muted'>{escape(v.label)} ({escape(v.counts)})</span>"
            + (f"<ul>{failures}</ul>" if failures else "") + "</div>")


def checks_html(report: RunReport) -> str:
    """Every run-level check (the gates, infrastructure errors, changed replies, the baseline) once, as a table."""
    checks = report.verdict.checks
    if not checks:
        return "<h2>Gates and checks</h2><p class='muted'>no aggregate gates set</p>"
    note = "" if report.gates_enforced else (" <span class='muted'>(gates reported, not enforced: nothing under test "
                                             "ran live)</span>")
    rows = "".join(f"<tr class='{ {'failed': 'fail', 'passed': 'pass'}.get(c.outcome, 'muted') }'>"
                   f"<td>{escape(c.name)}</td><td>{escape(c.outcome)}</td><td>{escape(check_detail(c))}</td></tr>"
                   for c in checks)
    return (f"<h2>Gates and checks{note}</h2><table class='checks'><tr><th>check</th><th>outcome</th>"
            f"<th>detail</th></tr>{rows}</table>")


def changes_html(report: RunReport) -> str:
    changes = report.changes
    if not changes:
        return ("<h2>Scenarios that changed</h2><p class='muted'>None: every bot reply matched the recording, and no "
                "score or verdict changed.</p>")
    heads = "".join(f"<th>{escape(SHORT[m])}</th>" for m in HEADLINE)
    rows = "".join(_change(c) for c in changes[:MAX_LISTED])
    more = (f"<p class='muted'>and {len(changes) - MAX_LISTED} more: see their dialogues below (verdict filter)</p>"
            if len(changes) > MAX_LISTED else "")
    return (f"<h2>Scenarios that changed ({len(changes)})</h2><p class='muted'>scores base -&gt; candidate where a "
            "baseline was given; the first turn where the bot's reply differs from the recording, with the recorded "
            "(old) and the new reply; the calls of each role replayed from the cassette or called live</p>"
            f"<table class='changes'><tr><th>scenario</th><th>verdict</th>{heads}<th>first differing turn</th>"
            f"<th>calls</th></tr>{rows}</table>{more}")


def _change(c: ScenarioChange) -> str:
    scores = "".join(f"<td class='score'>{escape(score_pair(c, m))}</td>" for m in HEADLINE)
    change = c.reply_change
    turn = "-" if change is None else (
        f"turn {change.turn}<div class='muted'>recorded (old)</div><div class='reply old'>{escape(change.recorded)}</div>"
        f"<div class='muted'>new</div><div class='reply new'>{escape(change.reply)}</div>")
    return (f"<tr class='change'><td><b>{escape(c.case_id)}</b><br><span class='muted'>{escape('; '.join(c.why))}"
            f"</span></td><td>{escape(c.verdict)}</td>{scores}<td>{turn}</td>"
            f"<td>{escape(describe_split(c.calls))}</td></tr>")
