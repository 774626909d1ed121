"""Gates that mean what they say, tried as a team would: the concierge example bot on a loopback model
server whose judge reads the dialogue (personalization 3 when the bot recalls a past preference, else 1),
recorded on main with its expectations, then a worse and a better variant; and each of the statistics'
promises (errors in the task completion rate, coverage of a baseline, order, repeats, small samples,
resume) through real runs and the commands. Each test asserts the exit code, the exact summary lines and
the JUnit file's test cases."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from personalens_testkit.cli import main as cli
from personalens_testkit.gating.compare import compare_rows
from personalens_testkit.gating.expectations import Expectations, from_rows
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
from personalens_testkit.gating.verdict import BASELINE_DROP
from personalens_testkit.report.model import build_report
from personalens_testkit.results.rows import ResultRow, RowError

from .support.fake_llm import FakeLLM, Script
from .support.paper_rows import WEAKEST, lowered, paper_rows
from .support.project import latest_results, read_rows, suite_project

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "concierge_bot"
RECALLS = "I remember from our past chats"
#: 17 single-domain scenarios of user 139: in the 4 Alarm ones no past-interaction sentence states a habit
SELECTION = ["--profiles", "139", "--domains", "Alarm,Books,Calendar,Events", "--max-turns", "2"]
CASES = 17


def recalls_preferences(request_text: str) -> dict:
    """The fake judge's rubric: personalization 3 when the bot recalled a past preference, else 1."""
    return {"personalization": 3 if RECALLS in request_text else 1}


def concierge_project(pytester: pytest.Pytester, fake: FakeLLM, extra: str = "") -> pytest.Pytester:
    return suite_project(pytester, (
        f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\nassistant_model = "openai:fake-bot"\n'
        f'openai_base_url = "{fake.url}"\nretry_initial_s = 0.01\nretry_max_s = 0.05\n{extra}'
        f'[assistants.concierge]\nkind = "python"\ncallable = "concierge:reply"\npath = ["{EXAMPLE}"]\n'
        'context = ["interactions"]\n'))


def gate_live_floors(pytester: pytest.Pytester) -> None:
    """The shipped thresholds, with a floor missed on a live judgement gated (this fake judge never varies)."""
    text = default_thresholds_path().read_text()
    (pytester.path / "thresholds.yaml").write_text(text.replace("live_judged_floors: confirm", "live_judged_floors: gate", 1))


def run(pytester: pytest.Pytester, *args: str, variant: str | None = None) -> pytest.RunResult:
    if variant is None:
        pytester._monkeypatch.delenv("CONCIERGE_VARIANT", raising=False)  # noqa: SLF001
    else:
        pytester._monkeypatch.setenv("CONCIERGE_VARIANT", variant)  # noqa: SLF001
    return pytester.runpytest("--assistant", "concierge", *SELECTION, *args)


def junit(pytester: pytest.Pytester) -> ET.Element:
    return ET.parse(latest_results(pytester.path).parent / "junit.xml").getroot()


def suite_of(root: ET.Element, name: str) -> ET.Element:
    (suite,) = [s for s in root if s.get("name") == name]
    return suite


def outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


# -- 1. a decent bot can be green; a worse one shows its regressions everywhere; a better one its XPASSes -------

