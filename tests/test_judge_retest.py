"""--judge-retest: a seeded share of the dialogues judged a second time, the judge's test-retest agreement per
dimension in every report, the second judgement never a score, and the baseline's default margin taken from the
drop the judge alone is shown to produce. End to end through the plugin against a loopback judge, recorded and
replayed; the arithmetic on rows."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from personalens_testkit.evaluation import retest_selected
from personalens_testkit.gating.compare import compare_rows
from personalens_testkit.calibration.retest import MIN_PAIRS, drift_margins, margin_basis, measure
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
    recorded = {row["scenario_id"]: row.get("retest") for row in report(project)["rows"]}
    replay = run(project, "http://127.0.0.1:9/v1", "--judge-retest", "0.5", "--record-mode", "none")
    replay.assert_outcomes(passed=4)
    replayed = {row["scenario_id"]: row.get("retest") for row in report(project)["rows"]}
    assert replayed == recorded
    assert {sid for sid, r in replayed.items() if r} == {sid for sid in replayed if retest_selected(sid, 0.5)}


def test_a_second_judgement_is_never_the_first_played_back(project):
    """new_episodes records the first judgement and could play it back as the second: either the second is drawn
    afresh (it differs here) or it is refused - never the first answer measured as agreement."""
    with FakeLLM(Script(terminate_after=1, judge_rule=second_time({"personalization": 2}))) as fake:
        run(project, fake.url, "--judge-retest", "1", "--record-mode", "new_episodes")
    for row in report(project)["rows"]:
        retest = row["retest"]
        assert retest.get("scores", {}).get("personalization") == 2 or "played back" in retest.get("error", ""), retest


def test_the_share_is_chosen_by_case_id_alone():
    ids = [f"user{u}-SD-Alarm-task-{t}" for u in range(100) for t in range(10)]
    assert not any(retest_selected(i, 0) for i in ids) and all(retest_selected(i, 1) for i in ids)
    chosen = [i for i in ids if retest_selected(i, 0.1)]
    assert 70 <= len(chosen) <= 130 and chosen == [i for i in ids if retest_selected(i, 0.1)]
    assert set(chosen) <= {i for i in ids if retest_selected(i, 0.3)}  # a larger share keeps the smaller one's cases


def _row(i: int, first: int, second: int | None, *, status: str = "passed") -> ResultRow:
    scores = {"task_completion": True, "personalization": first, "naturalness_user": 4,
              "naturalness_assistant": 4, "coherence_user": 5, "coherence_assistant": 4}
    retest = None if second is None else {"scores": {**scores, "personalization": second}}
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
    assert measured.margins["personalization"] == margins["personalization"] and "measured" in measured.margin_text()
    beyond = [_drifting(1 if i % 2 == 0 else 3, i) for i in range(60)]  # a drop of 1
    assert compare_rows(base, beyond, margin=None, measured=drift_margins(measure(beyond))).failed
