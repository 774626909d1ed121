"""The HTML report: one self-contained file (inline CSS, inline SVG charts, a few lines of
JavaScript for filtering, also from the address: ``report.html#domain=Movies&verdict=failed``;
no network fetch of any kind) built from a run report.

Sections: the verdict, the scenarios that changed and the run's checks (each gate once, as one table), the
baseline comparison, the paper's Table 3 with confidence intervals, per-domain bars with intervals
(Figure 4), score distributions, the turn-level personalization curve (Figure 5, when
judged with ``--turn-level``), gates, the call ledger, and every dialogue with its scores
and the judge's reasons, filterable by domain and verdict.

The page itself is a template, ``assets/report.html.j2`` (Jinja2, escaping on), beside its styles and script;
this module writes each section and hands it to the template as markup.
"""

from __future__ import annotations

from functools import cache
from html import escape
from importlib import resources
from typing import Any, Mapping, Sequence

from ..costs.spend import format_cost
from ..gating.aggregate import GROUP_TITLES, HEADLINE, SHORT
from ..gating.stats import Estimate
from ..results.rows import ResultRow
from ..scales import METRIC_BY_NAME, METRICS
from .changes import ScenarioChange, check_detail, describe_split, score_pair
from .model import RunReport, TurnPoint
from .summary import unreadable_lines


