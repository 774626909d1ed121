"""Gates, summaries and report files through the plugin (live against a loopback model
server), and the report/compare/agreement commands."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from personalens_testkit.cli import main as cli

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_results, suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
ALARM = ["--profiles", "7", "--domains", "Alarm", "--max-turns", "2"]
#: 13 single-domain scenarios: enough for a constant drop to be told from noise
WIDE = ["--profiles", "7", "--domains", "Alarm,Books,Calendar", "--max-turns", "2"]
GATES = """
version: 1
scenario:
  task_completion: null
  personalization: null
  naturalness_assistant: null
  coherence_assistant: null
aggregate:
  min_n: 1
  gates:
{gates}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return suite_project(pytester, 'record_mode = "all"\n')


def gates_file(project: pytest.Pytester, *gates: str) -> None:
    body = "\n".join(f"    - {g}" for g in gates) if gates else "    []"
    (project.path / "thresholds.yaml").write_text(GATES.format(gates=body).replace("gates:\n    []", "gates: []"))


def run(project: pytest.Pytester, fake: FakeLLM, *args: str) -> pytest.RunResult:
    project._monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # noqa: SLF001
    return project.runpytest(*SPECS, *args)


def run_dir(project: pytest.Pytester) -> Path:
    return latest_results(project.path).parent


def test_summary_report_files_and_a_passing_gate(project):
    gates_file(project, "{metric: personalization, scope: overall, statistic: mean, min: 1.7}")
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake, *ALARM)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "PersonaLens summary (assistant side; mean over scenarios [[]95% CI]; n: scored cases)",
        "TCR counts your bot's errors as failures; the user agent's, judge's and setup's errors (infra) are counted "
        "apart, never scored",
        "                     n bot err infra                TCR                  P               Nat.               Coh.",
        "single-domain        4       0     0   1.00 [[]0.45-1.00]   3.00 [[]1.58-4.00]   4.00 [[]1.87-5.00]   4.00 [[]1.87-5.00]",
        "per domain (single-domain scenarios)",
        "Alarm                4       0     0*",
        "aggregate gates:",
        # green only when shown: the interval's low end at or above the threshold less the margin (1.7 - 0.2)
        "  gate Personalization, all, mean: passed: 3.000 vs threshold 1.7 (mean 3.000 [[]1.577, 4.000], n=4)",
        "calls and tokens: user agent 8 calls, * prompt + * completion; assistant 8 calls, *; judge 24 calls, *",
        "personalens: JSON report -> */report.json",
        "personalens: JUnit XML report -> */junit.xml",
        "personalens: HTML report -> */report.html",
    ])
    report = json.loads((run_dir(project) / "report.json").read_text())
    assert report["counts"] == {"cases": 4, "passed": 4}
    assert report["aggregates"]["sd"]["metrics"]["personalization"]["mean"] == 3.0
    assert report["gates"][0]["passed"] is True and report["gates_enforced"] is True
    assert report["ledger"]["total"]["judge"]["calls"] == 24
    assert set(report["ledger"]["per_scenario"]) == {f"user7-SD-Alarm-task-{n}" for n in range(1, 5)}
    assert report["run"]["judge_model"] == "openai:fake-judge" and report["settings"]["record_mode"] == "all"
    assert len(report["rows"]) == 4
    suite = ET.parse(run_dir(project) / "junit.xml").getroot().find("testsuite")
    case = suite.find("testcase")
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    assert case.get("name") == "user7-SD-Alarm-task-1" and props["personalization"] == "3"
    assert props["task_completion"] == "true" and suite.get("tests") == "4"