def test_the_expectations_workflow_of_a_team(pytester: pytest.Pytester, capsys):
    with FakeLLM(Script(terminate_after=1, judge_rule=recalls_preferences)) as fake:
        concierge_project(pytester, fake)
        gate_live_floors(pytester)
        first = run(pytester, "--record-mode", "all")
        # with no expectations file, behaviour is as before: a case below a floor fails, and so does the run
        outcomes = first.parseoutcomes()
        assert first.ret == pytest.ExitCode.TESTS_FAILED and outcomes["passed"] >= 3 and outcomes["failed"] >= 3
        known = {row["scenario_id"] for row in read_rows(latest_results(pytester.path)) if row["status"] == "failed"}

        # record what each scenario does on main; the file lands beside the cassettes, to be committed with them
        results = latest_results(pytester.path)
        assert cli(["expectations", "update", str(results)]) == 0
        expectations = pytester.path / "cassettes" / "concierge" / "expectations.yaml"
        out = capsys.readouterr().out
        assert out.splitlines()[-1] == (f"expectations -> {expectations}: {len(known)} changed, {len(known)} "
                                        "scenarios expected to fail or flaky")
        text = expectations.read_text()
        assert "version: 1\nassistant: concierge\nscenarios:\n" in text
        assert all(f"  {sid}: fail personalization\n" in text for sid in known)

        # main again: green - its known failures are xfails with their reason, every gate is in JUnit
        main = run(pytester, "--record-mode", "all", "-rx")
        assert main.ret == pytest.ExitCode.OK
        main.assert_outcomes(passed=outcomes["passed"], xfailed=len(known), deselected=1)
        main.stdout.fnmatch_lines([
            f"personalens: expectations cassettes/concierge/expectations.yaml: {len(known)} scenarios expected to fail "
            "or flaky (xfail); any other failure is a regression",
            f"personalens: verdict: * ({CASES} cases: 0 regression(s), {len(known)} expected failure(s), 0 unexpected "
            "pass(es), 0 not scored)",
            "XFAIL test_single_domain.py::test_single_domain[[]user139-SD-Alarm-task-1[]] - expected failure (fail "
            "personalization): personalization 1 below 2; transcript */transcripts/main.txt:*",
        ])
        root = junit(pytester)
        cases = {case.get("name"): outcome(case) for case in suite_of(root, "test_single_domain")}
        assert {sid for sid, o in cases.items() if o == "skipped"} == known
        assert suite_of(root, "test_single_domain").get("failures") == "0"
        run_checks = {case.get("name"): outcome(case) for case in suite_of(root, "personalens_run")}
        assert run_checks["gate Personalization, all, lower bound of the 95% CI"] == "passed"
        assert run_checks["gate Task completion rate, multi-domain, mean"] == "skipped"  # no md case: not evaluated
        assert "failure" not in run_checks.values()

        # a worse bot: every scenario that recalled a preference now misses the floor - named regressions
        worse = run(pytester, "--record-mode", "all", variant="forgetful")
        assert worse.ret == pytest.ExitCode.TESTS_FAILED
        regressions = sorted(set(cases) - known)
        worse.assert_outcomes(failed=len(regressions), xfailed=len(known), deselected=1)
        worse.stdout.fnmatch_lines([
            "REGRESSION: expected pass",
            f"personalens: verdict: REGRESSED ({CASES} cases: {len(regressions)} regression(s), {len(known)} expected failure(s), "
            "0 unexpected pass(es), 0 not scored)",
            f"personalens: FAILED {len(regressions)} regression(s): {', '.join(regressions[:8])} and "
            f"{len(regressions) - 8} more",
        ])
        suite = suite_of(junit(pytester), "test_single_domain")
        assert suite.get("failures") == str(len(regressions))
        assert sorted(c.get("name") for c in suite if outcome(c) == "failure") == regressions
        # report.json and the HTML say the same
        folder = latest_results(pytester.path).parent
        report = json.loads((folder / "report.json").read_text())
        assert report["verdict"]["regressions"] == regressions and report["verdict"]["failures"][0].startswith(
            f"{len(regressions)} regression(s)")
        html = (folder / "report.html").read_text()
        assert f"<b>Verdict: regressed - {len(regressions)} regression(s): " in html
        assert html.count("data-verdict='regression'") == len(regressions)
        assert html.count("data-verdict='expected-failure'") == len(known)

        # a better bot: the known failures now pass - listed as XPASS with the command that updates the file
        better = run(pytester, "--record-mode", "all", variant="attentive")
        assert better.ret == pytest.ExitCode.OK
        better.assert_outcomes(passed=len(regressions), xpassed=len(known), deselected=1)
        better.stdout.fnmatch_lines([
            f"personalens: verdict: * ({CASES} cases: 0 regression(s), 0 expected failure(s), {len(known)} unexpected "
            "pass(es), 0 not scored)",
            f"personalens: now passing, expected to fail: {', '.join(sorted(known))} - update the expectations: "
            f"personalens expectations update {latest_results(pytester.path)}",
        ])
        props = {case.get("name"): {p.get("name"): p.get("value") for p in case.find("properties")}
                 for case in suite_of(junit(pytester), "test_single_domain")}
        assert {sid for sid, p in props.items() if p["verdict"] == "unexpected pass"} == known


