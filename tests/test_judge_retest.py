"""--judge-retest: a seeded share of the dialogues judged a second time, the judge's test-retest agreement per
dimension in every report, the second judgement never a score, and the baseline's default margin taken from the
drop the judge alone is shown to produce. End to end through the plugin against a loopback judge, recorded and
replayed; the arithmetic on rows."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest

from personalens_testkit.evaluation import retest_selected
from personalens_testkit.gating.compare import compare_rows
from personalens_testkit.calibration.retest import MIN_PAIRS, drift_margins, margin_basis, measure
from personalens_testkit.errors import UsageError
from personalens_testkit.results.files import load_rows
from personalens_testkit.results.rows import ResultRow

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_report, latest_results, recording_project, run_against

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
ALARM = ["--profiles", "7", "--domains", "Alarm", "--max-turns", "2"]
GATES = "version: 1\nscenario: {task_completion: null, personalization: null}\naggregate: {min_n: 1, gates: []}\n"


def second_time(changed: dict):
    """A judge that answers a prompt it has seen before with ``changed`` (its first answer: the script's)."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def rule(text: str) -> dict:
        with lock:
            seen[text] += 1
            return changed if seen[text] > 1 else {}

    return rule


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, GATES)


def run(project: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    return run_against(project, url, *SPECS, *ALARM, *args)


def report(project: pytest.Pytester) -> dict:
    return latest_report(project.path)


def test_a_second_judgement_is_reported_and_never_a_score(project):
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 2}))) as fake:
        result = run(project, fake.url, "--judge-retest", "1")
    result.assert_outcomes(passed=4)
    data = report(project)
    assert [row["scores"]["personalization"] for row in data["rows"]] == [3] * 4  # the first judgement
    assert all(row["retest"]["scores"]["personalization"] == 2 for row in data["rows"])
    assert "3.00 [" in next(line for line in result.stdout.lines if line.startswith("all "))  # P: the first judgement
    dims = {d["dimension"]: d for d in data["judge_retest"]["dimensions"]}
    assert data["judge_retest"]["retested"] == 4 and data["judge_retest"]["failed"] == 0
    assert dims["personalization"]["exact_agreement"] == 0 and dims["personalization"]["shift"]["mean"] == -1
    assert dims["task_completion"]["exact_agreement"] == 1 and dims["naturalness_assistant"]["shift"]["mean"] == 0
    assert "judge test-retest: 4 dialogue(s) judged again (100% of the cases chosen)" in result.stdout.str()
    assert "Judge test-retest" in (latest_results(project.path).parent / "report.html").read_text()


def test_a_failed_second_judgement_is_its_own_error_and_the_case_keeps_its_scores(project):
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 9}))) as fake:
        result = run(project, fake.url, "--judge-retest", "1")
    result.assert_outcomes(passed=4)
    data = report(project)
    assert all(row["status"] == "passed" and row["scores"]["personalization"] == 3 for row in data["rows"])
    assert all("judging again failed" in row["retest"]["error"] for row in data["rows"])
    assert data["judge_retest"]["failed"] == 4 and len(data["judge_retest"]["failures"]) == 4


def test_a_recording_replays_both_judgements_and_chooses_the_same_cases(project):
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 2}))) as fake:
        run(project, fake.url, "--judge-retest", "0.5")
    def judged(row: dict):
        return row["retest"] and (row["retest"]["scores"], row["retest"]["error"])

    recorded = {row["scenario_id"]: judged(row) for row in report(project)["rows"]}
    replay = run(project, "http://127.0.0.1:9/v1", "--judge-retest", "0.5", "--record-mode", "none")
    replay.assert_outcomes(passed=4)
    replayed = {row["scenario_id"]: judged(row) for row in report(project)["rows"]}
    assert replayed == recorded
    assert {sid for sid, r in replayed.items() if r} == {sid for sid in replayed if retest_selected(sid, 0.5)}


def test_a_second_judgement_is_never_the_first_played_back(project):
    """new_episodes records the first judgement and could play it back as the second: either the second is drawn
    afresh (it differs here) or it is refused - never the first answer measured as agreement."""
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 2}))) as fake:
        run(project, fake.url, "--judge-retest", "1", "--record-mode", "new_episodes")
    for row in report(project)["rows"]:
        retest = row["retest"]
        assert (retest["scores"] or {}).get("personalization") == 2 or "played back" in (retest["error"] or ""), retest