def test_a_gate_above_the_achieved_value_fails_the_run_with_its_reason(project):
    gates_file(project, "{metric: personalization, scope: sd, statistic: lower_bound, min: 3.5}",
               "{metric: task_completion, scope: md, min: 0.9}")
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake, *ALARM)
    result.assert_outcomes(passed=4, deselected=1)
    # four identical scores are no proof either way: the interval of constant data keeps its width, and a gate it
    # straddles is inconclusive - with how many more scenarios would likely decide it - not red
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "personalens: inconclusive: gate Personalization, single-domain, lower bound of the 95% CI: INCONCLUSIVE, not "
        "passed: mean 3.000 [[]1.577, 4.000], n=4, threshold 3.5: not shown at or above 3.5 (green), nor below 3.47 "
        "(red); it rules out a value below 1.58; about * more scenarios would likely decide it",
    ])
    # no md case: not evaluated - not a pass, and not a failure unless the thresholds say so
    assert ("gate Task completion rate, multi-domain, mean: NOT EVALUATED, not passed (n=0 scenarios; a gate "
            "needs 1)") in result.stdout.str()
    junit = ET.parse(run_dir(project) / "junit.xml").getroot()
    (checks,) = [suite for suite in junit if suite.get("name") == "personalens_run"]
    assert (checks.get("tests"), checks.get("failures"), checks.get("skipped")) == ("4", "0", "2")  # the user agent's too
    skipped = [case.get("name") for case in checks if case.find("skipped") is not None]
    assert "gate Personalization, single-domain, lower bound of the 95% CI" in skipped  # inconclusive: not a failure


def test_bad_aggregate_gates_stop_the_run_with_one_line(project):
    gates_file(project, "{metric: personalization, scope: domain:Cinema, min: 2}")
    with FakeLLM() as fake:
        result = run(project, fake, *ALARM)
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # before any case, in one line
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and "thresholds.yaml: aggregate.gates.0.scope: must be overall, sd, md, each_domain or " \
        "domain:<Name>" in errors[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str() and fake.requests == []


def test_repeats_report_pass_hat_k_and_spread(project):
    gates_file(project)
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake, *ALARM, "--repeat", "2", "--record-mode", "once")
    result.assert_outcomes(passed=8, deselected=1)
    report = json.loads((run_dir(project) / "report.json").read_text())
    assert report["repeats"]["k"] == 2 and report["repeats"]["pass_hat_k"] == 1.0
    assert report["repeats"]["spread"]["personalization"] == {"mean_range": 0.0, "scenarios_that_vary": 0, "scenarios": 4}
    assert "repeats: k=2 over 4 scenarios; task completion pass^1 1.00, pass^2 1.00" in result.stdout.str()
    names = sorted(p.name for p in (project.path / "cassettes" / "reference").glob("*.json.xz"))
    assert "user7-SD-Alarm-task-1-r2.json.xz" in names and len(names) == 8
    assert sorted(r["repeat"] for r in report["rows"]) == [1, 1, 1, 1, 2, 2, 2, 2]


def test_turn_level_and_leak_check(project):
    """--turn-level judges every prefix of the dialogue in one call, as the paper's chain-of-turn prompt does."""
    gates_file(project)
    with FakeLLM(Script(terminate_after=2)) as fake:
        result = run(project, fake, *ALARM, "-k", "task-1", "--turn-level", "--leak-check")
    result.assert_outcomes(passed=1, deselected=4)
    (row,) = json.loads((run_dir(project) / "report.json").read_text())["rows"]
    replies = [m for m in row["transcript"] if m["role"] == "assistant"]
    assert row["turn_personalization"] == [3] * len(replies) and len(replies) >= 2
    assert row["preference_leak"] == {"leaked": True, "explanation": "goal met"}
    labels = [c["label"] for c in row["calls"] if c["role"] == "judge"]
    assert labels[-2:] == ["personalization by turn", "preference leak"]
    (chain,) = [body for body in fake.requests if "Judge the conversation turn by turn" in json.dumps(body)]
    scores = chain["response_format"]["json_schema"]["schema"]["properties"]["scores"]
    assert scores["minItems"] == scores["maxItems"] == len(replies)  # exactly one score per assistant reply
    assert "preference leaks in the user agent's opening: 1 of 1 (100%)" in result.stdout.str()
    report = json.loads((run_dir(project) / "report.json").read_text())
    curve = [{"turn": t, "n": 1, "mean": 3} for t in range(1, len(replies) + 1)]
    assert report["turn_curves"] == {"single-domain": curve, f"domain:{row['domains'][0]}": curve}


