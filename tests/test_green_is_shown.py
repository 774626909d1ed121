"""Green is shown, never assumed (issue 44): the decision core's two bars, the scenarios replayed unchanged, a run
too small to decide, the planned size - each rule tested directly, so that dropping a correction fails a test."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from personalens_testkit.cli import main as cli
from personalens_testkit.errors import ConfigError
from personalens_testkit.gating.aggregate import evaluate_gates, summarise
from personalens_testkit.gating.compare import compare_rows, replayed_whole
from personalens_testkit.gating.intervals import p_below
from personalens_testkit.gating.planning import plan, scenarios_for
from personalens_testkit.gating.sequential import ConfidenceSequence, SequentialTest, run_decision
from personalens_testkit.gating.thresholds import (
    DEFAULT_DRIFTS, DEFAULT_MARGINS, AggregateGates, Gate, Thresholds, default_thresholds_path, load_thresholds,
)
from personalens_testkit.gating.verdict import decide_run, run_verdict
from personalens_testkit.results.digest import RowDigest
from personalens_testkit.results.files import write_rows
from personalens_testkit.results.recorded import slim
from personalens_testkit.results.rows import CallRow, ResultRow, dialogue_digest
from personalens_testkit.run.early_stop import EarlyStop

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_report, recording_project, run_against

SCORES = {"task_completion": True, "personalization": 3, "naturalness_user": 4, "naturalness_assistant": 4,
          "coherence_user": 4, "coherence_assistant": 4}
TRANSCRIPT = [{"role": "user", "content": "Set an alarm for 7."}, {"role": "assistant", "content": "Done: 7:00."}]


def _row(i: int, p: int = 3, *, kind: str = "sd", live: bool = True, transcript: list | None = None,
         run_id: str = "run", completed: bool = True) -> ResultRow:
    sid = f"user{i}-SD-Alarm-task-1" if kind == "sd" else f"user{i}-MD-task-1"
    calls = [CallRow(role=role, label=role, turn=1, seconds=0.1, replayed=not live) for role in ("user", "judge")]
    transcript = TRANSCRIPT if transcript is None else transcript
    return ResultRow(scenario_id=sid, task_kind=kind, domains=["Alarm"], status="passed", run_id=run_id,
                     scores={**SCORES, "personalization": p, "task_completion": completed},
                     transcript=transcript, dialogue_digest=dialogue_digest(transcript), calls=calls)


def _overall(comparison, metric: str = "personalization"):
    return {(d.group, d.metric): d for d in comparison.results}[("overall", metric)]


# -- the two bars ---------------------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([-3, -2, -1, -1, 0, 0, 0, 0, 1, 1, 2]), min_size=10, max_size=120),
       st.sampled_from([0.0, 0.1, 0.2, 0.5]), st.sampled_from([0.0, 0.03]))
def test_a_difference_is_green_only_when_its_interval_clears_the_margin(steps, margin, drift):
    """For any paired differences: green exactly when the interval's low end reaches -margin; red only where the
    run shows the mean below -drift (never both); never a green whose interval reaches below -margin."""
    drift = min(drift, margin)
    base = [_row(i, 4) for i in range(len(steps))]
    candidate = [_row(i, 4 + min(0, max(-3, s)) if s <= 0 else 4, live=True) for i, s in enumerate(steps)]
    result = _overall(compare_rows(base, candidate, margin=margin, drifts={"personalization": drift}))
    low, high = result.difference.low, result.difference.high
    assert result.decision in ("green", "red", "undecided")
    assert (result.decision == "green") == (low >= -margin - 1e-12)
    if result.decision == "red":
        assert high < 0 and result.p_below is not None and result.p_below <= 0.05
        assert result.difference.mean < -drift
    assert result.drift == drift and result.margin == margin


def test_a_drop_of_the_margin_is_green_in_at_most_one_run_in_twenty():
    """Simulated through compare_rows: scenarios whose judged personalization dropped by 0.2 (the default margin) on
    average, judged with noise; green must stay rare (it would be about half the runs if green read the mean)."""
    rng = random.Random(44)
    green = red = 0
    for _ in range(200):
        base, candidate = [], []
        for i in range(120):
            true = rng.choice([2, 2, 3, 3, 4])
            base.append(_row(i, max(1, min(4, true + rng.choice([-1, 0, 0, 1])))))
            dropped = true - (1 if rng.random() < 0.2 else 0)
            candidate.append(_row(i, max(1, min(4, dropped + rng.choice([-1, 0, 0, 1])))))
        decision = _overall(compare_rows(base, candidate)).decision
        green += decision == "green"
        red += decision == "red"
    assert green <= 10, green
    assert red >= 20, red  # and the drop is seen as one in a good share of them at this small n


def test_an_unchanged_bot_replayed_is_green_at_any_margin():
    """Scenarios replayed whole from the base's recording are the same dialogue judged the same: a difference of
    exactly 0, not a draw of the judge's noise - green even with a margin of 0, where a re-judged run never is."""
    base = [_row(i, 2 + i % 3) for i in range(12)]
    replayed = [_row(i, 2 + i % 3, live=False, run_id="candidate") for i in range(12)]
    rejudged = [_row(i, 2 + i % 3, live=True, run_id="candidate") for i in range(12)]
    for margin in (0.0, 0.2):
        whole = _overall(compare_rows(base, replayed, margin=margin))
        assert whole.replayed == 12 and whole.decision == "green"
        assert (whole.difference.low, whole.difference.high) == (0.0, 0.0)
        again = _overall(compare_rows(base, rejudged, margin=margin))
        assert again.replayed == 0 and again.decision == "undecided"
    # a run compared with itself: the very rows, not a new draw
    assert _overall(compare_rows(base, base, margin=0.0)).decision == "green"


