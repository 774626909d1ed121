"""What a reviewer of a pull request sees: the job summary in Markdown (summary.md, appended to GitHub's step
summary) and the top of the HTML report. A bot recorded on main, then changed at turn 2 of one scenario: offline
the case is not scored (inconclusive); with model credentials and new_episodes it is scored live from that turn
and regresses. Each time the verdict is the first line, and the changed scenario shows its first differing
turn with the old and the new reply, base -> candidate scores and the replayed/live split - a reply full of
Markdown and HTML shown as text, never interpreted."""

from __future__ import annotations

import json
import re
from html import escape

import pytest

from personalens_testkit.cli import main as cli
from personalens_testkit.gating.verdict import RunCheck
from personalens_testkit.report.changes import check_detail
from personalens_testkit.report.markdown import STEP_SUMMARY_CAP, append_step_summary, fenced, inline
from personalens_testkit.secrets import redact

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_results, suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge"]
SELECTION = ["--profiles", "7", "--domains", "Alarm", "-k", "task-1 or task-2", "--assistant", "my-bot"]
DEAD = "http://127.0.0.1:9/v1"
OLD = "Your usual 7:00 alarm is set, as you like it."
#: the changed reply: untrusted text that tries to end a fence, a <details> and to run a script
NEW = ("I forgot your habits. </details><script>alert(1)</script>\n````\n# not a heading\n"
       "| not | a table | [link](http://evil.example) **bold** token=SECRET_VALUE")
BOT = f'''
import os

def reply(request):
    if os.environ.get("BOT_CHANGED") and request["scenario_id"].endswith("task-2") and request["turn"] >= 2:
        return {NEW!r}.replace("SECRET_VALUE", os.environ["BOT_API_KEY"])
    return {OLD!r}
'''
SECRET = "sk-test-0123456789abcdef"


def forgetful_gets_1(request_text: str) -> dict:
    """The fake judge reads the dialogue: personalization 1 once the bot forgot, else 3."""
    return {"personalization": 1 if "I forgot your habits" in request_text else 3}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    suite_project(pytester, '[assistants.my-bot]\nkind = "python"\ncallable = "mybot:reply"\npath = ["."]\n')
    pytester.makepyfile(mybot=BOT)
    pytester._monkeypatch.setenv("BOT_API_KEY", SECRET)  # noqa: SLF001
    return pytester


