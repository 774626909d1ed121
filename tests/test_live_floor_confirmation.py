"""A floor missed on a live judgement is confirmed or cleared before the verdict (run/confirmation.py).

The rule is tested directly (generated draws, by the thousand), its false-confirmation bound exactly (every outcome
of the six new judgements enumerated through the real rule), and the re-judging through a real judge over HTTP."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from personalens_testkit.gating.thresholds import ScenarioFloors, load_thresholds, default_thresholds_path
from personalens_testkit.llm.base import Message
from personalens_testkit.results.rows import dialogue_digest
from personalens_testkit.run.confirmation import (
    MAX_JUDGEMENTS, Base, base_case, confirm, decide, judgements_for, misses, unconfirmed_why,
)
from tests.support.fake_llm import FakeLLM, Script

FLOORS: ScenarioFloors = load_thresholds(default_thresholds_path()).scenario
MET = {"task_completion": True, "personalization": 3, "naturalness_user": 4, "naturalness_assistant": 4,
       "coherence_user": 5, "coherence_assistant": 4}
#: a value below each gated floor
BELOW = {"task_completion": False, "personalization": 1, "naturalness_assistant": 2, "coherence_assistant": 2}
GATED = sorted(BELOW)
#: judgements of each dialogue in these tests
JUDGEMENTS = 3


def scores(missing: set[str]) -> dict:
    return {**MET, **{name: BELOW[name] for name in missing}}


draw = st.one_of(st.none(), st.sets(st.sampled_from(GATED)).map(scores))


@settings(max_examples=2000, deadline=None)
@given(missed=st.lists(st.sampled_from(GATED), min_size=1, unique=True),
       case=st.lists(draw, min_size=0, max_size=4), base=st.one_of(st.none(), st.lists(draw, max_size=4)),
       recorded=draw)
def test_a_floor_is_confirmed_exactly_when_every_case_draw_misses_and_every_base_draw_meets(missed, case, base,
                                                                                          recorded):
    expected = [m for m in missed
                if len(case) >= JUDGEMENTS and (base is None or len(base) >= JUDGEMENTS)
                and all(d is not None and d[m] == BELOW[m] for d in case)
                and all(d is not None and d[m] != BELOW[m] for d in ([recorded, *base] if base is not None else []))]
    assert decide(FLOORS, missed, case, base, JUDGEMENTS, base_recorded=recorded) == expected


@settings(max_examples=500, deadline=None)
@given(metric=st.sampled_from(GATED), position=st.integers(0, JUDGEMENTS - 1), side=st.sampled_from(["case", "base"]),
       spoiler=st.sampled_from(["flip", "none"]))
def test_one_draw_the_other_way_or_failed_clears_a_confirmed_miss(metric, position, side, spoiler):
    case, base = [scores({metric})] * JUDGEMENTS, [scores(set())] * JUDGEMENTS
    assert decide(FLOORS, [metric], case, base, JUDGEMENTS, base_recorded=MET) == [metric]
    assert decide(FLOORS, [metric], case, base, JUDGEMENTS, base_recorded=scores({metric})) == []  # it missed too
    spoilt = (scores(set()) if side == "case" else scores({metric})) if spoiler == "flip" else None
    if side == "case":
        case = case[:position] + [spoilt] + case[position + 1:]
    else:
        base = base[:position] + [spoilt] + base[position + 1:]
    assert decide(FLOORS, [metric], case, base, JUDGEMENTS, base_recorded=MET) == []
    assert decide(FLOORS, [metric], case[:-1], base if side == "case" else None, JUDGEMENTS, base_recorded=MET) == []


def test_only_a_floor_the_first_judgement_missed_is_confirmed():
    case, base = [scores({"personalization", "task_completion"})] * 3, [scores(set())] * 3
    assert decide(FLOORS, ["personalization"], case, base, 3, base_recorded=MET) == ["personalization"]
    assert decide(FLOORS, ["personalization"], [], None, 3) == []  # nothing judged again confirms nothing
    assert misses(FLOORS, {**MET, "personalization": None}, "personalization") is None


@pytest.mark.parametrize("q", [i / 40 for i in range(41)])
def test_a_bot_as_good_as_the_base_is_confirmed_at_most_one_time_in_4_to_the_r_plus_1(q):
    """Both dialogues miss a floor with the same chance q per judgement (a scenario at its floor, a noisy judge):
    every outcome of the live judgement, the base's recorded one and the 2R new ones, through the real rule,
    weighted by its probability - the case's chance of being tried (its live judgement missed) included."""
    total = 0.0
    for outcome in itertools.product((True, False), repeat=2 * JUDGEMENTS + 2):
        p = 1.0
        for missed in outcome:
            p *= q if missed else 1 - q
        live, recorded, *draws = [scores({"personalization"} if missed else set()) for missed in outcome]
        if live["personalization"] == 1 and decide(FLOORS, ["personalization"], draws[:JUDGEMENTS], draws[JUDGEMENTS:],
                                                   JUDGEMENTS, base_recorded=recorded):
            total += p
    assert total <= 0.25 ** (JUDGEMENTS + 1) + 1e-12
    if q in (0.0, 1.0):
        assert total == 0.0


