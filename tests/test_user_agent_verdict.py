"""What the user agent's own faults do to the verdict (issue 49): a case whose user agent hindered the bot is
inconclusive (user agent) and counts in no figure; one it helped cannot pass on that dialogue; a run with more
such cases than thresholds.yaml's max_user_agent_faults is inconclusive as a whole, with the rate in its outputs;
``user_agent_faults`` decides whether faults are gated (auto: unless the user agent is the embedded model)."""

from __future__ import annotations

import json
import typing
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
from personalens_testkit.gating.user_agent import effect, gated, user_agent_verdict
from personalens_testkit.results.rows import USER_AGENT_VERDICT, CaseVerdict, ResultRow

from .support.fake_llm import FakeLLM, Script
from .test_plugin import rows as suite_rows
from .test_plugin import run_suite, suite  # noqa: F401 - the fixture

VERDICTS = typing.get_args(CaseVerdict)
DIRECTIONS = ("hindered", "helped", "noted")
FAULTS = st.lists(st.builds(lambda turn, rule, direction: {"turn": turn, "rule": rule, "direction": direction},
                            st.integers(0, 30), st.sampled_from(["repeated_turn", "pasted_profile", "turn_limit"]),
                            st.sampled_from(DIRECTIONS)), max_size=5)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(VERDICTS), FAULTS, st.booleans())
def test_hindered_voids_a_case_and_helped_voids_only_a_pass(verdict, faults, is_gated):
    directions = {fault["direction"] for fault in faults}
    weighed = user_agent_verdict(verdict, faults, is_gated=is_gated)
    if not is_gated:
        assert weighed == verdict
    elif "hindered" in directions:
        assert weighed == USER_AGENT_VERDICT
    elif "helped" in directions and verdict in ("pass", "unexpected pass"):
        assert weighed == USER_AGENT_VERDICT
    else:  # noted alone changes nothing; a failure the user agent helped to stands
        assert weighed == verdict


def test_auto_gates_unless_the_user_agent_is_the_embedded_model():
    assert [gated(mode, embedded) for mode in ("auto", "gate", "report") for embedded in (False, True)] == [
        True, False, True, True, False, False]
    assert effect([{"direction": "noted"}]) is None and effect([]) is None
    assert effect([{"direction": "helped"}, {"direction": "hindered"}]) == "hindered"


SCORES = {"task_completion": True, "personalization": 3, "naturalness_user": 4, "naturalness_assistant": 4,
          "coherence_user": 4, "coherence_assistant": 4}


def _row(n: int, *, voided: bool, personalization: int = 3) -> ResultRow:
    faults = [{"turn": 2, "rule": "repeated_turn", "direction": "hindered", "excerpt": "again"}] if voided else []
    return ResultRow(scenario_id=f"user{n}-SD-Alarm-task-1", domains=["Alarm"], status="passed",
                     scores={**SCORES, "personalization": personalization}, user_faults=faults,
                     verdict=USER_AGENT_VERDICT if voided else "pass")


@settings(max_examples=60, deadline=None)
@given(st.integers(10, 40), st.data())
def test_a_run_is_inconclusive_past_the_share_of_cases_the_user_agent_spoiled(cases, data):
    from personalens_testkit.report.model import build_report

    voided = data.draw(st.integers(0, cases))
    rows = [_row(n, voided=n < voided, personalization=1 if n < voided else 3) for n in range(cases)]
    thresholds = load_thresholds(default_thresholds_path())
    report = build_report(rows, thresholds)
    check = next(c for c in report.verdict.checks if c.name == "user agent")
    share = voided / cases
    if share > thresholds.aggregate.max_user_agent_faults:
        assert check.outcome == "failed" and check.inconclusive
        assert f"the user agent, not the bot, failed in {share:.0%} of dialogues" in check.message
        assert report.verdict.outcome == "inconclusive" and check.message in report.verdict.failures
    else:
        assert check.outcome == "passed" and f"faults in {voided} of {cases} dialogues" in check.message
    assert len(report.verdict.user_agent) == voided
    # a voided case counts in no figure: its personalization of 1 moves no mean
    overall = next(iter(report.aggregates.values()))
    if voided < cases:
        assert overall.metrics["personalization"].n == cases - voided
        assert overall.metrics["personalization"].mean == 3