def run(project: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    project._monkeypatch.setenv("OPENAI_BASE_URL", url)  # noqa: SLF001
    return project.runpytest(*SPECS, *SELECTION, *args)


def run_folder(project: pytest.Pytester):
    return latest_results(project.path).parent


def rendered(markdown: str) -> str:
    """The Markdown as a CommonMark renderer with raw HTML and tables on (as GitHub's) turns it into HTML."""
    import markdown_it  # installed with the testkit's dependencies (rich, through deepeval)

    return markdown_it.MarkdownIt("commonmark").enable("table").render(markdown)


def assert_reply_shown_as_text(markdown: str, reply: str) -> None:
    html = rendered(markdown)
    assert "<script>" not in html and "</details>" not in html and "<h1>not a heading" not in html
    assert "<a href" not in html and "<strong>" not in html
    blocks = re.findall(r"<code class=\"language-text\">(.*?)</code>", html, flags=re.S)
    from html import unescape
    assert reply + "\n" in [unescape(b) for b in blocks]  # the whole reply, as it is, in one block


def test_a_changed_bot_is_shown_with_its_turn_its_replies_and_its_scores(project, tmp_path):
    with FakeLLM(Script(terminate_after=2, judge_rule=forgetful_gets_1)) as fake:
        recording = run(project, fake.url, "--record-mode", "once")
    recording.assert_outcomes(passed=2, deselected=3)
    summary = (run_folder(project) / "summary.md").read_text()
    # two scenarios are fewer than any gate needs (min_n 10): inconclusive, never passed
    assert summary.splitlines()[0].startswith("## PersonaLens: inconclusive - gate Task completion rate, single-domain, "
                                              "mean: NOT EVALUATED, not passed (n=2 scenarios; a gate needs 10)")
    assert "None: every bot reply matched the recording" in summary
    baseline = str(project.path / "cassettes" / "my-bot" / "results.jsonl.xz")
    project._monkeypatch.setenv("BOT_CHANGED", "1")  # noqa: SLF001

    # no model credentials: the changed case is not scored - the run is inconclusive, not regressed
    offline = run(project, DEAD, "--baseline", baseline)
    assert offline.ret == pytest.ExitCode.TESTS_FAILED
    (row,) = [r for r in map(json.loads, latest_results(project.path).read_text().splitlines())
              if r.get("reply_change") is not None]
    assert row["scenario_id"] == "user7-SD-Alarm-task-2" and row["reply_change"]["turn"] == 2
    assert row["reply_change"]["recorded"] == OLD and SECRET not in json.dumps(row)  # redacted as rows are
    summary = (run_folder(project) / "summary.md").read_text()
    assert summary.splitlines()[0].startswith("## PersonaLens: inconclusive - 1 case(s) not scored: your bot's replies "
                                              "differ from the recording")
    assert "| user7-SD-Alarm-task-2 | reply changed | yes -> - | 3 -> - |" in summary
    assert "user7-SD-Alarm-task-1 |" not in summary  # unchanged: replayed to the end, not listed

    # model credentials: live from the changed turn, scored, a regression against the base's scores
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    project._monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))  # noqa: SLF001
    from personalens_testkit.gating.thresholds import default_thresholds_path

    shipped = default_thresholds_path().read_text()  # this fake judge never varies: its floor misses may gate
    (project.path / "thresholds.yaml").write_text(shipped.replace("live_judged_floors: confirm", "live_judged_floors: gate"))
    with FakeLLM(Script(terminate_after=2, judge_rule=forgetful_gets_1)) as fake:
        live = run(project, fake.url, "--record-mode", "new_episodes", "--baseline", baseline)
    assert live.ret == pytest.ExitCode.TESTS_FAILED
    live.stdout.fnmatch_lines(["personalens: job summary report -> */summary.md",
                               f"personalens: GitHub step summary report -> {step}"])
    folder = run_folder(project)
    summary = (folder / "summary.md").read_text()
    lines = summary.splitlines()
    assert lines[0] == "## PersonaLens: regressed - 1 regression(s): user7-SD-Alarm-task-2"
    assert "### Gates and checks" in summary and "### Baseline (candidate - base" in summary
    assert "| user7-SD-Alarm-task-2 | regression | yes -> yes | 3 -> 1 | 4 -> 4 | 4 -> 4 | 2 |" in summary
    assert "user agent 2 replayed, 1 live; assistant 3 live; judge 6 live" in summary
    assert "#### user7-SD-Alarm-task-2: reply changed at turn 2; scores changed; regression" in summary
    assert "Turn 2, the recorded (old) reply:\n\n```text\n" + OLD + "\n```" in summary
    shown_new = redact(NEW.replace("SECRET_VALUE", SECRET))
    assert shown_new != NEW.replace("SECRET_VALUE", SECRET)
    assert SECRET not in summary and "`````text\n" + shown_new + "\n`````" in summary
    assert_reply_shown_as_text(summary, shown_new)
    assert step.read_text() == "earlier step\n\n" + summary  # appended to the step's summary

    html = (folder / "report.html").read_text()
    body = html[html.index("<body>"):]
    assert body.index("id='verdict'") < body.index("Scenarios that changed (1)") < body.index("Gates and checks")
    assert "<b>Verdict: regressed - 1 regression(s): user7-SD-Alarm-task-2</b>" in html
    assert "&lt;/details&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "comparison above" not in html
    report = json.loads((folder / "report.json").read_text())
    shown = body[:body.index("<script type=\"application/json\"")]  # what the page shows: each check once
    for gate in report["verdict"]["checks"]:
        row = f"<td>{escape(gate['name'])}</td><td>{gate['outcome']}</td><td>{escape(check_detail(RunCheck(**gate)))}</td>"
        table = shown[shown.index("Gates and checks"):]  # the verdict above lists every reason once, the table its row
        assert shown.count(row) == 1 and escape(gate["message"]) not in table, gate

    # the commands write it too, from the rows
    out = tmp_path / "again.md"
    assert cli(["report", str(latest_results(project.path)), "--summary-md", str(out)]) == 1
    again = out.read_text()
    assert again.splitlines()[0] == lines[0] and "| user7-SD-Alarm-task-2 | regression | yes | 1 | 4 | 4 | 2 |" in again


def test_untrusted_text_stays_text():
    for text in ["plain", "``` fence", "a ```` b `````", "</details><script>x</script>", "`"]:
        block = fenced(text)
        fence = block.splitlines()[0].removesuffix("text")
        assert set(fence) == {"`"} and len(fence) > max(map(len, re.findall(r"`+", text)), default=0)
        assert_reply_shown_as_text(block, text)
    assert inline("a | b <i>*c*</i> [d](e) &lt;\nf") == r"a \| b &lt;i>\*c\*&lt;/i> \[d\](e) &amp;lt; f"
    assert "<" not in rendered(inline("<img src=x onerror=alert(1)>")).replace("<p>", "").replace("</p>", "")


def test_the_step_summary_is_appended_only_when_github_names_one_and_never_past_its_cap(tmp_path):
    text = "## PersonaLens: passed - 1 cases\n\nmore\n"
    assert append_step_summary(text, {}) is None
    step = tmp_path / "summary"
    assert append_step_summary(text, {"GITHUB_STEP_SUMMARY": str(step)}) == step and step.read_text() == text
    step.write_text("x" * (STEP_SUMMARY_CAP - 10))
    append_step_summary(text, {"GITHUB_STEP_SUMMARY": str(step)})
    added = step.read_text()[STEP_SUMMARY_CAP - 10:]
    assert added.startswith("\n## PersonaLens: passed - 1 cases\n") and "more" not in added