@settings(max_examples=1000, deadline=None)
@given(cases=st.integers(0, 10**6), confidence=st.floats(0.5, 0.999),
       floors=st.sets(st.sampled_from(GATED)))
def test_judgements_are_the_fewest_that_hold_half_the_error_rate_over_every_case_and_floor(cases, confidence, floors):
    chosen = ScenarioFloors(**{name: (name in floors) if name == "task_completion" else (2 if name in floors else None)
                               for name in ScenarioFloors.model_fields})
    r = judgements_for(cases, chosen, confidence)
    bound = lambda k: max(1, len(floors)) * max(1, cases) * 0.25 ** (k + 1)  # noqa: E731
    assert r == MAX_JUDGEMENTS or bound(r) <= (1 - confidence) / 2
    assert r == 1 or bound(r - 1) > (1 - confidence) / 2
    assert judgements_for(cases + 1000, chosen, confidence) >= r


def test_the_shipped_floors_need_6_judgements_at_36_cases_and_9_at_the_whole_sample():
    assert [judgements_for(n, FLOORS, 0.95) for n in (36, 400, 4096)] == [6, 7, 9]


def test_the_base_case_must_be_there_match_its_fingerprint_and_be_scored():
    transcript = [{"role": "user", "content": "Wake me at 7."}, {"role": "assistant", "content": "Birdsong at 7:30?"}]
    base, why = base_case(transcript, dialogue_digest(transcript), MET)
    assert why is None and base == Base([Message("user", "Wake me at 7."), Message("assistant", "Birdsong at 7:30?")], MET)
    forged = [transcript[0], {"role": "assistant", "content": "Birdsong at 7:30."}]
    assert base_case(forged, dialogue_digest(transcript), MET) == (None, "the recorded dialogue does not match its "
                                                                         "fingerprint")
    assert base_case([], None, MET)[0] is None and base_case(transcript, None, MET)[0] is None
    assert base_case(transcript, dialogue_digest(transcript), None) == (None, "the recorded case has no scores")
    assert base_case([{"text": "x"}], dialogue_digest([{"text": "x"}]), MET)[0] is None


# --- through a real judge, over HTTP ------------------------------------------------------------------------------
GOOD = [Message("user", "Set my alarm."), Message("assistant", "Your saved birdsong alarm is set for 7:30.")]
WORSE = [Message("user", "Set my alarm."), Message("assistant", "An alarm is set.")]


def judge_rule(text: str) -> dict:
    return {} if "birdsong" in text else {"personalization": 1}


def confirm_with(script: Script, case, base, *, missed=("personalization",)):
    from personalens_testkit.agents.calls import CallLog
    from personalens_testkit.agents.judge import Judge
    from personalens_testkit.data.context import build_context
    from personalens_testkit.data.loader import open_dataset
    from personalens_testkit.llm.openai_compat import OpenAICompatibleChat

    dataset = open_dataset()
    ctx = build_context(dataset, next(s for s in dataset.scenarios_for(7) if s.task.task_id == "SD-Alarm-task-1"))
    log = CallLog()
    with FakeLLM(script) as fake:
        model = OpenAICompatibleChat(spec="openai:fake-judge", base_url=fake.url, model="fake-judge")
        try:
            found = confirm(Judge(model), ctx, case, FLOORS, list(missed), log, judgements=JUDGEMENTS, base=base,
                            without_base=None if base else "no base")
        finally:
            model.close()
    return found, log