def test_a_gate_failure_is_a_failed_test_case_in_junit(pytester: pytest.Pytester):
    """All cases pass their floors, a gate fails: the run is red, and so is the JUnit file."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        concierge_project(pytester, fake)
        (pytester.path / "thresholds.yaml").write_text(
            "version: 1\nscenario:\n  personalization: null\naggregate:\n  gates:\n"
            "    - {metric: naturalness_assistant, scope: overall, statistic: lower_bound, min: 4.5}\n")
        result = run(pytester, "--record-mode", "all")
    result.assert_outcomes(passed=CASES, deselected=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "personalens: FAILED gate Naturalness (assistant), all, lower bound of the 95% CI: FAILED: 3.* vs threshold 4.5 "
        f"(mean 4.000 [[]3.*, 4.*], n={CASES})"])
    root = junit(pytester)
    assert suite_of(root, "test_single_domain").get("failures") == "0"
    checks = suite_of(root, "personalens_run")
    assert checks.get("failures") == "1"
    (failed,) = [c for c in checks if outcome(c) == "failure"]
    assert failed.get("name") == "gate Naturalness (assistant), all, lower bound of the 95% CI"


# -- 2. and 3. a baseline counts what the candidate left unscored; TCR counts the bot's own errors ---------------

CRASHES_ON_BOOKS = """import concierge
def reply(request):
    if "-Books-" in request["scenario_id"] or "-Calendar-" in request["scenario_id"]:
        raise RuntimeError("the booking service is down")
    return concierge.reply(request)
