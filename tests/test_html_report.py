"""The HTML report in a real browser: Debian's headless Chromium loads the file (no network),
runs its script, and we check the charts, the dialogues and the filters, and keep a screenshot.

Needs /usr/bin/chromium (``apt-get install chromium``; .ci/run installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from personalens_testkit.gating.thresholds import Thresholds
from personalens_testkit.report.html import render_html
from personalens_testkit.report.model import build_report
from personalens_testkit.results.rows import ResultRow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def rows() -> list[dict]:
    made = []
    for i, (domain, kind, status, p) in enumerate([
        ("Movies", "sd", "passed", 3), ("Movies", "sd", "failed", 1), ("Music", "sd", "passed", 4),
        ("Alarm", "sd", "error", None), ("Music", "md", "failed", 2), ("Alarm", "sd", "passed", 2),
    ]):
        scores = None if p is None else {"task_completion": p > 1, "personalization": p, "naturalness_user": 4,
                                         "naturalness_assistant": 3 + i % 3, "coherence_user": 5, "coherence_assistant": 4}
        made.append({
            "scenario_id": f"user{i}-{kind.upper()}-{domain}-task-1", "task_kind": kind,
            "domains": [domain] + (["Events"] if kind == "md" else []), "status": status, "scores": scores,
            "reasons": {} if p is None else {"personalization": f"reason <{i}> & more"},
            "shortfalls": [{"metric": "personalization", "value": p, "floor": 2}] if status == "failed" else [],
            "error": {"phase": "the dialogue", "message": "model down", "kind": "ModelError"} if p is None else None,
            "turns": 3, "termination": "user_terminated",
            "transcript": [{"role": "user", "content": "Set my alarm <b>now</b>"}, {"role": "assistant", "content": "Done."}],
            "turn_personalization": None if p is None else [1, 2, p], "calls": [
                {"role": "judge", "label": "personalization", "turn": 0, "seconds": 1.0, "prompt_tokens": 900,
                 "completion_tokens": 40}],
        })
    return made


def browse(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (.ci/run installs it)")
    return subprocess.run([CHROMIUM, *FLAGS, *extra, url], capture_output=True, text=True, timeout=120)


def test_the_html_report_renders_in_chromium(tmp_path):
    report = build_report([ResultRow.model_validate(row) for row in rows()], Thresholds(),
                          run={"assistant": "my-bot", "run_id": "r1"})
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    html = page.read_text()
    assert "http://" not in html and "https://" not in html  # nothing to fetch
    assert "Set my alarm &lt;b&gt;now&lt;/b&gt;" in html and "reason &lt;0&gt; &amp; more" in html  # escaped

    dom = browse(page.as_uri(), "--dump-dom", "--virtual-time-budget=3000")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    assert len(re.findall(r'class="chart chart-domain"', text)) == 4
    assert len(re.findall(r'<rect class="bar"', text)) == 4 * 3  # Alarm, Movies, Music in each
    assert len(re.findall(r'class="chart chart-dist"', text)) == 6
    # the turn-level curves apart, as the paper reports them: single-domain and multi-domain, 3 turns each
    assert len(re.findall(r'class="chart chart-turns"', text)) == 2 and text.count("<circle") == 6
    assert "<h3>Single-domain</h3>" in text and "<h3>Multi-domain</h3>" in text and "By domain (single-domain)" in text
    assert len(re.findall(r'<details class="dialogue"', text)) == 6
    assert '<span id="f-count" class="muted">6 shown</span>' in text  # the script ran

    filtered = browse(page.as_uri() + "#domain=Movies&verdict=failed", "--dump-dom", "--virtual-time-budget=3000")
    assert '<span id="f-count" class="muted">1 shown</span>' in filtered.stdout
    assert len(re.findall(r'<details class="dialogue"[^>]*style="display: none;"', filtered.stdout)) == 5

    shot = tmp_path / "report.png"
    done = browse(page.as_uri(), f"--screenshot={shot}", "--window-size=1280,1800")
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_the_page_template_escapes_what_it_is_given_and_keeps_the_sections_markup():
    """The page is a template (report/assets/report.html.j2): a value from the run (a model name, a domain) is
    escaped where it lands; the sections the module wrote stay markup."""
    data = rows()
    data[0]["domains"] = ['Movies"><script>alert(1)</script>']
    report = build_report([ResultRow.model_validate(r) for r in data], Thresholds(),
                          run={"run_id": "r&1", "judge_model": "<b>judge</b>", "assistant": "bot</title><i>"})
    page = render_html(report)
    assert "<script>alert(1)</script>" not in page and "<b>judge</b>" not in page and "</title><i>" not in page
    assert "&lt;b&gt;judge&lt;/b&gt;" in page and "run r&amp;1;" in page
    assert page.count("<details class='dialogue'") == 6 and "<table class='table3'>" in page
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</body></html>\n")