@pytest.mark.parametrize("change", ["live call", "other dialogue", "other score", "no dialogue", "one try of two"])
def test_a_scenario_is_replayed_whole_only_when_every_try_is_the_base_played_back(change):
    base = [_row(0, 3)]
    same = _row(0, 3, live=False, run_id="c")
    assert replayed_whole(base, [same]) == {same.scenario_id}
    assert replayed_whole(base, [RowDigest(same)]) == {same.scenario_id}  # a digest reads the same
    assert replayed_whole([slim(row) for row in base], [same]) == {same.scenario_id}  # the recording keeps no transcript
    if change == "live call":
        candidate = [_row(0, 3, live=True, run_id="c")]
    elif change == "other dialogue":
        candidate = [_row(0, 3, live=False, run_id="c", transcript=TRANSCRIPT[:1])]
    elif change == "other score":
        candidate = [_row(0, 2, live=False, run_id="c")]
    elif change == "no dialogue":
        candidate = [_row(0, 3, live=False, run_id="c", transcript=[])]
        base = [_row(0, 3, transcript=[])]
    else:
        candidate = [same, _row(0, 3, live=True, run_id="c").model_copy(update={"repeat": 2})]
    assert replayed_whole(base, candidate) == frozenset()


def test_the_replayed_scenarios_scale_the_changed_ones_interval():
    """Half the scenarios replayed unchanged, half re-judged with a drop of 1: the mean difference is -0.5 and its
    interval the changed half's, halved - the replayed half adds no noise and hides no drop."""
    base = [_row(i, 3) for i in range(40)]
    candidate = [_row(i, 3, live=False, run_id="c") if i % 2 else _row(i, 2, run_id="c") for i in range(40)]
    changed = compare_rows(base[0::2], candidate[0::2])
    both = compare_rows(base, candidate)
    whole, half = _overall(both), _overall(changed)
    assert whole.replayed == 20 and whole.difference.mean == pytest.approx(-0.5)
    assert whole.difference.low == pytest.approx(half.difference.low / 2)
    assert whole.difference.high == pytest.approx(half.difference.high / 2)
    assert whole.decision == "red"