def test_a_failed_optional_analysis_never_changes_the_scores(project):
    """A turn-level answer off its scale and an unreadable leak verdict are those analyses' own failures: the
    dialogue keeps the scores it has without them (the paper's Table 3 never moves with an option)."""
    gates_file(project)

    def rule(text: str) -> dict:
        if "Judge the conversation turn by turn" in text:
            return {"personalization": 9}
        return {"task_completion": "perhaps"} if "preference_leak" in text else {}

    with FakeLLM(Script(terminate_after=2)) as fake:
        plain = run(project, fake, *ALARM, "-k", "task-1")
    plain.assert_outcomes(passed=1, deselected=4)
    (without,) = json.loads((run_dir(project) / "report.json").read_text())["rows"]
    with FakeLLM(Script(terminate_after=2, judge_rule=rule)) as fake:
        result = run(project, fake, *ALARM, "-k", "task-1", "--turn-level", "--leak-check")
    result.assert_outcomes(passed=1, deselected=4)
    report = json.loads((run_dir(project) / "report.json").read_text())
    (row,) = report["rows"]
    assert row["status"] == "passed" and row["error"] is None and row["scores"] == without["scores"]
    assert row["turn_personalization"] is None and row["preference_leak"] is None
    assert set(row["analysis_errors"]) == {"turn_level", "leak_check"}, row["analysis_errors"]
    assert report["turn_level_failed"] == 1 and report["preference_leaks"]["failed"] == 1
    assert report["turn_curves"] == {} and report["preference_leaks"]["checked"] == 0
    assert "optional analyses that failed (the dialogues' scores stand): leak check 1 dialogue(s), turn-level 1 " \
           "dialogue(s)" in result.stdout.str()


def test_the_turn_curves_are_apart_for_single_and_multi_domain_and_each_domain():
    """The paper's Figure 5 reports single-domain and multi-domain dialogues apart: pooled, a multi-domain
    dialogue's later turns would pull the single-domain curve."""
    from personalens_testkit.report.model import turn_curves
    from personalens_testkit.results.rows import ResultRow

    def row(sid: str, kind: str, domains: list[str], turns: list[int]) -> ResultRow:
        return ResultRow(scenario_id=sid, status="passed", task_kind=kind, domains=domains, turn_personalization=turns)

    curves = turn_curves([row("a", "sd", ["Alarm"], [1, 2]), row("b", "sd", ["Hotels"], [3]),
                          row("c", "md", ["Alarm", "Hotels"], [4, 4, 4]), row("d", "sd", ["Alarm"], [])])
    means = {group: [(p.turn, p.n, p.mean) for p in curve] for group, curve in curves.items()}
    assert list(means) == ["single-domain", "multi-domain", "domain:Alarm", "domain:Hotels"]
    assert means["single-domain"] == [(1, 2, 2.0), (2, 1, 2.0)] and means["multi-domain"] == [(1, 1, 4), (2, 1, 4), (3, 1, 4)]
    assert means["domain:Alarm"] == [(1, 1, 1), (2, 1, 2)] and means["domain:Hotels"] == [(1, 1, 3)]


def test_turn_level_per_turn_makes_one_call_per_reply(project):
    gates_file(project)
    with FakeLLM(Script(terminate_after=2)) as fake:
        result = run(project, fake, *ALARM, "-k", "task-1", "--turn-level", "--turn-level-method", "per-turn")
    result.assert_outcomes(passed=1, deselected=4)
    (row,) = json.loads((run_dir(project) / "report.json").read_text())["rows"]
    replies = [m for m in row["transcript"] if m["role"] == "assistant"]
    labels = [c["label"] for c in row["calls"] if c["role"] == "judge"]
    assert labels[-len(replies):] == [f"personalization after turn {t}" for t in range(1, len(replies) + 1)]
    assert row["turn_personalization"] == [3] * len(replies)