def test_a_looping_user_agent_makes_its_cases_inconclusive_not_the_bots_failures(suite):  # noqa: F811
    with FakeLLM(Script(terminate_after=3, vary_user_text=False, vary_assistant_text=True)) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm")
    result.assert_outcomes(skipped=4, deselected=1)
    out = result.stdout.str()
    assert "the user agent, not the bot, failed in 100% of dialogues" in out
    assert "inconclusive (user agent), out of every figure: 4 case(s): user7-SD-Alarm-task-1: the user agent " \
           "hindered the bot: turns 1, 2, 3 repeated an earlier turn word for word (repeated_turn)" in out
    found = suite_rows(suite)
    assert [r["verdict"] for r in found] == [USER_AGENT_VERDICT] * 4
    assert all(r["status"] == "passed" and r["scores"] is not None for r in found)  # its scores kept, not counted
    assert {(f["turn"], f["rule"]) for f in found[0]["user_faults"]} == {(1, "repeated_turn"), (2, "repeated_turn"),
                                                                        (3, "repeated_turn")}
    report = json.loads(next(suite.path.glob("personalens-results/*/report.json")).read_text())
    assert report["verdict"]["outcome"] == "inconclusive" and len(report["verdict"]["user_agent"]) == 4
    assert [c["verdict"] for c in report["changes"]] == [USER_AGENT_VERDICT] * 4  # what a reviewer is shown first
    junit = ET.parse(next(suite.path.glob("personalens-results/*/junit.xml"))).getroot()
    (cases,) = [s for s in junit if s.get("name") == "test_single_domain"]
    assert cases.get("skipped") == "4"
    assert all(c.find("skipped").get("message").startswith("inconclusive (user agent): the user agent hindered the bot")
               for c in cases.iter("testcase"))


def test_with_user_agent_faults_report_they_are_shown_never_a_verdict(suite):  # noqa: F811
    text = default_thresholds_path().read_text().replace("user_agent_faults: auto", "user_agent_faults: report")
    (suite.path / "thresholds.yaml").write_text(text)
    with FakeLLM(Script(terminate_after=3, vary_user_text=False, vary_assistant_text=True)) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--thresholds",
                           str(suite.path / "thresholds.yaml"))
    result.assert_outcomes(passed=4, deselected=1)
    assert "user agent: faults in 4 of 4 dialogues (100%): repeated_turn 4" in result.stdout.str()
    assert all(r["verdict"] == "pass" and r["user_faults"] for r in suite_rows(suite))


def test_a_resumed_run_weighs_its_kept_rows_faults_as_it_weighs_its_own(suite):  # noqa: F811
    """Rows kept from a run that only reported the user agent's faults are weighed by this run's rule: gated here,
    the looping user agent's cases are inconclusive (user agent), never kept as passes."""
    text = default_thresholds_path().read_text()
    (suite.path / "report.yaml").write_text(text.replace("user_agent_faults: auto", "user_agent_faults: report"))
    with FakeLLM(Script(terminate_after=3, vary_user_text=False, vary_assistant_text=True)) as fake:
        first = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--thresholds",
                          str(suite.path / "report.yaml"))
        first.assert_outcomes(passed=4, deselected=1)
        (results,) = suite.path.glob("personalens-results/*/results.jsonl")
        resumed = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--resume", str(results))
    assert "the user agent, not the bot, failed in 100% of dialogues" in resumed.stdout.str()
    newest = max(suite.path.glob("personalens-results/*/results.jsonl"), key=lambda p: p.stat().st_mtime)
    from .support.project import read_rows

    assert [r["verdict"] for r in read_rows(newest)] == [USER_AGENT_VERDICT] * 4