def test_a_single_domain_or_multi_domain_difference_can_only_turn_the_run_red():
    """The whole run must show the margin; a fifth of it (multi-domain) is not asked to, but a drop it shows beyond
    the drift is red."""
    base = [_row(i, 3, kind="sd") for i in range(60)] + [_row(i, 3, kind="md") for i in range(60, 72)]
    same = [_row(i, 3, kind="sd", live=False, run_id="c") for i in range(60)]
    md_rejudged = [_row(i, 3, kind="md", run_id="c") for i in range(60, 72)]
    result = compare_rows(base, same + md_rejudged)
    decisions = {(d.group, d.metric): d.decision for d in result.results}
    assert decisions[("md", "personalization")] == "reported" and decisions[("overall", "personalization")] == "green"
    md_broken = [_row(i, 1, kind="md", run_id="c") for i in range(60, 72)]
    broken = compare_rows(base, same + md_broken)
    assert {(d.group, d.metric): d.decision for d in broken.results}[("md", "personalization")] == "red"
    assert broken.failed


# -- gates ----------------------------------------------------------------------------------------------------------

def _gate_verdict(values: list[int], gate: Gate, rules: AggregateGates | None = None):
    rules = rules or AggregateGates(gates=[gate], min_n=10)
    rows = [_row(i, p) for i, p in enumerate(values)]
    gates = decide_run(evaluate_gates(rules.gates, summarise(rows), min_n=rules.min_n, margins=rules.margin,
                                      drifts=rules.drift), None, rules)
    return gates[0], run_verdict(rows, gates, rules)


def test_a_mean_gate_is_green_only_when_the_low_end_clears_the_bar_less_the_margin():
    """A mean above the bar with an interval reaching below bar - margin is not green (it was, when green read the
    mean); once the low end clears bar - margin it is, though the mean sits below the bar."""
    gate = Gate(metric="personalization", statistic="mean", min=2.8)
    wide = [2, 3, 3, 3, 2, 3, 3, 4, 2, 3, 3, 3]  # mean 2.83, interval about [2.47, 3.2]
    result, verdict = _gate_verdict(wide, gate)
    assert result.estimate.mean > 2.8 and result.estimate.low < 2.6
    assert result.decision == "undecided" and verdict.outcome == "inconclusive"
    tight = [2, 3] * 300  # mean 2.5 less nothing, interval about +-0.04: low end above 2.3
    result, verdict = _gate_verdict(tight, Gate(metric="personalization", statistic="mean", min=2.6))
    assert result.estimate.mean < 2.6 and result.estimate.low >= 2.4
    assert result.decision == "green" and verdict.outcome == "passed"


def test_a_gate_below_its_min_n_makes_the_run_inconclusive_never_passed():
    gate = Gate(metric="personalization", statistic="mean", min=1.5)
    for n in (2, 5, 9):
        result, verdict = _gate_verdict([4] * n, gate)
        assert result.passed is None and verdict.outcome == "inconclusive", n
        assert any(check.inconclusive for check in verdict.checks if check.name == result.title)
    _, verdict = _gate_verdict([4] * 10, gate)
    assert verdict.outcome == "passed"


def test_a_baseline_on_too_few_scenarios_is_inconclusive():
    base = [_row(i, 3) for i in range(5)]
    comparison = compare_rows(base, [_row(i, 3, live=False, run_id="c") for i in range(5)], min_n=10)
    rules = AggregateGates(min_n=10)
    verdict = run_verdict(base, decide_run([], comparison, rules), rules, comparison=comparison)
    assert verdict.outcome == "inconclusive"
    assert any("NOT EVALUATED" in line for line in verdict.undecided)


# -- thresholds.yaml ------------------------------------------------------------------------------------------------

def test_margins_and_drifts_default_per_metric_and_merge(tmp_path):
    assert DEFAULT_MARGINS["task_completion"] == 0.05 and DEFAULT_MARGINS["personalization"] == 0.2
    assert all(DEFAULT_DRIFTS[m] <= DEFAULT_MARGINS[m] for m in DEFAULT_MARGINS)
    path = tmp_path / "thresholds.yaml"
    path.write_text("version: 1\naggregate:\n  margin:\n    personalization: 0.1\n")
    rules = load_thresholds(path).aggregate
    assert rules.margin == {**DEFAULT_MARGINS, "personalization": 0.1} and rules.drift == DEFAULT_DRIFTS
    assert Thresholds().aggregate.margin == DEFAULT_MARGINS