def test_the_share_is_chosen_by_case_id_alone():
    ids = [f"user{u}-SD-Alarm-task-{t}" for u in range(100) for t in range(10)]
    assert not any(retest_selected(i, 0) for i in ids) and all(retest_selected(i, 1) for i in ids)
    chosen = [i for i in ids if retest_selected(i, 0.1)]
    assert 70 <= len(chosen) <= 130 and chosen == [i for i in ids if retest_selected(i, 0.1)]
    assert set(chosen) <= {i for i in ids if retest_selected(i, 0.3)}  # a larger share keeps the smaller one's cases


SCORES = {"task_completion": True, "personalization": 3, "naturalness_user": 4,
          "naturalness_assistant": 4, "coherence_user": 5, "coherence_assistant": 4}


def _row(i: int, first: int, second: int | None, *, status: str = "passed", judged: tuple[str, str] = ("replayed", "live"),
         ) -> ResultRow:
    """``judged``: whether the first and the second judgement were played back or drawn now (default: the first from
    the recording, the second now - what measures the judge's drift)."""
    scores = {**SCORES, "personalization": first}
    retest = None if second is None else {"scores": {**scores, "personalization": second}, "first": judged[0],
                                          "second": judged[1]}
    return ResultRow(scenario_id=f"user{i}-SD-Alarm-task-1", status=status,
                     scores=None if status == "error" else scores, retest=retest)


def _drifting(p: int, i: int) -> ResultRow:
    """A scenario scored ``p`` whose second judgement is one level lower for a third of the scenarios."""
    return _row(i, p, max(1, p - 1) if i % 3 == 0 else p)


def test_the_default_margin_is_the_drop_the_judge_alone_shows():
    # the judge now rates a third of the dialogues one level lower than the recording did
    drifting = [_row(i, 3, 2 if i % 3 == 0 else 3) for i in range(60)]
    retest = measure(drifting)
    margins = drift_margins(retest)
    shift = {d.dimension: d.shift for d in retest.dimensions}["personalization"]
    assert shift.mean == pytest.approx(-1 / 3) and margins["personalization"] == pytest.approx(-shift.high)
    assert 0 < margins["personalization"] < 1 / 3 and margins["task_completion"] == 0
    # an unbiased judge, or too few dialogues judged again: no margin
    assert drift_margins(measure([_row(i, 3, (2, 4)[i % 2]) for i in range(60)]))["personalization"] == 0
    assert drift_margins(measure([_row(i, 3, 2) for i in range(MIN_PAIRS - 1)]))["personalization"] == 0
    assert "no dialogue was judged again" in margin_basis(None, drift_margins(None))
    # an error row's retest is not a pair; the scores it carries are nobody's
    assert measure([_row(0, 3, 2, status="error")]) is None


def test_a_drop_within_the_judges_own_drift_is_not_red_and_beyond_it_is():
    base = [_row(i, 3, None) for i in range(60)]
    within = [_drifting(2 if i % 5 == 0 else 3, i) for i in range(60)]  # a drop of 0.2; the judge alone: 0.3
    retest = measure(within)
    margins = drift_margins(retest)
    assert margins["personalization"] > 0.2
    stated = compare_rows(base, within, margin=0.0)
    measured = compare_rows(base, within, margin=None, measured=margins, margin_basis=margin_basis(retest, margins))
    assert stated.failed and not measured.failed
    # the measured drift raises the red bar, never beyond the margin (the drop that does not matter: 0.2)
    assert measured.drifts["personalization"] == min(measured.margins["personalization"], margins["personalization"])
    assert "drift measured" in measured.margin_text() and "drift measured" not in stated.margin_text()
    beyond = [_drifting(1 if i % 2 == 0 else 3, i) for i in range(60)]  # a drop of 1
    assert compare_rows(base, beyond, margin=None, measured=drift_margins(measure(beyond))).failed


def test_only_the_recordings_judge_against_todays_sets_a_margin():
    """Pairs played back twice are the recording's numbers (anyone could have written them); pairs drawn twice now
    compare today's judge with itself: neither sets a margin, however far apart they are."""
    for judged in (("replayed", "replayed"), ("live", "live")):
        retest = measure([_row(i, 3, 1, judged=judged) for i in range(60)])
        assert retest.dimensions[1].shift.mean == -2  # reported as they are
        assert drift_margins(retest) == {metric: 0 for metric in drift_margins(None)}
        assert "none measured" in margin_basis(retest, drift_margins(retest))
    # the drift applies only to the share of scores judged now: a replayed score carries none
    retest = measure([_row(i, 3, 2 if i % 3 == 0 else 3) for i in range(60)])
    assert drift_margins(retest, 0.5)["personalization"] == pytest.approx(drift_margins(retest, 1.0)["personalization"] / 2,
                                                                          abs=1e-5)
    assert drift_margins(retest, 0.0)["personalization"] == 0


