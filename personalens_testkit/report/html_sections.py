"""Sections of the HTML report beside the scores: what each role cost, and the judge's test-retest agreement."""

from __future__ import annotations

from html import escape

from ..costs.spend import format_cost
from ..gating.stats import Estimate
from .model import RunReport


def estimate_signed(e: Estimate) -> str:
    """A difference with its interval, signed."""
    ci = f" <span class='muted'>[{e.low:+.3f}, {e.high:+.3f}]</span>" if e.low is not None and e.high is not None else ""
    return f"{e.mean:+.3f}{ci}"


def role_cost_html(cost: object) -> str:
    """A role's spend, or why it is unknown (as a tooltip)."""
    if cost is None:
        return ""
    spent, reason = getattr(cost, "spent"), getattr(cost, "reason")
    if spent is not None:
        return escape(format_cost(spent))
    return f"<span title='{escape(reason)}'>cost unknown</span>"


def retest_html(report: RunReport) -> str:
    """The judge's test-retest agreement, per dimension."""
    r = report.judge_retest
    if r is None:
        return ""
    rows = "".join(
        f"<tr><td>{escape(d.dimension.replace('_', ' '))}</td><td>{d.n}</td><td>{d.exact_agreement:.0%}</td>"
        f"<td>{'' if d.kappa is None else f'{d.kappa:.2f}'}"
        f"{'' if d.kappa_low is None else f' [{d.kappa_low:.2f}, {d.kappa_high:.2f}]'}</td>"
        f"<td>{estimate_signed(d.shift)}</td></tr>" for d in r.dimensions if d.n)
    failed = f"; {r.failed} re-judgement(s) failed" if r.failed else ""
    return (f"<h2>Judge test-retest</h2><p class='muted'>{r.retested} dialogue(s) judged a second time{failed}; the "
            f"second judgement counts in no score.</p><table><tr><th>dimension</th><th>n</th><th>agree</th>"
            f"<th>kappa / QWK [{r.confidence:.0%} CI]</th><th>shift (second - first)</th></tr>{rows}</table>")