@pytest.mark.parametrize("body, said", [
    ("margin:\n    personalization: 0.01", "drift: personalization: 0.03 is more than its margin 0.01"),
    ("margin:\n    kindness: 0.1", "unknown metric 'kindness'"),
    ("drift:\n    task_completion: 2", "task_completion: must be a number from 0 to 1 (got 2)"),
    ("margin: 0.2", "must be a mapping of a metric to a number"),
    ("margin:\n    personalization: yes", "personalization: must be a number from 0 to 3 (got True)"),
])
def test_a_bad_margin_or_drift_is_one_line_naming_it(tmp_path, body, said):
    path = tmp_path / "thresholds.yaml"
    path.write_text(f"version: 1\naggregate:\n  {body}\n")
    with pytest.raises(ConfigError) as caught:
        load_thresholds(path)
    assert said in str(caught.value) and "\n" not in str(caught.value) and "aggregate" in str(caught.value)


# -- planning and stopping early ------------------------------------------------------------------------------------

def test_the_planned_size_grows_as_the_margin_narrows_and_none_fits_a_margin_equal_to_its_drift():
    sizes = [max(scenarios_for(1.0, margin, 0.03, alpha_red=0.003, confidence=0.95)) for margin in (0.5, 0.3, 0.2, 0.1)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert scenarios_for(1.0, 0.03, 0.03, alpha_red=0.003, confidence=0.95) == (None, None)
    rules = Thresholds().aggregate
    shipped = plan(rules)
    assert shipped.needed is not None and shipped.needed <= 4096  # the default margins fit the bundled sample
    wider = plan(rules.model_copy(update={"margin": {**rules.margin, "task_completion": 0.1}}))
    assert wider.needed < shipped.needed
    measured = plan(rules, base_rows=[_row(i, 3) for i in range(30)])  # a bot that never varies: few needed
    assert "30 scenario(s)" in measured.spread_basis and measured.needed < shipped.needed


def test_early_stop_ends_green_on_the_required_tests_alone():
    alpha = 0.01
    required = SequentialTest("overall", -0.2, ConfidenceSequence(alpha, -3, 3), red_bar=-0.03)
    optional = SequentialTest("md", -0.2, ConfidenceSequence(alpha, -3, 3), red_bar=-0.03, required=False)
    for _ in range(2000):
        required.add(0.0)
    assert required.decision == "green" and optional.decision == "undecided"
    assert run_decision([required, optional]) == "green"
    for _ in range(2000):
        optional.add(-1.0)
    assert optional.decision == "red" and run_decision([required, optional]) == "red"


def test_the_plan_command_says_the_size_a_selection_of_it_and_its_cost(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["plan", "--judge-model", "openai:gpt-4o", "--user-model", "openai:gpt-4o-mini", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["needed"] == plan(load_thresholds(default_thresholds_path()).aggregate).needed
    assert found["tests"] == 17  # the shipped five gates and the baseline's twelve differences
    assert found["scenarios"] >= found["needed"] and found["selectable"] == 4096 and found["profiles"]
    (tmp_path / "thresholds.yaml").write_text("version: 1\naggregate:\n  margin:\n    task_completion: 0.1\n")
    assert cli(["plan", "--judge-model", "openai:gpt-4o", "--user-model", "openai:gpt-4o-mini"]) == 0
    out = capsys.readouterr().out
    assert "task_completion        margin 0.1, drift 0.01" in out and "a selection of that size: --profiles " in out
    assert "record mode all:" in out and "  total       $" in out
    rows = tmp_path / "rows.jsonl"
    write_rows(rows, [_row(i, 3) for i in range(30)])
    assert cli(["plan", "--spread-from", str(rows), "--json"]) == 0
    assert "30 scenario(s)" in json.loads(capsys.readouterr().out)["spread_basis"]
    assert cli(["plan", "--margin", "-1"]) == 2
    assert "--margin: must be a number, 0 or more" in capsys.readouterr().err


def test_an_unchanged_bot_stops_green_early_and_says_the_sequence_ranges():
    """--stop-when-decided ends an unchanged bot's run green once non-inferiority is shown; the reason gives each
    required test's confidence-sequence range (valid at the data-dependent stop, unlike a fixed-n interval)."""
    base = [_row(i, 2 + i % 3) for i in range(1500)]
    early = EarlyStop.build(Thresholds().aggregate, ["Alarm"], enforced=True, repeat=1, base_rows=base, margin=None)
    reason = None
    for count, row in enumerate(base, 1):
        reason = early.observe(row)
        if reason is not None:
            break
    assert reason is not None and reason.startswith("decided green after ") and count < len(base)
    assert reason.count("range [") == 4 and "md" not in reason  # the four headline metrics, the whole run's


def test_a_replay_of_the_recording_against_its_recorded_results_is_green_through_the_plugin(pytester):
    """The gate's own path: main records (cassettes and the slim recorded results, which keep no transcript), the
    same bot replays offline with those results as --baseline - every scenario replayed whole, a difference of
    exactly 0, green with margins of 0 and on a handful of scenarios."""
    project = recording_project(pytester, "version: 1\naggregate: {min_n: 3, gates: [], margin: {task_completion: 0, "
                                          "personalization: 0, naturalness_assistant: 0, coherence_assistant: 0}, "
                                          "drift: {task_completion: 0, personalization: 0, naturalness_assistant: 0, "
                                          "coherence_assistant: 0}}\n")
    specs = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model",
             "openai:fake-bot", "--profiles", "7", "--domains", "Alarm", "--max-turns", "2", "--task-kind", "sd"]
    with FakeLLM(Script(terminate_after=1)) as fake:
        run_against(project, fake.url, *specs, "--record-mode", "once")
    recorded = project.path / "cassettes" / "reference" / "results.jsonl.xz"
    replay = run_against(project, "http://127.0.0.1:9/v1", *specs, "--record-mode", "none", "--baseline", str(recorded))
    assert replay.ret == 0, replay.stdout.str()[-3000:]
    report = latest_report(project.path)
    overall = {(d["group"], d["metric"]): d for d in report["comparison"]["results"]}
    for metric in ("task_completion", "personalization", "naturalness_assistant", "coherence_assistant"):
        found = overall[("overall", metric)]
        assert found["replayed"] == found["n"] >= 3 and found["decision"] == "green", found
        assert (found["difference"]["low"], found["difference"]["high"]) == (0.0, 0.0)
    assert report["verdict"]["outcome"] == "passed"


def test_a_few_multi_domain_scenarios_all_broken_are_never_passed():
    """Green asks the margin of the whole run only, but a multi-domain difference whose own estimate points at a drop
    that matters must be decided: too few to evaluate, it makes the run inconclusive - never a pass."""
    base = [_row(i, 4) for i in range(195)] + [_row(i, 4, kind="md") for i in range(195, 200)]
    same = [_row(i, 4, live=False, run_id="c") for i in range(195)]
    rules = AggregateGates(min_n=10)
    for md_score, outcome in ((1, "inconclusive"), (4, "passed")):
        candidate = same + [_row(i, md_score, kind="md", run_id="c") for i in range(195, 200)]
        comparison = compare_rows(base, candidate, min_n=10)
        md = {(d.group, d.metric): d for d in comparison.results}[("md", "personalization")]
        assert md.decision == ("not evaluated" if md_score == 1 else "reported")
        verdict = run_verdict(candidate, decide_run([], comparison, rules), rules, comparison=comparison)
        assert verdict.outcome == outcome, verdict.headline


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 80), st.floats(min_value=0.5, max_value=0.999), st.sampled_from([0.05, 0.01, 0.0022]))
def test_a_completion_rate_on_its_red_bar_is_shown_below_it_at_most_alpha_of_the_time(n, bar, alpha):
    """The exact chance, over every outcome of n scenarios whose true rate sits on the bar, that the rate's test shows
    it below the bar at level alpha: at most alpha at any n and any bar (a normal approximation ran to 44 times
    alpha at n = 10, bar 0.99)."""
    false_red = sum(math.comb(n, k) * bar ** k * (1 - bar) ** (n - k) for k in range(n + 1)
                    if (p_below([1.0] * k + [0.0] * (n - k), bar, low=0.0, high=1.0, rate=True) or 1.0) <= alpha)
    assert false_red <= alpha * (1 + 1e-9)