def test_a_baseline_of_another_user_agent_is_refused_in_the_verdict(suite):  # noqa: F811
    with FakeLLM(Script(terminate_after=2)) as fake:
        first = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm")
        first.assert_outcomes(passed=4, deselected=1)
        (base,) = suite.path.glob("personalens-results/*/results.jsonl")
        same = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--baseline", str(base))
        other = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--baseline", str(base),
                          "--user-model", "openai:another-user")
    assert "across user agents" not in same.stdout.str()
    out = other.stdout.str()
    assert ("--baseline: the base's rows were produced with the user agent openai:fake-user, this run's is "
            "openai:another-user: a comparison across user agents measures them, not the bot - refused") in out
    assert "verdict: INCONCLUSIVE" in out and other.ret != 0


# -- the review by a model (--review-user) ------------------------------------------------------------------------------

REVIEW_FAULT = {"turn": 1, "rule": "off_task", "direction": "hindered"}


def test_a_review_that_finds_the_user_hindered_the_bot_makes_its_case_inconclusive(suite):  # noqa: F811
    """Faults a cheap check cannot see (the user drifting off its task) come from the review, one judge call a
    dialogue, recorded like every call; they weigh as the checks' do."""
    with FakeLLM(Script(terminate_after=2, review_faults=[REVIEW_FAULT], review_first_error="user")) as fake:
        plain = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm")
        plain.assert_outcomes(passed=4, deselected=1)
        asked = sum(1 for r in fake.requests if "faults" in json.dumps(r.get("response_format") or {}))
        assert asked == 0  # not asked for: no review call
        reviewed = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--review-user")
    reviewed.assert_outcomes(skipped=4, deselected=1)
    newest = max(suite.path.glob("personalens-results/*/results.jsonl"), key=lambda p: p.stat().st_mtime)
    from .support.project import read_rows

    found = read_rows(newest)
    assert all(r["verdict"] == USER_AGENT_VERDICT and r["user_review"]["first_error"] == "user" for r in found)
    assert all({"turn": 1, "rule": "off_task", "direction": "hindered", "source": "review"}.items()
               <= f.items() for r in found for f in r["user_faults"] if f["source"] == "review")
    assert all(sum(c["label"] == "user review" for c in r["calls"]) == 1 for r in found)
    assert "turn 1 drifted off its task (off_task)" in reviewed.stdout.str()


@pytest.mark.parametrize("answer, why", [
    ('{"faults": [{"turn": 9, "rule": "off_task", "direction": "hindered"}], "first_error": "user"}', "names user turn 9"),
    ('{"faults": [{"turn": 1, "rule": "rude", "direction": "hindered"}], "first_error": "user"}', "faults.0.rule"),
    ('{"faults": [], "first_error": "none"} {"faults": [], "first_error": "user"}', "gives 2 answers"),
    ('{"faults": [], "first_error": "none", "justification": "or rather {\\"faults\\": [1]}"}', "holds JSON"),
    ("The user played its part.", 'no JSON object with "faults"'),
])
def test_a_review_answer_that_is_not_one_clear_review_is_the_reviews_failure_never_a_fault(suite, answer, why):  # noqa: F811
    """Read through the judge's strict answer grammar: a second answer, a quoted one, an unknown rule or a turn the
    dialogue does not have makes the review fail on its own (analysis_errors); the case's scores stand."""
    with FakeLLM(Script(terminate_after=2)) as fake:
        fake.script.review_faults = json.loads(answer)["faults"] if answer.startswith('{"faults": [{') else []
        original = fake.answer

        def answer_review(body):
            if "faults" in json.dumps(body.get("response_format") or {}):
                return answer
            return original(body)

        fake.answer = answer_review
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--review-user")
    result.assert_outcomes(passed=4, deselected=1)
    from .support.project import read_rows

    (results,) = suite.path.glob("personalens-results/*/results.jsonl")
    for row in read_rows(results):
        assert why in row["analysis_errors"]["user_review"] and row["user_review"] is None
        assert not [f for f in row["user_faults"] if f["source"] == "review"]