@cache
def asset(name: str) -> str:
    """The page's styles (``report.css``) or script (``report.js``), package data of ``report/assets/``, inlined."""
    return (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")



def _fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _table(report: RunReport) -> str:
    head = "".join(f"<th>{escape(SHORT[m])}</th>" for m in HEADLINE)
    body = []
    for name, group in report.aggregates.items():
        if name not in GROUP_TITLES or not (group.scored or group.errors):
            continue
        cells = "".join(f"<td>{_estimate(group.metrics[m])}</td>" for m in HEADLINE)
        body.append(f"<tr><td>{GROUP_TITLES[name]}</td><td>{group.scored}</td><td>{group.assistant_errors}</td>"
                    f"<td>{group.infrastructure_errors}</td>{cells}</tr>")
    return (f"<table class='table3'><tr><th></th><th>n</th><th>bot errors</th><th>infra errors</th>{head}</tr>"
            f"{''.join(body)}</table><p class='muted'>Task completion counts your bot's errors as not completed; errors "
            "of the user agent, the judge or the setup (infra) are counted apart and never scored.</p>"
            + "".join(f"<p class='muted'>{escape(line.strip())}</p>" for line in unreadable_lines(report.aggregates)
                      if line.strip()))


def _estimate(e: Estimate) -> str:
    if e.mean is None:
        return "-"
    ci = f" <span class='muted'>[{e.low:.2f}, {e.high:.2f}]</span>" if e.low is not None and e.n > 1 else ""
    return f"{e.mean:.2f}{ci}"


def _domain_bars(report: RunReport, metric: str) -> str:
    """Horizontal bars per domain with the CI as a whisker."""
    groups = [(n.removeprefix("domain:"), g.metrics[metric]) for n, g in report.aggregates.items() if n.startswith("domain:")]
    groups = [(n, e) for n, e in groups if e.mean is not None]
    info = METRIC_BY_NAME[metric]
    low, high = (0.0, 1.0) if info.kind == "bool" else (float(info.low), float(info.high))
    width, left, row = 420, 96, 18
    height = 26 + row * max(len(groups), 1)

    def x(v: float) -> float:
        """A value's place on the metric's own scale: a bar starts at the scale's bottom (1 for a rating)."""
        return left + (v - low) / (high - low) * (width - left - 10)

    parts = [f"<svg class='chart chart-domain' data-metric='{metric}' width='{width}' height='{height}' "
             f"viewBox='0 0 {width} {height}' role='img' aria-label='{escape(info.title)} by domain'>",
             f"<text x='4' y='14' font-size='12' font-weight='600'>{escape(info.title)}"
             f"{' rate' if info.kind == 'bool' else ''} by domain</text>"]
    for i, (name, e) in enumerate(groups):
        y = 22 + i * row
        parts.append(f"<text x='4' y='{y + 12}' font-size='11'>{escape(name)}</text>")
        parts.append(f"<rect class='bar' x='{left}' y='{y + 2}' width='{max(x(e.mean) - left, 1):.1f}' height='12' fill='#7aa6d8'>"
                     f"<title>{escape(name)}: {_fmt(e.mean)} (n={e.n})</title></rect>")
        if e.low is not None and e.high is not None:
            parts.append(f"<line class='ci' x1='{x(e.low):.1f}' x2='{x(e.high):.1f}' y1='{y + 8}' y2='{y + 8}' "
                         "stroke='#1d2430' stroke-width='1.5'/>")
    parts.append(f"<text x='{left}' y='{height - 2}' font-size='10' class='muted'>{low:g}</text>"
                 f"<text x='{width - 24}' y='{height - 2}' font-size='10'>{high:g}</text></svg>")
    return "".join(parts)


def _distribution(rows: Sequence[ResultRow], metric: str) -> str:
    info = METRIC_BY_NAME[metric]
    values = [r.measured(metric) for r in rows]  # as the figures count them: a readable dimension of any case
    levels: list[Any] = [False, True] if info.kind == "bool" else list(range(info.low, info.high + 1))
    counts = [sum(1 for v in values if v == level) for level in levels]
    top = max(counts + [1])
    width, height, bar = 40 + 38 * len(levels), 142, 28
    parts = [f"<svg class='chart chart-dist' data-metric='{metric}' width='{width}' height='{height}' role='img' "
             f"aria-label='{escape(info.title)} distribution'><text x='4' y='14' font-size='12' font-weight='600'>"
             f"{escape(info.title)}</text>"]
    for i, (level, count) in enumerate(zip(levels, counts)):
        h = 80 * count / top
        x = 20 + i * 38
        label = ("yes" if level else "no") if info.kind == "bool" else str(level)
        parts.append(f"<rect x='{x}' y='{120 - h:.1f}' width='{bar}' height='{h:.1f}' fill='#9bc59d'>"
                     f"<title>{label}: {count}</title></rect><text x='{x + 9}' y='134' font-size='11'>{label}</text>"
                     f"<text x='{x + 9}' y='{116 - h:.1f}' font-size='10'>{count}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _turn_curves(curves: Mapping[str, Sequence[TurnPoint]], failed: int) -> str:
    """Single- and multi-domain apart (a chart each), and each single-domain domain's means by turn (a table)."""
    note = (f"<p class='muted'>The turn-level analysis failed on {failed} dialogue(s); their scores stand.</p>"
            if failed else "")
    if not curves:
        return note + ("<p class='muted'>No turn-level scores in this run: run with <code>--turn-level</code> to "
                       "judge the assistant's personalization after every turn (the paper's Figure 5).</p>")
    charts = "".join(f"<h3>{escape(group.capitalize())}</h3>{_turn_curve(curves[group])}"
                     for group in ("single-domain", "multi-domain") if group in curves)
    domains = {g.split(":", 1)[1]: c for g, c in curves.items() if g.startswith("domain:")}
    last = max((p.turn for c in domains.values() for p in c), default=0)
    table = ("<h3>By domain (single-domain)</h3><table><tr><th>domain</th>"
             + "".join(f"<th>turn {t}</th>" for t in range(1, last + 1)) + "</tr>"
             + "".join(f"<tr><td>{escape(name)}</td>" + "".join(
                 f"<td>{by_turn[t].mean:.2f} <span class='muted'>n={by_turn[t].n}</span></td>" if t in by_turn else "<td></td>"
                 for t in range(1, last + 1)) + "</tr>"
                 for name, curve in sorted(domains.items()) for by_turn in [{p.turn: p for p in curve}])
             + "</table>") if domains else ""
    return note + charts + table


def _turn_curve(curve: Sequence[TurnPoint]) -> str:
    width, height, left = 520, 200, 34
    last = max(p.turn for p in curve)

    def x(t: float) -> float:
        return left + (t - 1) / max(last - 1, 1) * (width - left - 12)

    def y(v: float) -> float:
        return 170 - (v - 1) / 3 * 150

    points = " ".join(f"{x(p.turn):.1f},{y(p.mean):.1f}" for p in curve)
    ticks = "".join(f"<text x='6' y='{y(v) + 4:.1f}' font-size='10'>{v}</text>" for v in (1, 2, 3, 4))
    return (f"<svg class='chart chart-turns' width='{width}' height='{height}' role='img' aria-label='turn-level personalization'>"
            f"{ticks}<polyline fill='none' stroke='#2f6fb3' stroke-width='2' points='{points}'/>"
            + "".join(f"<circle cx='{x(p.turn):.1f}' cy='{y(p.mean):.1f}' r='3' fill='#2f6fb3'><title>turn {p.turn}: "
                      f"{p.mean:.2f} (n={p.n})</title></circle>" for p in curve)
            + f"<text x='{left}' y='194' font-size='10'>turn 1</text><text x='{width - 50}' y='194' font-size='10'>turn {last}</text></svg>")


def _dialogue(row: ResultRow, verdict: str) -> str:
    score_text = ", ".join(f"{SHORT.get(m.name, m.name)} {str(row.score(m.name)).lower()}" for m in METRICS
                           if row.scores is not None)
    reasons = "".join(f"<li><b>{escape(METRIC_BY_NAME[k].title)}</b>: {escape(str(v))}</li>"
                      for k, v in row.reasons.items() if k in METRIC_BY_NAME)
    messages = "".join(f"<div class='msg {escape(m['role'])}'><b>{escape(m['role'])}</b>: {escape(m['content'])}</div>"
                       for m in row.transcript)
    error = row.error
    extra = f"<p class='fail'>{escape(error.phase)}: {escape(error.message)}</p>" if error else ""
    flags = row.injection_flags
    if flags:
        extra += ("<p class='fail'>text that looks addressed to the judge (flagged; 'removed' marks exact imitations "
                  "of its answer format taken out before judging): " + escape("; ".join(
                      f"turn {f.turn}: {f.kind}{' (removed)' if f.removed else ''} ({f.excerpt})"
                      for f in flags)) + "</p>")
    shortfalls = "; ".join(f"{s.metric} {s.value} &lt; {s.floor}" for s in row.shortfalls)
    status = escape(row.status)
    case = escape(row.case_id)
    tag = verdict.replace(" ", "-")
    expected = f" (expected: {escape(row.expected)})" if row.expected and verdict != "pass" else ""
    return (f"<details class='dialogue' data-domains='{escape(' '.join(row.domains))}' data-status='{status}' "
            f"data-verdict='{tag}'><summary><b>{case}</b><span class='badge b-{status}'>{status}</span>"
            f"<span class='badge v-{tag}'>{escape(verdict)}{expected}</span> "
            f"<span class='muted'>{escape(score_text)}; {row.turns} turns, {escape(str(row.termination))}"
            f"</span></summary>{extra}"
            + (f"<p>below floors: {shortfalls}</p>" if shortfalls else "")
            + (f"<ul class='reasons'>{reasons}</ul>" if reasons else "")
            + f"<div class='transcript'>{messages}</div></details>")


def _comparison(report: RunReport) -> str:
    """The --baseline comparison: its coverage, each paired difference with its interval, and its verdict."""
    c = report.comparison
    if c is None:
        return ""
    cov = c.coverage
    coverage = (f"<p>{cov.paired} of the base's {cov.base} scored scenarios paired; only in base {cov.only_in_base}, only "
                f"in candidate {cov.only_in_candidate}, errored in the candidate {cov.errored_in_candidate}.</p>"
                if cov is not None else "")
    rows = "".join(
        f"<tr class='{'fail' if r.significant_drop and r.gated else ''}'><td>{escape(GROUP_TITLES.get(r.group, r.group))}</td>"
        f"<td>{escape(SHORT[r.metric])}</td><td>{r.n}</td><td>{estimate_signed(r.difference)}</td>"
        f"<td>{'significant drop' if r.significant_drop else '' if r.evaluated else 'not evaluated'}</td></tr>"
        for r in c.results if r.difference.mean is not None)
    verdict = ("<p class='fail'>" + escape(c.coverage_failure or "a significant drop beyond the judge's drift") + "</p>"
               if c.failed else "<p class='pass'>no significant drop beyond the judge's drift</p>")
    return (f"<h2>Baseline comparison</h2><p class='muted'>candidate - base, {c.confidence:.0%} CI over paired scenarios, "
            f"{escape(c.margin_text())}</p>{coverage}<table><tr><th>group</th><th>metric</th><th>n</th><th>difference</th>"
            f"<th></th></tr>{rows}</table>{verdict}")


def _calibration(report: RunReport) -> str:
    """The judge's calibration beside its scores: how it did on labelled dialogues, or a warning that it was not checked."""
    c = report.judge_calibration
    if c is None:
        return ("<h2>Judge calibration</h2><p class='muted'>This run names no calibration of its judge: run "
                "<code>personalens calibrate --judge-model SPEC</code> and pass <code>--judge-calibration REPORT</code>.</p>")
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{d.n}</td><td>{_fmt(d.accuracy)}</td><td>{_fmt(d.qwk)}</td><td>{_fmt(d.spearman)}</td>"
        f"<td>{_fmt(d.consistency)}</td><td>{_fmt(c.injection[name].mean_gain) if name in c.injection else '-'}</td></tr>"
        for name, d in c.dimensions.items())
    missed = "".join(f"<li class='fail'>{escape(line)}</li>" for line in c.failures)
    return (f"<h2>Judge calibration</h2><p class='{'pass' if c.passed else 'fail'}'>{escape(c.summary_line())}</p>"
            "<table><tr><th>dimension</th><th>n</th><th>accuracy</th><th>QWK</th><th>Spearman</th><th>consistency</th>"
            f"<th>injection gain</th></tr>{rows}</table>" + (f"<ul>{missed}</ul>" if missed else ""))


def render_html(report: RunReport) -> str:
    rows = report.rows
    run = report.run
    domains = sorted({d for r in rows for d in r.domains})
    title = f"PersonaLens report - {run.get('assistant', 'assistant')}"
    costs = report.cost.roles if report.cost is not None else {}
    ledger = "".join(f"<tr><td>{escape(role.replace('_', ' '))}</td><td>{v['calls']}</td><td>{v['prompt_tokens']:,}</td>"
                     f"<td>{v['completion_tokens']:,}</td><td>{role_cost_html(costs.get(role))}</td></tr>"
                     for role, v in report.ledger.total.items())
    total = report.cost
    ledger += ("" if total is None else f"<tr><td>total</td><td></td><td></td><td></td><td>"
               f"{escape(format_cost(total.total_spent) if total.total_spent is not None else 'cost unknown')}</td></tr>")
    leak = report.preference_leaks
    leak_html = (f"<p>Preference leaks in the user agent's opening: {leak.leaked} of {leak.checked} "
                 f"({leak.rate:.0%}).</p>" if leak and leak.checked else "")
    leak_html += (f"<p class='muted'>The leak check failed on {leak.failed} dialogue(s); their scores stand.</p>"
                  if leak and leak.failed else "")
    leak_html += retest_html(report)
    sections = {
        "verdict": verdict_html(report), "changes": changes_html(report), "checks": checks_html(report),
        "comparison": _comparison(report), "table": _table(report),
        "domain_bars": "".join(_domain_bars(report, m) for m in HEADLINE),
        "distributions": "".join(_distribution(rows, m.name) for m in METRICS),
        "turn_curves": _turn_curves(report.turn_curves, report.turn_level_failed), "calibration": _calibration(report),
        "ledger": ledger, "leaks": leak_html, "dialogues": _dialogues(report), "data": _json_for_script(report),
        "css": asset("report.css"), "script": asset("report.js"),
    }
    return page().render(title=title, run={k: str(v) for k, v in run.items()}, counts=report.counts, domains=domains,
                         created_at=report.created_at, confidence=f"{report.confidence:.0%}",
                         **{name: markup(text) for name, text in sections.items()})


@cache
def page() -> Any:
    """The page's template (``assets/report.html.j2``): the sections come already written, as markup; every other
    value is escaped by the template."""
    import jinja2  # loaded when a page is written, not with the plugin

    environment = jinja2.Environment(autoescape=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return environment.from_string(asset("report.html.j2"))


def markup(text: str) -> Any:
    """HTML that this module wrote (its own values escaped as it wrote them), for the template to take as it is."""
    from markupsafe import Markup

    return Markup(text)


#: the most dialogues a page shows: beyond it, those that did not pass first (every transcript is in the results file)
DIALOGUES_SHOWN = 500


def _dialogues(report: RunReport) -> str:
    """The dialogues, read from the whole rows one at a time; over :data:`DIALOGUES_SHOWN` cases, the cases that
    did not pass come first, then the others in row order, and a line says how many are left out and where."""
    rows = report.rows
    shown: list[int] | None = None  # positions in the rows, in row order (only these rows are read again)
    if len(rows) > DIALOGUES_SHOWN:
        verdicts = [report.verdict.of(r.case_id, r.status) for r in rows]
        shown = sorted(sorted(range(len(rows)), key=lambda i: (verdicts[i] == "pass", i))[:DIALOGUES_SHOWN])
    parts = [_dialogue(r, report.verdict.of(r.case_id, r.status)) for r in report.whole_rows(shown)]
    if shown is not None:
        parts.append(f"<p class='muted'>{len(rows) - len(shown):,} more dialogues are not shown here (this page shows "
                     f"{DIALOGUES_SHOWN:,}, those that did not pass first): every transcript is in the run's results "
                     "file and its transcripts folder.</p>")
    return "".join(parts)


def _json_for_script(report: RunReport) -> str:
    """The report (its rows and per-case ledger aside: report.json has them) as JSON that no text in it can end or
    re-open: ``<``, ``>`` and ``&`` escaped."""
    text = report.model_dump_json(exclude={"rows": True, "ledger": {"per_scenario"}})
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


# -- the top of the page: the verdict, the scenarios that changed, the checks -----------------------------
# Every text from a row is escaped: a bot's reply is shown, never interpreted.

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


# -- beside the scores: what each role cost, the judge's test-retest agreement ---------------------------

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