def test_a_baseline_gate_fails_on_a_significant_drop(project):
    gates_file(project)
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake, *WIDE)
    base = run_dir(project) / "report.json"
    worse = Script(terminate_after=1)
    worse.scores = {**worse.scores, "personalization": 1}
    with FakeLLM(worse) as fake:
        result = run(project, fake, *WIDE, "--baseline", str(base))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "paired comparison on 13 shared scenarios*",
        "coverage: 13 of the base's 13 scored scenarios paired; only in base 0, only in candidate 0, errored in the "
        "candidate 0, errored in the base 0*",
        "  all                      P      n=13    -2.000 [[]*] SIGNIFICANT DROP*",
        "verdict: a significant drop beyond the judge's drift",
        "personalens: FAILED baseline: a score dropped significantly beyond the judge's drift*",
    ])
    junit = ET.parse(run_dir(project) / "junit.xml").getroot()
    (checks,) = [suite for suite in junit if suite.get("name") == "personalens_run"]
    outcomes = {case.get("name"): "failed" if case.find("failure") is not None else "passed" for case in checks}
    assert outcomes == {"infrastructure errors": "passed", "user agent": "passed", "baseline coverage": "passed",
                        "baseline comparison": "failed"}
    # a margin wider than the drop's whole interval tolerates it: shown within the margin is green
    with FakeLLM(worse) as fake:
        tolerant = run(project, fake, *WIDE, "--baseline", str(base), "--baseline-margin", "2.9")
    assert tolerant.ret == 0