def test_the_review_is_priced_in_the_estimate_one_reviewer_call_a_dialogue():
    from personalens_testkit.assistants.base import ContextSwitches
    from personalens_testkit.costs.shape import LENGTHS, calls_of
    from personalens_testkit.data.loader import open_dataset

    dataset = open_dataset(None)
    (scenario, *_) = dataset.scenarios_for(7)
    shapes = [calls_of(dataset, scenario, LENGTHS[1], bot=True, max_turns=None, turn_level=False, turn_method="chain",
                       leak_check=False, retest_share=0.0, context=ContextSwitches(), variant="claude",
                       review_user=review)
              for review in (False, True)]
    assert "reviewer" not in shapes[0] and shapes[1]["reviewer"][0] == 1 and shapes[1]["reviewer"][1] > 0
    assert {role: shape for role, shape in shapes[1].items() if role != "reviewer"} == shapes[0]


def test_the_estimates_stand_in_answers_every_judge_schema_with_an_answer_that_reads():
    """The estimate's stand-in model answers the review as it answers every judgement: validly (an answer it could not
    read would price a failed review, not one)."""
    from personalens_testkit.agents.answers import SCHEMAS, parse_answer
    from personalens_testkit.costs.shape import stand_in_answer

    for model, schema in SCHEMAS.items():
        parse_answer(stand_in_answer(schema, 40), model, model.__name__)


def test_the_review_runs_on_its_own_model_recorded_and_replayed_like_every_role(suite):  # noqa: F811
    """--review-user-model: the review's calls go to that model under their own role (reviewer), each row's run names
    it, the ledger counts its calls apart from the judge's, and a replay plays them back offline."""
    with FakeLLM(Script(terminate_after=2, review_faults=[REVIEW_FAULT], review_first_error="user")) as fake:
        run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--review-user", "--review-user-model",
                  "openai:fake-reviewer").assert_outcomes(skipped=4, deselected=1)
        reviews = [r for r in fake.requests if "faults" in json.dumps(r.get("response_format") or {})]
        judged = [r for r in fake.requests if "response_format" in r and r not in reviews]
    assert len(reviews) == 4 and {r["model"] for r in reviews} == {"fake-reviewer"}
    fault = reviews[0]["response_format"]["json_schema"]["schema"]["properties"]["faults"]
    assert fault["items"]["properties"]["turn"]["enum"] == [0, 1, 2]  # the dialogue's three user turns
    assert judged and {r["model"] for r in judged} == {"fake-judge"}
    recorded = max(suite.path.glob("personalens-results/*/results.jsonl"), key=lambda p: p.stat().st_mtime)
    from .support.project import read_rows

    found = read_rows(recorded)
    assert {r["reviewer_model"] for r in found} == {"openai:fake-reviewer"}
    assert all([c["role"] for c in r["calls"] if c["label"] == "user review"] == ["reviewer"] for r in found)
    assert all(c["role"] == "judge" for r in found for c in r["calls"] if c["label"] != "user review"
               and c["role"] not in ("user_agent", "assistant"))
    report = json.loads((recorded.parent / "report.json").read_text())
    assert report["ledger"]["total"]["reviewer"]["calls"] == 4 and report["ledger"]["total"]["judge"]["calls"] == 24
    assert report["cost"]["roles"]["reviewer"]["model"] == "openai:fake-reviewer"
    # offline: the review answers from the cassettes (a dead endpoint), the same faults
    with FakeLLM(Script(terminate_after=2)) as dead:
        suite._monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # noqa: SLF001 - pytester's own
        replay = suite.runpytest("-p", "no:deepeval", "--user-model", "openai:fake-user", "--judge-model",
                                 "openai:fake-judge", "--assistant-model", "openai:fake-bot", "--profiles", "7",
                                 "--domains", "Alarm", "--review-user", "--review-user-model", "openai:fake-reviewer",
                                 "--record-mode", "none")
        assert dead.requests == []
    replay.assert_outcomes(skipped=4, deselected=1)
    again = read_rows(max(suite.path.glob("personalens-results/*/results.jsonl"), key=lambda p: p.stat().st_mtime))
    assert [r["user_faults"] for r in again] == [r["user_faults"] for r in found]
    assert all(c["replayed"] for r in again for c in r["calls"] if c["role"] == "reviewer")