"""


def test_bot_errors_count_against_the_bot_and_a_baseline_counts_what_is_missing(pytester: pytest.Pytester, capsys):
    with FakeLLM(Script(terminate_after=1)) as fake:
        concierge_project(pytester, fake, 'record_mode = "all"\n')
        pytester.makepyfile(crashy=CRASHES_ON_BOOKS)
        with (pytester.path / "personalens.toml").open("a") as config:
            config.write(f'\n[assistants.crashy]\nkind = "python"\ncallable = "crashy:reply"\npath = [".", "{EXAMPLE}"]\n'
                         'context = ["interactions"]\n')
        base = run(pytester)
        base_results = latest_results(pytester.path)
        crashy = run(pytester, "--assistant", "crashy", "--baseline", str(base_results), "--stop-after-errors", "20")
    assert base.ret == pytest.ExitCode.OK
    crashy.assert_outcomes(passed=8, errors=9, deselected=1)
    assert crashy.ret == pytest.ExitCode.TESTS_FAILED
    crashy.stdout.fnmatch_lines([
        "TCR counts your bot's errors as failures; the user agent's, judge's and setup's errors (infra) are counted "
        "apart, never scored",
        "*",
        "single-domain        8       9     0   0.47 [[]0.26-0.69]   3.00*",
        "*",
        "coverage: 8 of the base's 17 scored scenarios paired; only in base 0, only in candidate 0, errored in the "
        "candidate 9, errored in the base 0 (task completion counts a bot's errors as not completed)",
        "  all                      TCR    n=17    -0.529 [[]*] SIGNIFICANT DROP*",
        "*",
        "coverage: FAILED: the candidate leaves 9 of the base's 17 scored scenarios unscored (0 missing, 9 errored): "
        "more than 5%",
        "verdict: a significant drop beyond the judge's drift; the coverage fails",
    ])
    # the same verdict from the command, on the rows alone
    capsys.readouterr()
    assert cli(["compare", str(base_results), str(latest_results(pytester.path))]) == 1
    out = capsys.readouterr().out
    assert ("FAILED baseline: the candidate leaves 9 of the base's 17 scored scenarios unscored (0 missing, 9 errored): "
            "more than 5%") in out
    # the base's errored scenarios are counted as errored, never as "only in candidate"
    assert cli(["compare", str(latest_results(pytester.path)), str(base_results)]) == 0
    assert "only in candidate 9" not in capsys.readouterr().out


def test_infrastructure_errors_fail_the_run_only_beyond_their_share():
    rows = [ResultRow.model_validate(r) for r in _rows([(f"user{i}-SD-Alarm-task-1", 1, 3) for i in range(20)])]
    broken = {"status": "error", "scores": None,
              "error": {"kind": "JudgeAnswerError", "phase": "judging", "message": "no score", "source": "judge"}}
    thresholds = load_thresholds(default_thresholds_path())
    one = [rows[0].model_copy(update={"status": "error", "scores": None,
                                      "error": RowError.model_validate(broken["error"])})] + rows[1:]
    assert build_report(one, thresholds).verdict.failures == []  # 1 of 20 (5 %): the run stands
    two = one[:1] + [one[0].model_copy(update={"scenario_id": "user1-SD-Alarm-task-1"})] + rows[2:]
    assert build_report(two, thresholds).verdict.failures == [
        "infrastructure: 2 of 20 cases (10%) were not scored because the user agent, the judge or the setup failed - "
        "over the 5% allowed: the scores no longer represent the sample"]


# -- 4. the same rows in any order give the same intervals; 5. repeats are clusters, not new cases ---------------

def _rows(scores: list[tuple[str, int, int]]) -> list[dict]:
    return [{"scenario_id": sid, "task_kind": "sd", "domains": ["Alarm"], "status": "passed", "repeat": repeat,
             "scores": {"task_completion": True, "personalization": p, "naturalness_user": 4,
                        "naturalness_assistant": 4, "coherence_user": 4, "coherence_assistant": 4}}
            for sid, repeat, p in scores]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _report(tmp_path: Path, rows: list[dict], capsys, *extra: str) -> tuple[int, dict, str]:
    results = _write(tmp_path / f"rows{random.random()}.jsonl", rows)
    code = cli(["report", str(results), "--json", str(tmp_path / "r.json"), *extra])
    return code, json.loads((tmp_path / "r.json").read_text()), capsys.readouterr().out


def test_intervals_are_the_same_for_rows_in_any_order(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = random.Random(3)
    rows = _rows([(f"user{i}-SD-Alarm-task-1", 1, rng.choice([1, 2, 2, 3, 4])) for i in range(60)])
    _, first, _ = _report(tmp_path, rows, capsys)
    for _ in range(3):
        rng.shuffle(rows)
        _, again, _ = _report(tmp_path, rows, capsys)
        assert again["aggregates"] == first["aggregates"] and again["gates"] == first["gates"]


def test_repeats_are_clusters_so_n_counts_scenarios(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thresholds.yaml").write_text(
        "version: 1\naggregate:\n  min_n: 2\n  gates:\n"
        "    - {metric: personalization, scope: overall, statistic: lower_bound, min: 1.2}\n")
    scores = [("a", 1), ("b", 2), ("c", 1), ("d", 2)]
    once = _rows([(f"user{i}-SD-Alarm-task-{sid}", 1, p) for i, (sid, p) in enumerate(scores)])
    twice = once + [{**row, "repeat": 2} for row in once]
    code_once, report_once, _ = _report(tmp_path, once, capsys)
    code_twice, report_twice, out = _report(tmp_path, twice, capsys)
    # four identical scenarios tried twice say nothing more than once: the same n, interval and verdict
    assert report_twice["gates"][0]["estimate"] == report_once["gates"][0]["estimate"]
    assert report_twice["gates"][0]["estimate"]["n"] == 4 and code_once == code_twice == 0
    assert report_once["gates"][0]["decision"] == report_twice["gates"][0]["decision"] == "undecided"
    assert any(line.startswith("  gate Personalization, all, lower bound of the 95% CI: INCONCLUSIVE, not passed: mean "
                               "1.500 [1.000, 3.279], n=4, threshold 1.2: not shown at or above 1.2 (green), nor below "
                               "1.17 (red); it rules out a value below 1; about 8 more scenarios") for line in out.splitlines())
    # tries that differ: the noise floor is printed beside the gates
    noisy = once + [{**row, "repeat": 2, "scores": {**row["scores"], "personalization": 3}} for row in once]
    _, report, out = _report(tmp_path, noisy, capsys)
    assert report["repeats"]["noise"]["personalization"]["repeat_means"] == [1.5, 3.0]
    # within-scenario variance (2 + 0.5 + 2 + 0.5) / 4 = 1.25; a same-sized comparison's sd sqrt(2 * 1.25 / 2);
    # (z_0.975 + z_0.8) * 1.118 / sqrt(4) = 1.566
    assert ("    P: per-repeat means 1.500, 3.000 (spread 1.500); smallest drop detectable if every scenario dropped "
            "alike 1.566 (a drop on some scenarios only varies more: the baseline comparison prints its own)"
            in out.splitlines())


# -- 6. resume counts the kept rows' failures; resuming a complete run exits 0 ----------------------------------

def test_resume_keeps_the_verdict_of_the_rows_it_keeps(pytester: pytest.Pytester):
    with FakeLLM(Script(terminate_after=1, judge_rule=recalls_preferences)) as fake:
        concierge_project(pytester, fake, 'record_mode = "all"\n')
        gate_live_floors(pytester)
        first = run(pytester, "-k", "Alarm or Books")  # the four Alarm scenarios miss the personalization floor
        assert first.ret == pytest.ExitCode.TESTS_FAILED
        resumed = run(pytester, "--resume", str(latest_results(pytester.path)))
        # the kept rows' failures still fail the resumed run, though every case it ran passed
        resumed.assert_outcomes(passed=8, deselected=10)  # the 9 kept rows' cases (found, not run again), and 1
        assert resumed.ret == pytest.ExitCode.TESTS_FAILED
        resumed.stdout.fnmatch_lines(["personalens: FAILED 4 regression(s): user139-SD-Alarm-task-1, *-task-4"])
        assert len(read_rows(latest_results(pytester.path))) == CASES
        # every case already scored: nothing to run, and the verdict is still the kept rows'
        again = run(pytester, "--resume", str(latest_results(pytester.path)))
        assert again.ret == pytest.ExitCode.TESTS_FAILED
        again.stdout.fnmatch_lines(["personalens: every case was already scored in *: nothing left to run",
                                    "personalens: FAILED 4 regression(s): *"])
        # a complete run without failures, resumed: exit 0, not "no tests collected"
        passing = run(pytester, "--domains", "Books")
        assert passing.ret == pytest.ExitCode.OK
        done = run(pytester, "--domains", "Books", "--resume", str(latest_results(pytester.path)))
    assert done.ret == pytest.ExitCode.OK
    done.stdout.fnmatch_lines(["personalens: every case was already scored in *: nothing left to run"])


# -- 7. small samples are not evaluated, and never passed -------------------------------------------------------

def test_a_gate_on_too_few_scenarios_is_not_evaluated_and_not_passed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gates = "    - {metric: personalization, scope: overall, statistic: lower_bound, min: 1.7}\n"
    (tmp_path / "thresholds.yaml").write_text(f"version: 1\naggregate:\n  gates:\n{gates}")
    one = _rows([("user1-SD-Alarm-task-1", 1, 1)])
    code, report, out = _report(tmp_path, one, capsys)
    assert code == 0 and report["gates"][0]["passed"] is None
    assert ("  gate Personalization, all, lower bound of the 95% CI: NOT EVALUATED, not passed (n=1 scenarios; a gate "
            "needs 10)") in out.splitlines()
    (tmp_path / "thresholds.yaml").write_text(
        f"version: 1\naggregate:\n  fail_when_not_evaluated: true\n  gates:\n{gates}")
    code, _, out = _report(tmp_path, one, capsys)
    assert code == 1 and ("FAILED gate Personalization, all, lower bound of the 95% CI: NOT EVALUATED, not passed "
                          "(n=1 scenarios; a gate needs 10)") in out.splitlines()
    # constant data is no proof of much: 12 scenarios all at 2 show neither side of 1.7, 40 show it above
    (tmp_path / "thresholds.yaml").write_text(f"version: 1\naggregate:\n  gates:\n{gates}")
    code, report, _ = _report(tmp_path, _rows([(f"user{i}-SD-Alarm-task-1", 1, 2) for i in range(12)]), capsys)
    assert code == 0 and report["gates"][0]["passed"] is None and report["gates"][0]["decision"] == "undecided"
    code, report, _ = _report(tmp_path, _rows([(f"user{i}-SD-Alarm-task-1", 1, 2) for i in range(40)]), capsys)
    assert code == 0 and report["gates"][0]["passed"] is True
    # sitting on the threshold: never red, never green
    on_it = gates.replace("1.7", "2")
    (tmp_path / "thresholds.yaml").write_text(f"version: 1\naggregate:\n  gates:\n{on_it}")
    code, report, _ = _report(tmp_path, _rows([(f"user{i}-SD-Alarm-task-1", 1, 2) for i in range(40)]), capsys)
    assert code == 0 and report["gates"][0]["decision"] == "undecided" and report["verdict"]["outcome"] == "inconclusive"


# -- 8. pass^k never exceeds pass^1: an errored try is a failed one ----------------------------------------------

def test_pass_hat_k_counts_an_errored_try_as_a_failure(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good = _rows([("user1-SD-Alarm-task-1", r, 3) for r in (1, 2, 3)])
    bad = _rows([("user2-SD-Alarm-task-1", r, 3) for r in (1, 2, 3)])
    for row in bad[:2]:
        row["scores"]["task_completion"] = False
    bad[2] = {**bad[2], "status": "error", "scores": None,
              "error": {"kind": "RuntimeError", "phase": "the dialogue", "message": "boom", "source": "assistant"}}
    _, report, out = _report(tmp_path, good + bad, capsys)
    assert report["repeats"]["pass_hat_1"] == 0.5 and report["repeats"]["pass_hat_k"] == 0.5
    assert "repeats: k=3 over 2 scenarios; task completion pass^1 0.50, pass^3 0.50" in out


# -- 9. the commands answer bad input in one line ----------------------------------------------------------------

@pytest.mark.parametrize(("label", "message"), [
    (5, "personalization must be a whole number from 1 to 4 (got 5)"),
    ("3", "personalization must be a whole number from 1 to 4 (got '3')"),
    (True, "personalization must be a whole number from 1 to 4 (got True)"),
])
def test_agreement_names_a_label_off_its_scale(tmp_path, capsys, label, message):
    judge = _write(tmp_path / "judge.jsonl", _rows([("user1-SD-Alarm-task-1", 1, 3)]))
    human = _write(tmp_path / "human.jsonl", [{"scenario_id": "user1-SD-Alarm-task-1", "personalization": label}])
    assert cli(["agreement", str(judge), str(human)]) == 2
    err = capsys.readouterr().err
    assert err == f"personalens: error: B {human}: record 1 ('user1-SD-Alarm-task-1'): {message}\n"


def test_compare_checks_its_confidence_and_reads_the_thresholds(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = _write(tmp_path / "a.jsonl", _rows([(f"user{i}-SD-Alarm-task-1", 1, 2 + i % 2) for i in range(12)]))
    assert cli(["compare", str(rows), str(rows), "--confidence", "1.5"]) == 2
    assert capsys.readouterr().err == ("personalens: error: --confidence: must be more than 0.5 and less than 1 "
                                       "(got 1.5)\n")
    (tmp_path / "thresholds.yaml").write_text("version: 1\naggregate:\n  confidence: 0.9\n  min_n: 20\n")
    assert cli(["compare", str(rows), str(rows)]) == 0
    out = capsys.readouterr().out
    assert ("(candidate - base; 90% CI, Student-t over scenarios; green at or above -margin (TCR 0.05, P 0.2, Nat. 0.2, "
            "Coh. 0.2), red below -drift (TCR 0.01, P 0.03, Nat. 0.03, Coh. 0.03))") in out
    assert "verdict: inconclusive: 0 gated difference(s) shown neither within the margin nor below the drift, 4 not " \
           "evaluated (too few scenarios)" in out
    assert "  all                      P      n=12    +0.000 [-0.*] (not evaluated: too few scenarios)" not in out
    assert " (not evaluated: too few scenarios)" in out


# -- the shipped thresholds against the paper's figures ----------------------------------------------------------

def _verdict(rows, *, expectations=None, baseline=None):
    thresholds = load_thresholds(default_thresholds_path())
    comparison = None
    if baseline is not None:
        rules = thresholds.aggregate
        comparison = compare_rows(baseline, rows, confidence=rules.confidence, min_n=rules.min_n,
                                  max_missing=rules.max_infrastructure_errors)
    return build_report(rows, thresholds, expectations=expectations, comparison=comparison)


def test_a_bot_at_the_papers_level_is_green_and_a_drop_of_a_third_of_a_point_is_not():
    main = paper_rows()
    report = _verdict(main)
    assert report.counts["cases"] == 4096
    p = report.aggregates["overall"].metrics["personalization"]
    assert 2.05 < p.mean < 2.15 and p.high - p.low < 0.06  # the interval over the sample: about +-0.025
    # without expectations, every realistic bot fails: a quarter of its scenarios miss a floor
    assert not report.verdict.passed and len(report.verdict.regressions) > 1000
    # with them (recorded on main), it is green: every gate passes, every failure is a known one
    expectations = Expectations(scenarios=from_rows(main))
    green = _verdict(main, expectations=expectations)
    assert green.verdict.passed, green.verdict.failures
    assert all(gate.passed for gate in green.gates if gate.scope != "md" or gate.metric == "task_completion")

    # 0.3 lower in mean personalization: its regressions and the baseline each fail it
    worse = lowered(main, 0.3)
    drop = _verdict(worse, expectations=expectations, baseline=main)
    assert drop.aggregates["overall"].metrics["personalization"].mean == pytest.approx(p.mean - 0.3, abs=0.005)
    assert not drop.verdict.passed and len(drop.verdict.regressions) > 300
    (overall,) = [r for r in drop.comparison.results if r.group == "overall" and r.metric == "personalization"]
    assert overall.significant_drop and overall.difference.high - overall.difference.low < 0.04
    # a drop that crosses no floor (3 -> 2, 4 -> 3) has no regression, yet the baseline still fails it
    quiet = _verdict(lowered(main, 0.25, levels=(3, 4)), expectations=expectations, baseline=main)
    assert quiet.verdict.regressions == [] and not quiet.verdict.passed
    assert quiet.verdict.failures == [BASELINE_DROP]


def test_the_personalization_gate_passes_the_weakest_paper_bot_and_fails_it_0_3_lower():
    weakest = paper_rows(WEAKEST)
    expectations = Expectations(scenarios=from_rows(weakest))
    report = _verdict(weakest, expectations=expectations)
    assert 1.88 < report.aggregates["overall"].metrics["personalization"].mean < 1.98
    assert report.verdict.passed, report.verdict.failures
    lower = _verdict(lowered(weakest, 0.3), expectations=expectations)
    (gate,) = [g for g in lower.gates if g.metric == "personalization"]
    assert gate.passed is False and gate.describe() in lower.verdict.failures