def test_a_measured_drift_moves_only_the_red_bar():
    """The judge's measured drift is a tolerance for its noise: it moves the red bar (up to the margin), never green's,
    which stays at -margin: a measured drift never makes a run stricter, nor green without the margin shown."""
    base = [_row(i, 3, None) for i in range(200)]
    candidate = [_row(i, 3 if i % 5 else 2, None) for i in range(200)]  # a drop of 0.2, shown below -0.03
    plain = compare_rows(base, candidate)
    measured = compare_rows(base, candidate, measured={"personalization": 0.18})
    decision = [{(d.group, d.metric): d for d in c.results}[("overall", "personalization")] for c in (plain, measured)]
    assert decision[0].decision == "red" and plain.failed
    assert decision[1].decision == "undecided" and not measured.failed and decision[1].drift == 0.18
    assert decision[0].margin == decision[1].margin == 0.2 and decision[1].difference.low < -0.2
    capped = compare_rows(base, candidate, measured={"personalization": 0.9})
    assert {(d.group, d.metric): d for d in capped.results}[("overall", "personalization")].drift == 0.2


@pytest.mark.parametrize("retest", [
    {"scores": {**SCORES, "personalization": 7}},          # off its scale
    {"scores": {**SCORES, "personalization": True}},       # a yes/no where a rating belongs
    {"scores": {**SCORES, "task_completion": 1}},          # a rating where a yes/no belongs
    {"scores": {**SCORES, "personalization": 2.5}},        # between two levels
    {"scores": {**SCORES, "personalization": [3]}},        # not a number at all
    {"scores": {**SCORES}, "error": "both"},               # a score and an error
    {},                                                    # neither
    {"scores": {**SCORES}, "first": "yesterday"},          # neither played back nor drawn now
])
def test_a_second_judgement_off_the_scales_is_refused_never_measured(tmp_path, retest):
    row = ResultRow(scenario_id="user1-SD-Alarm-task-1", status="passed", scores=SCORES).model_dump(mode="json")
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({**row, "retest": retest}) + "\n")
    with pytest.raises(UsageError, match="results.jsonl.*retest"):
        load_rows(path, what="--resume")


@pytest.mark.parametrize("value", [0, 5, True, "3", None])
def test_a_score_off_its_scale_is_refused_never_counted(tmp_path, value):
    row = ResultRow(scenario_id="user1-SD-Alarm-task-1", status="passed", scores=SCORES).model_dump(mode="json")
    row["scores"]["personalization"] = value
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(UsageError, match="personalization"):
        load_rows(path, what="--resume")


def test_rejudging_measures_both_judgements_in_one_recording(project):
    """--rejudge loads its judging cassette once for both judgements: recorded, both are drawn now (the second
    differs here); replayed, both come back as they were - never the first answer twice."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake.url).assert_outcomes(passed=4)
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 2}))) as judge:
        run(project, judge.url, "--rejudge", "--judge-retest", "1").assert_outcomes(passed=4)
    recorded = report(project)["rows"]
    assert all(r["scores"]["personalization"] == 3 and r["retest"]["scores"]["personalization"] == 2 for r in recorded)
    assert all((r["retest"]["first"], r["retest"]["second"]) == ("live", "live") for r in recorded)
    replay = run(project, "http://127.0.0.1:9/v1", "--rejudge", "--judge-retest", "1", "--record-mode", "none")
    replay.assert_outcomes(passed=4)
    replayed = report(project)["rows"]
    assert [r["retest"]["scores"] for r in replayed] == [r["retest"]["scores"] for r in recorded]
    assert all((r["retest"]["first"], r["retest"]["second"]) == ("replayed", "replayed") for r in replayed)


def test_a_resumed_rows_second_judgement_is_not_this_runs_measurement(project):
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 2}))) as fake:
        run(project, fake.url, "--judge-retest", "1").assert_outcomes(passed=4)
    first = latest_results(project.path)
    # the same endpoint (a resume adopts only its rows), gone: every case is resumed, nothing is called
    resumed = run(project, fake.url, "--judge-retest", "1", "--resume", str(first), "--record-mode", "none")
    assert latest_results(project.path) != first
    data = report(project)
    assert len(data["rows"]) == 4 and all(row["retest"] for row in data["rows"])  # kept as they were
    assert data["judge_retest"] is None, data["judge_retest"]
    assert "judge test-retest" not in resumed.stdout.str()