def test_the_estimate_prices_the_review_at_its_own_models_price():
    from personalens_testkit.costs.estimate import Options, estimate
    from personalens_testkit.costs.prices import PriceTable, shipped_prices
    from personalens_testkit.data.loader import open_dataset

    dataset = open_dataset(None)
    cases = [(scenario, 1) for scenario in dataset.scenarios_for(7)[:3]]
    prices = PriceTable(shipped_prices())
    models = {"user_agent": "openai:gpt-4o-mini", "assistant": "openai:gpt-4o-mini", "judge": "openai:gpt-4o-mini"}
    found = {}
    for reviewer in ("openai:gpt-4o-mini", "openai:gpt-4o"):
        run = estimate(dataset, cases, Options(record_mode="all", review_user=True,
                                               models={**models, "reviewer": reviewer}), prices)
        found[reviewer] = {role.role: role for role in run.roles}
    cheap, dear = found["openai:gpt-4o-mini"]["reviewer"], found["openai:gpt-4o"]["reviewer"]
    assert cheap.model == "openai:gpt-4o-mini" and dear.model == "openai:gpt-4o"
    assert cheap.calls[1] == 3 + 1  # one a case, and the preflight's one call to the model
    assert cheap.prompt_tokens == dear.prompt_tokens and dear.cost[1] > cheap.cost[1] > 0
    assert found["openai:gpt-4o"]["judge"].cost == found["openai:gpt-4o-mini"]["judge"].cost
    without = estimate(dataset, cases, Options(record_mode="all", models=models), prices)
    assert "reviewer" not in {role.role for role in without.roles}


@pytest.mark.parametrize("judge, reviewer, shares", [
    ("local", None, True),  # unset: the judge's model, the judge's server
    ("local", "local", True),
    ("local", "local:other.gguf", False),
    ("openai:fake-judge", "local", False),
    ("openai:fake-judge", None, None),  # unset: the judge's model, not embedded - no server at all
])
def test_a_review_on_the_judges_embedded_model_asks_the_judges_server(tmp_path, judge, reviewer, shares):
    """One embedded server less: the reviewer shares the judge's server when both run the same model (never
    otherwise), and its spec unset is the judge's."""
    from personalens_testkit.llm.local_settings import LocalServerSettings
    from personalens_testkit.run.models import ModelPool, server_role
    from personalens_testkit.settings.resolve import resolve_settings

    options = {"judge_model": judge, "review_user": True, **({"review_user_model": reviewer} if reviewer else {})}
    settings = resolve_settings(options, tmp_path, {})
    assert settings.review_user_model == (reviewer or judge)
    local = settings.role_models["reviewer"].local(settings.local)
    pool = ModelPool(settings, tmp_path, live_roles=frozenset({"judge", "reviewer", "user_agent"}), is_controller=True)
    roles = [role for role, _ in pool._local_servers()]  # noqa: SLF001 - the servers the controller would launch
    assert roles.count("judge") == (judge == "local")
    if shares is None:
        assert local is None and "reviewer" not in roles
        return
    assert isinstance(local, LocalServerSettings)
    assert (server_role(settings, "reviewer", local) == "judge") is shares
    assert ("reviewer" in roles) is not shares


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.data())
def test_a_reviews_schema_names_only_the_dialogues_user_turns_and_bounds_its_faults(user_turns, data):
    """A review's answer is constrained to the dialogue it reviews: each fault's turn is one of its user turns, and
    at most two faults a turn (never past the grammar's 30) - a model that lists faults on and on ends its answer."""
    from personalens_testkit.agents.answers import UserReviewAnswer, parse_answer, review_schema

    schema = review_schema(user_turns)
    faults = schema["properties"]["faults"]
    assert faults["items"]["properties"]["turn"]["enum"] == list(range(user_turns))
    assert faults["maxItems"] == min(30, 2 * user_turns)
    turn = data.draw(st.integers(0, user_turns - 1))
    answer = {"faults": [{"turn": turn, "rule": "off_task", "direction": "hindered"}], "first_error": "user",
              "justification": "drifted"}
    assert parse_answer(json.dumps(answer), UserReviewAnswer, "user_review").faults[0].turn == turn
