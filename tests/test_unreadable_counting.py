"""An unreadable judge answer is missing for its own dimension only, as the paper's code counts it
(amazon-science/PersonaLens, util/gather_evaluation.py: a rating it cannot parse is left out, line 84; a
completion verdict it cannot parse counts as not completed, lines 206-213) - and nothing is ever guessed: the
case is the judge's error, its unreadable dimension has no score. Pinned against upstream's counting on the same
rows, and end to end through the plugin against a loopback judge."""

from __future__ import annotations

import json
from statistics import fmean

import pytest

from personalens_testkit.data.loader import open_dataset
from personalens_testkit.data.selection import Selection, select_scenarios
from personalens_testkit.errors import UsageError
from personalens_testkit.gating.aggregate import summarise
from personalens_testkit.results.files import load_rows
from personalens_testkit.results.rows import ResultRow

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_report, recording_project, run_against

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
ALARM = ["--profiles", "7", "--domains", "Alarm", "--max-turns", "2"]
GATES = "version: 1\nscenario: {task_completion: null, personalization: null}\naggregate: {min_n: 1, gates: []}\n"
FULL = {"task_completion": True, "personalization": 3, "naturalness_user": 4, "naturalness_assistant": 4,
        "coherence_user": 5, "coherence_assistant": 4}
RATINGS = [name for name in FULL if name != "task_completion"]


def _row(i: int, scores: dict, unreadable: tuple[str, ...] = ()) -> ResultRow:
    partial = {**scores, **{name: None for name in unreadable}}
    return ResultRow(
        scenario_id=f"user{i}-SD-Alarm-task-1", status="error" if unreadable else "passed", domains=["Alarm"],
        scores=None if unreadable else scores, partial_scores=partial if unreadable else None,
        unreadable={name: "could not be parsed" for name in unreadable},
        error={"kind": "JudgeAnswerError", "phase": "judging", "message": "unreadable", "source": "judge"}
        if unreadable else None)


def _upstream(rows: list[tuple[dict, tuple[str, ...]]]) -> dict[str, float]:
    """util/gather_evaluation.py's counting on the same judgements: completion over every dialogue (unparsed =
    False), each rating over the dialogues whose rating parsed."""
    completion = [bool(s["task_completion"]) and "task_completion" not in bad for s, bad in rows]
    found = {"task_completion": sum(completion) / len(completion)}
    for name in RATINGS:
        found[name] = fmean(s[name] for s, bad in rows if name not in bad)
    return found


@pytest.mark.parametrize("seed", range(5))
def test_the_counting_is_upstreams_on_the_same_rows(seed):
    import random

    rng = random.Random(seed)
    judged = []
    for _ in range(40):
        scores = {"task_completion": rng.random() < 0.7, **{n: rng.randint(1, 4 if n == "personalization" else 5)
                                                              for n in RATINGS}}
        bad = tuple(n for n in FULL if rng.random() < 0.15)
        if len(bad) == len(FULL):
            bad = bad[:-1]
        judged.append((scores, bad))
    rows = [_row(i, s, bad) for i, (s, bad) in enumerate(judged)]
    paper = summarise(rows, counting="paper")["overall"]
    ours = summarise(rows)["overall"]
    upstream = _upstream(judged)
    for name, value in upstream.items():
        assert paper.metrics[name].mean == pytest.approx(value), name
    # ours leaves an unreadable verdict out: completed over the dialogues whose verdict was read
    read = [bool(s["task_completion"]) for s, bad in judged if "task_completion" not in bad]
    assert ours.metrics["task_completion"].mean == pytest.approx(sum(read) / len(read))
    assert ours.task_completion_other.mean == pytest.approx(upstream["task_completion"])
    assert ours.unreadable == {n: sum(n in bad for _, bad in judged) for n in FULL if any(n in bad for _, bad in judged)}
    assert all(ours.metrics[n].mean == pytest.approx(upstream[n]) for n in RATINGS)  # ratings: the same either way


def test_an_unreadable_rating_is_missing_from_its_figure_only():
    rows = [_row(0, FULL), _row(1, {**FULL, "personalization": 1}, ("naturalness_user",)),
            _row(2, {**FULL, "task_completion": False, "personalization": 2}, ("personalization",))]
    overall = summarise(rows)["overall"]
    assert overall.metrics["personalization"].n == 2 and overall.metrics["personalization"].mean == 2  # (3 + 1) / 2
    assert overall.metrics["naturalness_user"].n == 2 and overall.metrics["task_completion"].n == 3
    assert overall.metrics["task_completion"].mean == pytest.approx(2 / 3)
    assert overall.scored == 1 and overall.infrastructure_errors == 2  # the cases are the judge's errors


UNREADABLE = {"kind": "JudgeAnswerError", "phase": "judging", "message": "m", "source": "judge"}