def test_report_compare_and_agreement_commands(project, capsys, tmp_path):
    gates_file(project)
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake, *WIDE)
    first = run_dir(project) / "results.jsonl"
    harsher = Script(terminate_after=1)
    harsher.scores = {**harsher.scores, "personalization": 1, "coherence_assistant": 3}
    with FakeLLM(harsher) as fake:
        run(project, fake, *WIDE)
    second = run_dir(project) / "results.jsonl"

    assert cli(["report", str(first), "--html", str(tmp_path / "r.html"), "--junit", str(tmp_path / "j.xml"),
                "--thresholds", str(project.path / "thresholds.yaml")]) == 0
    out = capsys.readouterr().out
    assert "single-domain       13       0     0" in out and (tmp_path / "r.html").is_file()
    assert (tmp_path / "j.xml").is_file() and "(13 cases: 0 regression(s)" in out and "verdict: REGRESSED" not in out

    assert cli(["compare", str(first), str(first)]) == 0
    assert "verdict: no drop that matters" in capsys.readouterr().out
    assert cli(["compare", str(first), str(second)]) == 1
    assert re.search(r"P      n=13    -2\.000 \[-2\.\d+, -1\.\d+\] SIGNIFICANT DROP", capsys.readouterr().out)
    # a stated margin moves the green bar: a drop shown within it does not matter
    assert cli(["compare", str(first), str(second), "--margin", "2.95"]) == 0
    capsys.readouterr()
    (tmp_path / "bad.json").write_text("{not json")
    assert cli(["compare", str(tmp_path / "bad.json"), str(first)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("personalens: error: base ") and "not JSON or JSON lines" in err and err.count("\n") == 1

    assert cli(["agreement", str(first), str(second)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "agreement on 13 shared dialogues (only in A: 0, only in B: 0)"
    assert [line.split()[:3] for line in lines[2:4]] == [["task_completion", "13", "1.000"],
                                                         ["personalization", "13", "0.000"]]


def test_agreement_with_human_labels(tmp_path, capsys):
    judge = tmp_path / "results.jsonl"
    labels = tmp_path / "human.jsonl"
    rows, humans = [], []
    for i, (tc, p, h_tc, h_p) in enumerate([(True, 3, True, 3), (True, 2, False, 2), (False, 1, False, 2),
                                             (True, 4, True, 4), (False, 2, False, 1), (True, 3, True, 3)]):
        scores = {"task_completion": tc, "personalization": p, "naturalness_user": 4, "naturalness_assistant": 4,
                  "coherence_user": 4, "coherence_assistant": 4}
        rows.append({"scenario_id": f"user{i}-SD-Alarm-task-1", "status": "passed", "scores": scores})
        humans.append({"scenario_id": f"user{i}-SD-Alarm-task-1", "task_completion": h_tc, "personalization": h_p})
    humans.append({"scenario_id": "user99-SD-Alarm-task-1", "personalization": 2})
    judge.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels.write_text("".join(json.dumps(r) + "\n" for r in humans))
    assert cli(["agreement", str(judge), str(labels)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "agreement on 6 shared dialogues (only in A: 0, only in B: 1)"
    by_name = {line.split()[0]: line.split()[1:] for line in out[2:]}
    # task completion: 2x2 [[3, 1], [0, 2]] -> p_o 5/6, p_e (4/6*3/6 + 2/6*3/6) = 1/2 -> kappa 2/3
    assert by_name["task_completion"][:3] == ["6", "0.833", "0.667"]
    assert by_name["personalization"][:2] == ["6", "0.667"] and by_name["naturalness_user"][0] == "0"


def test_html_and_commands_polish(project, capsys, tmp_path):
    """A --baseline run's HTML has its comparison; `personalens report` keeps the run's metadata; rated bars
    start at the bottom of their scale; `personalens compare ... | head` ends quietly."""
    import subprocess
    import sys

    gates_file(project)
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake, *WIDE)
        base = run_dir(project) / "results.jsonl"
        run(project, fake, *WIDE, "--baseline", str(base))
    html = (run_dir(project) / "report.html").read_text()
    assert "<h2>Baseline comparison</h2>" in html and "13 of the base's 13 scored scenarios paired" in html
    assert cli(["report", str(base), "--html", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    again = (tmp_path / "r.html").read_text()
    assert "judge\nopenai:fake-judge" in again and "user agent openai:fake-user" in again  # the run's own models
    # a personalization of 1.0 (the scale's bottom) draws a bar of no length, not a quarter of the chart
    low = Script(terminate_after=1)
    low.scores = {**low.scores, "personalization": 1}
    with FakeLLM(low) as fake:
        run(project, fake, *ALARM)
    bars = (run_dir(project) / "report.html").read_text().split("data-metric='personalization'", 1)[1]
    assert "class='bar' x='96' y='24' width='1.0'" in bars
    piped = subprocess.run(f"{sys.executable} -m personalens_testkit.cli compare {base} {base} | head -1", shell=True,
                           capture_output=True, text=True, cwd=project.path)
    assert "Traceback" not in piped.stderr and piped.stdout.startswith("paired comparison")


KEPT_PROBE = '''
import json, pathlib


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    pathlib.Path("kept.json").write_text(json.dumps({
        "passed": sorted({type(r).__name__ for r in stats.get("passed", [])}),
        "passed_count": len(stats.get("passed", [])),
        "unlabelled": len(stats.get("", [])),
    }))
'''


@pytest.mark.parametrize("extra", [[], ["-rA"]])
def test_pytest_keeps_a_stand_in_for_each_passed_case_unless_passes_are_shown(project, extra):
    """The controller's memory does not grow with pytest's reports of passed cases (issue 22): the terminal
    reporter counts a stand-in; with -rA (or -rp, -rP, --durations) it keeps the whole reports it shows."""
    (project.path / "conftest.py").write_text(KEPT_PROBE)
    gates_file(project)
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake, *ALARM, *extra)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*4 passed*"])
    kept = json.loads((project.path / "kept.json").read_text())
    assert kept["passed_count"] == 4
    if extra:
        assert kept["passed"] == ["TestReport"] and kept["unlabelled"] == 8  # set-up and tear-down of each case
        result.stdout.fnmatch_lines(["PASSED *test_single_domain[[]user7-SD-Alarm-task-1]"])
    else:
        assert kept["passed"] == ["PassedCase"] and kept["unlabelled"] == 0