def test_a_broken_dialogue_beside_a_good_base_is_confirmed_asking_only_the_missed_floor():
    found, log = confirm_with(Script(judge_rule=judge_rule), WORSE, Base(GOOD, MET))
    assert found.confirmed == ["personalization"] and found.judgements == JUDGEMENTS
    assert found.case == [{"personalization": 1}] * JUDGEMENTS and found.base == [{"personalization": 3}] * JUDGEMENTS
    assert [r.label for r in log.records] == ["personalization"] * 2 * JUDGEMENTS  # the case's and the base's, in turn


def test_two_missed_floors_are_asked_while_each_can_still_be_confirmed():
    rule = lambda text: {} if "birdsong" in text else {"personalization": 1, "task_completion": False}  # noqa: E731
    found, log = confirm_with(Script(judge_rule=rule), WORSE, Base(GOOD, MET),
                              missed=("task_completion", "personalization"))
    assert found.confirmed == ["task_completion", "personalization"]
    assert len(log.records) == 2 * 2 * JUDGEMENTS


def test_a_base_that_misses_too_clears_it_at_once_and_alone_a_steady_miss_confirms():
    recorded_miss, log = confirm_with(Script(judge_rule=judge_rule), WORSE, Base(GOOD, scores({"personalization"})))
    assert recorded_miss.confirmed == [] and recorded_miss.case == [] and not log.records  # its recording missed too
    assert unconfirmed_why(recorded_miss.as_dict()) == "the base's recorded judgement missed it too: not confirmed"
    cleared, log = confirm_with(Script(judge_rule=judge_rule), WORSE, Base(WORSE, MET))
    assert cleared.confirmed == [] and len(cleared.case) == len(cleared.base) == 1 and len(log.records) == 2
    assert unconfirmed_why(cleared.as_dict()) == ("judged again: the case's dialogue 1 time(s), the base's 1: "
                                                  "not confirmed")
    good, log = confirm_with(Script(judge_rule=judge_rule), GOOD, Base(GOOD, MET))  # the case's own draw meets it: no base asked
    assert good.confirmed == [] and good.base == [] and len(log.records) == 1
    alone, log = confirm_with(Script(judge_rule=judge_rule), WORSE, None)
    assert alone.confirmed == ["personalization"] and alone.base is None and alone.without_base == "no base"
    assert len(log.records) == JUDGEMENTS


def test_a_judge_that_cannot_answer_confirms_nothing_and_says_why():
    found, _ = confirm_with(Script(judge_text="It was fine, I suppose."), WORSE, Base(GOOD, MET))
    assert found.confirmed == [] and found.case == [None] and found.base == [] and len(found.errors) == 1
    assert found.errors[0].startswith("JudgeAnswerError")
    assert "1 answer(s) failed: JudgeAnswerError" in unconfirmed_why(found.as_dict())
    dead, _ = confirm_with(Script(judge_rule=judge_rule, status=500), WORSE, Base(GOOD, MET))
    assert dead.confirmed == [] and dead.case == [None] and len(dead.errors) == 1


def test_a_run_that_is_stopping_judges_nothing_again(tmp_path):
    """Once the run's stop signal is up (a budget spent, a decided verdict), a live floor miss costs no new call."""
    from types import SimpleNamespace

    from personalens_testkit.evaluation import Evaluation
    from personalens_testkit.run.cases_runner import CaseRunner
    from personalens_testkit.run.stop import StopSignal

    StopSignal(tmp_path).raise_("the budget: spent $1.00 of --max-cost $1.00")
    runner = CaseRunner.__new__(CaseRunner)  # only what confirm() reads before it would call a model
    runner.run_dir, runner.budget = tmp_path, None
    runner.settings = SimpleNamespace(retry=None, scenario_timeout_s=None)
    runner.recording = SimpleNamespace(plan=SimpleNamespace(all_cases=[None] * 36),
                                       base_case=lambda scenario, repeat: (None, "no base"))
    from personalens_testkit.data.loader import open_dataset

    scenario = next(s for s in open_dataset().scenarios_for(7) if s.task.task_id == "SD-Alarm-task-1")
    evaluation = Evaluation(scenario=scenario, max_turns=20)
    found = runner.confirm(evaluation, FLOORS, ["personalization"], confidence=0.95)
    assert found.confirmed == [] and found.case == [] and found.judgements == 6
    assert unconfirmed_why(evaluation.confirmation) == ("not judged again: the run is stopping (the budget: spent $1.00 "
                                                       "of --max-cost $1.00): not confirmed")