@pytest.mark.parametrize("bad", [
    {"status": "passed", "scores": {**FULL, "personalization": None}},                       # a scored case, missing one
    {"status": "passed", "scores": FULL, "partial_scores": {**FULL, "personalization": None},
     "unreadable": {"personalization": "x"}},                                                 # beside a passed case
    {"status": "error", "partial_scores": FULL, "error": {**UNREADABLE, "kind": "ModelError"}},  # beside another error
    {"status": "error", "partial_scores": {**FULL, "personalization": None}, "unreadable": {"coherence_user": "x"},
     "error": UNREADABLE},                                                                    # the wrong one missing
    {"status": "error", "partial_scores": FULL, "error": UNREADABLE},                         # nothing unreadable
    {"status": "error", "partial_scores": {**FULL, "personalization": 7}, "unreadable": {"coherence_user": "x"},
     "error": UNREADABLE},                                                                    # off its scale
    {"status": "error", "unreadable": {"task_completion": "x"}, "error": {**UNREADABLE, "kind": "ModelError"}},
    {"status": "passed", "scores": FULL, "unreadable": {"task_completion": "x"}},             # unreadable, yet scored
    {"status": "error", "scores": FULL, "partial_scores": {**FULL, "personalization": None},
     "unreadable": {"personalization": "x"}, "error": UNREADABLE},                            # both
])
def test_a_missing_score_stands_only_beside_an_unreadable_answer(tmp_path, bad):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"scenario_id": "user1-SD-Alarm-task-1", **bad}) + "\n")
    with pytest.raises(UsageError, match="results.jsonl.*(scores|personalization|unreadable)"):
        load_rows(path, what="--resume")


def _intent(scenario_id: str) -> str:
    (scenario,) = [s for s in select_scenarios(open_dataset(None), Selection(profiles=(7,), domains=("Alarm",)))
                   if s.scenario_id == scenario_id]
    return scenario.task.user_intent[:40]


@pytest.mark.parametrize("counting", ["ours", "paper"])
def test_end_to_end_the_case_is_the_judges_error_and_its_other_scores_count(pytester, counting):
    project = recording_project(pytester, GATES)
    intent = _intent("user7-SD-Alarm-task-1")

    def rule(text: str) -> dict:
        return {"personalization": "somewhere around 3", "task_completion": "perhaps"} if intent in text else {}

    with FakeLLM(Script(terminate_after=1, echo_task=True, judge_rule=rule)) as fake:
        result = run_against(project, fake.url, *SPECS, *ALARM, "--completion-counting", counting)
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("skipped")) == (3, 1), outcomes  # the judge's error: not scored
    report = latest_report(project.path)
    (bad,) = [row for row in report["rows"] if row["scenario_id"] == "user7-SD-Alarm-task-1"]
    assert bad["status"] == "error" and bad["error"]["kind"] == "JudgeAnswerError" and bad["error"]["source"] == "judge"
    assert set(bad["unreadable"]) == {"task_completion", "personalization"}
    assert bad["scores"] is None  # an error never scores as a case
    partial = bad["partial_scores"]
    assert partial["personalization"] is None and partial["task_completion"] is None
    assert partial["naturalness_user"] == 4  # read, and counted in its own figure
    overall = report["aggregates"]["overall"]
    assert overall["metrics"]["naturalness_user"]["n"] == 4 and overall["metrics"]["personalization"]["n"] == 3
    assert overall["unreadable"] == {"task_completion": 1, "personalization": 1}
    rates = {"ours": (3, 1.0), "paper": (4, 0.75)}
    assert (overall["metrics"]["task_completion"]["n"], overall["metrics"]["task_completion"]["mean"]) == rates[counting]
    other = rates["paper" if counting == "ours" else "ours"]
    assert (overall["task_completion_other"]["n"], overall["task_completion_other"]["mean"]) == other
    out = result.stdout.str()
    assert "unreadable judge answers" in out and "TCR above: an unreadable verdict" in out


def test_a_comparison_counts_as_the_run_does():
    """The baseline comparison (and the early stop, through the same scenario values) counts an unreadable
    completion verdict as the report does: left out, or not completed under the paper's counting."""
    from personalens_testkit.gating.compare import compare_rows
    from personalens_testkit.run.early_stop import EarlyStop
    from personalens_testkit.gating.thresholds import Thresholds

    base = [_row(i, FULL) for i in range(20)]
    candidate = [_row(i, FULL, ("task_completion",)) if i < 10 else _row(i, FULL) for i in range(20)]

    def completion(comparison):
        return next(d for d in comparison.results if d.group == "overall" and d.metric == "task_completion")

    ours, paper = completion(compare_rows(base, candidate)), completion(compare_rows(base, candidate, counting="paper"))
    assert (ours.n, ours.difference.mean) == (10, 0) and (paper.n, paper.difference.mean) == (20, -0.5)
    stops = {c: EarlyStop.build(Thresholds().aggregate, ["Alarm"], enforced=False, repeat=1, base_rows=base, margin=0,
                                counting=c) for c in ("ours", "paper")}
    for counting, stop in stops.items():
        for row in candidate:
            stop.observe(row)
        (test,) = [t for t in stop.tests if t.metric == "task_completion" and t.group == "overall"]
        assert test.test.sequence.n == (10 if counting == "ours" else 20)
