"""--rerun-user-faults (issue 49): a scenario whose user agent spoiled its dialogue (hindered or helped the bot, by the
checks that cost nothing) is run again once with a fresh dialogue, within the budget; the second dialogue is judged,
the first stays on the row; a replay follows its recording (its cassette says how many dialogues it holds), with or
without the option."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.agents.calls import CallRecord
from personalens_testkit.costs.prices import load_prices
from personalens_testkit.errors import CassetteError
from personalens_testkit.evaluation import _run_again
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings
from personalens_testkit.replay.store import XzPersister
from personalens_testkit.results.rows import USER_AGENT_VERDICT
from personalens_testkit.run.budget import Budget
from personalens_testkit.run.rerun import UserAgentRerun
from personalens_testkit.run.stop import StopSignal
from personalens_testkit.transcript_file import read_transcript

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows
from .test_plugin import rows as suite_rows
from .test_plugin import run_suite, suite  # noqa: F401 - the fixture

ALARM = ("--profiles", "7", "--domains", "Alarm")


def _judged_by_dialogue(text: str) -> dict[str, int]:
    """A judge that tells the dialogues apart: 4 for personalization when the user said something new each turn."""
    return {"personalization": 4} if "That is my point" in text else {}


def _newest_rows(project: Path) -> list[dict]:
    return read_rows(max(project.glob("personalens-results/*/results.jsonl"), key=lambda p: p.stat().st_mtime))


def _replay(suite, *args: str):  # noqa: F811
    """The recording replayed offline: every model endpoint dead."""
    with FakeLLM(Script()) as dead:
        suite._monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # noqa: SLF001 - pytester's own
        result = suite.runpytest("-p", "no:deepeval", "--user-model", "openai:fake-user", "--judge-model",
                                 "openai:fake-judge", "--assistant-model", "openai:fake-bot", *ALARM,
                                 "--record-mode", "none", *args)
        assert dead.requests == []
    return result


def test_a_spoiled_dialogue_is_run_again_once_the_second_judged_and_a_replay_follows_the_recording(suite):  # noqa: F811
    script = Script(terminate_after=3, loop_first_dialogue=True, vary_assistant_text=True,
                    judge_rule=_judged_by_dialogue)
    with FakeLLM(script) as fake:
        result = run_suite(suite, fake, *ALARM, "--rerun-user-faults")
        openings = dict(fake.openings)
    result.assert_outcomes(passed=4, deselected=1)
    assert sorted(openings.values()) == [2, 2, 2, 2]  # each task's dialogue begun twice, never a third time
    assert "4 dialogue(s) run again with a fresh one (4 not spoiled the second time)" in result.stdout.str()
    found = suite_rows(suite)
    for row in found:
        first = row["rerun"]["first"]
        assert row["rerun"]["why"].startswith("the user agent hindered the bot: turns 1, 2, 3 repeated an earlier turn")
        assert {f["rule"] for f in first["user_faults"]} == {"repeated_turn"} and row["user_faults"] == []
        assert row["scores"]["personalization"] == 4 and row["verdict"] == "pass"  # the second dialogue was judged
        said = [m["content"] for m in first["transcript"] if m["role"] == "user"]
        assert len(set(said[1:])) == 1 and len(set(m["content"] for m in row["transcript"] if m["role"] == "user")) == 4
        # the first dialogue's calls lead the row's (its cost is the case's), and none of them is a judge's
        assert first["calls"] == 8 and {c["role"] for c in row["calls"][:8]} == {"user_agent", "assistant"}
        assert [c["role"] for c in row["calls"]].count("judge") == 6
        transcript = read_transcript(row["transcript_path"])
        assert "## First dialogue (run again, not judged)" in transcript and said[1] in transcript
    cassette = json.loads(lzma.decompress((suite.path / "cassettes/reference/user7-SD-Alarm-task-1.json.xz").read_bytes()))
    assert cassette["metadata"]["dialogues"] == 2
    # offline, without the option: the recording's second dialogue is played and judged, as recorded
    replay = _replay(suite)
    replay.assert_outcomes(passed=4, deselected=1)
    again = _newest_rows(suite.path)
    assert [r["dialogue_digest"] for r in again] == [r["dialogue_digest"] for r in found]
    assert [r["scores"] for r in again] == [r["scores"] for r in found]
    assert [r["rerun"]["first"]["transcript"] for r in again] == [r["rerun"]["first"]["transcript"] for r in found]
    assert all(c["replayed"] for r in again for c in r["calls"])
    # re-judged live: the recorded second dialogue is the one judged again
    with FakeLLM(Script(judge_rule=_judged_by_dialogue)) as judge:
        run_suite(suite, judge, *ALARM, "--rejudge").assert_outcomes(passed=4, deselected=1)
        assert judge.openings == {} and judge.requests
    rejudged = _newest_rows(suite.path)
    assert [r["dialogue_digest"] for r in rejudged] == [r["dialogue_digest"] for r in found]
    assert all(r["scores"]["personalization"] == 4 and r["rerun"]["first"] for r in rejudged)


def test_a_second_dialogue_spoiled_again_is_inconclusive_and_there_is_no_third(suite):  # noqa: F811
    with FakeLLM(Script(terminate_after=3, vary_user_text=False, vary_assistant_text=True)) as fake:
        result = run_suite(suite, fake, *ALARM, "--rerun-user-faults")
        openings = [r for r in fake.requests if "playing the part of a person" in json.dumps(r)
                    and "[ASSISTANT]:" not in r["messages"][-1]["content"]]
    result.assert_outcomes(skipped=4, deselected=1)
    assert len(openings) == 8
    assert "4 dialogue(s) run again with a fresh one (0 not spoiled the second time)" in result.stdout.str()
    found = suite_rows(suite)
    assert all(r["verdict"] == USER_AGENT_VERDICT and r["user_faults"] and r["rerun"]["first"] for r in found)


def test_without_the_option_a_live_spoiled_dialogue_is_kept_and_voided(suite):  # noqa: F811
    with FakeLLM(Script(terminate_after=3, loop_first_dialogue=True, vary_assistant_text=True)) as fake:
        run_suite(suite, fake, *ALARM).assert_outcomes(skipped=4, deselected=1)
        assert sorted(fake.openings.values()) == [1, 1, 1, 1]
    assert all(r["rerun"] is None and r["verdict"] == USER_AGENT_VERDICT for r in suite_rows(suite))
    cassette = json.loads(lzma.decompress((suite.path / "cassettes/reference/user7-SD-Alarm-task-1.json.xz").read_bytes()))
    assert "dialogues" not in cassette["metadata"]  # a recording of one dialogue is as before
    # the option on a replay of it: the recording decides - one dialogue, voided as recorded
    replay = _replay(suite, "--rerun-user-faults")
    replay.assert_outcomes(skipped=4, deselected=1)
    assert all(r["rerun"] is None for r in _newest_rows(suite.path))


class _Policy:
    def __init__(self, asked: bool, why: str | None, refused: str | None) -> None:
        self.asked, self._why, self._refused = asked, why, refused

    def why(self, evaluation):
        return self._why

    def refused(self, evaluation):
        return self._refused


class _Cassette:
    def __init__(self, recorded: int | None) -> None:
        self.recorded = recorded

    def dialogues(self):
        return self.recorded


@settings(max_examples=300, deadline=None)
@given(st.none() | st.builds(_Policy, st.booleans(), st.none() | st.just("the user agent hindered the bot"),
                             st.none() | st.just("not run again: the budget")),
       st.sampled_from([None, 1, 2]))
def test_a_live_dialogue_is_run_again_when_asked_spoiled_and_allowed_a_replayed_one_as_recorded(policy, recorded):
    evaluation = SimpleNamespace(rerun=None)
    again = _run_again(policy, evaluation, _Cassette(recorded))
    if recorded is not None:  # replayed: the recording decides, whatever the run asks
        assert again == (recorded == 2)
        assert (evaluation.rerun is not None) == again
        return
    live = policy is not None and policy.asked and policy._why is not None
    assert again == (live and policy._refused is None)
    if live:  # asked and spoiled: the row says what was done, and why not when it was not
        assert evaluation.rerun == ({"why": policy._why} if again else {"why": policy._why, "refused": policy._refused})
    else:
        assert evaluation.rerun is None


def _evaluation(faults: list[dict]) -> SimpleNamespace:
    return SimpleNamespace(user_faults=faults, scenario=SimpleNamespace(scenario_id="user7-SD-Alarm-task-1"), repeat=1)


def test_the_second_dialogue_is_reserved_in_the_budget_refused_without_stopping_the_run(tmp_path):
    prices = load_prices({"fake-judge": {"input": 1000.0, "output": 0.0}})
    budget = Budget(limit=1.0, prices=prices, specs={"judge": "openai:fake-judge"}, path=tmp_path / ".budget",
                    expected=lambda: 0.4)
    policy = UserAgentRerun(True, tmp_path, budget=lambda: budget)
    spoiled = _evaluation([{"turn": 1, "rule": "spoke_as_assistant", "direction": "hindered"}])
    assert policy.why(_evaluation([{"turn": 1, "rule": "turn_limit", "direction": "noted"}])) is None
    assert policy.why(spoiled).startswith("the user agent hindered the bot: turn 1")
    assert budget.reserve("user7-SD-Alarm-task-1") is None  # the case itself
    assert policy.refused(spoiled) is None  # its second dialogue: 0.8 of 1.0 reserved
    assert budget.read().open == 2
    budget.settle("user7-SD-Alarm-task-1", [CallRecord(role="judge", label="x", turn=0, seconds=0.0,
                                                       prompt_tokens=400, completion_tokens=0)])
    policy.settle(spoiled)
    assert budget.read().open == 0 and budget.read().spent == pytest.approx(0.4)
    assert budget.reserve("user7-SD-Alarm-task-2") is None
    refused = policy.refused(_evaluation(spoiled.user_faults))  # 0.4 + 2 x 0.4 > 1.0
    assert refused is not None and refused.startswith("not run again: the budget: spent $0.40")
    assert budget.tripped is None and StopSignal(tmp_path).reason() is None  # the run goes on
    StopSignal(tmp_path).raise_("a dead endpoint")
    assert policy.refused(spoiled) == "not run again: the run is stopping (a dead endpoint)"


def test_a_cassette_that_says_it_holds_another_number_of_dialogues_is_an_error_naming_it(tmp_path):
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference", record_mode="none"))
    path = cassettes.path("user7-SD-Alarm-task-1")
    path.parent.mkdir(parents=True)
    for count, expected in ((2, 2), (1, 1), (3, None), ("2", None), (True, None), (None, None)):
        XzPersister.save_cassette(path, {"requests": [], "responses": [], "metadata": {"dialogues": count}}, None)
        with cassettes.for_scenario("user7-SD-Alarm-task-1", "pytest ...") as scenario:
            if expected is not None:
                assert scenario.dialogues() == expected
                continue
            with pytest.raises(CassetteError, match=r"user7-SD-Alarm-task-1.json.xz.*metadata.dialogues.*1 or 2"):
                scenario.dialogues()


class _DeadOnSecond(FakeLLM):
    """The user agent's endpoint dies as each task's second dialogue begins."""

    def answer(self, body):
        if "playing the part of a person" in body["messages"][0]["content"] and "response_format" not in body:
            prompt = body["messages"][-1]["content"]
            task = prompt.split("<task>\n", 1)[1].split("\n", 1)[0]
            if not prompt.count("[ASSISTANT]:") and self.openings.get(task, 0) >= 1:
                raise RuntimeError("the endpoint died")
        return super().answer(body)


def test_a_second_dialogue_that_fails_is_its_cases_error_and_never_counted_clean(suite):  # noqa: F811
    with _DeadOnSecond(Script(terminate_after=3, loop_first_dialogue=True, vary_assistant_text=True)) as fake:
        result = run_suite(suite, fake, *ALARM, "--rerun-user-faults")
    found = suite_rows(suite)
    assert len(found) == 4 and all(r["status"] == "error" and r["error"]["phase"] == "the dialogue, run again"
                                   and r["rerun"]["first"]["user_faults"] for r in found)
    assert "4 dialogue(s) run again with a fresh one (0 not spoiled the second time, 4 ended in an error)" in \
        result.stdout.str()
    assert not (suite.path / "cassettes/reference/user7-SD-Alarm-task-1.json.xz").exists()  # never a half recording


VARYING_BOT = '''
import itertools
_n = itertools.count(1)

def reply(request):
    return f"Your usual alarm is set, as you like it. (reply {next(_n)})"
'''
STEADY_BOT = '''
def reply(request):
    said = sum(1 for m in request.get("messages", []) if m.get("role") == "user")
    return f"Your usual alarm is set, as you like it. (turn {request['turn']}, {said})"
'''
BOT = ("--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--profiles", "7", "--domains",
       "Alarm", "-k", "task-1", "--assistant", "my-bot")


def _bot_project(pytester, code: str):
    from .support.project import suite_project

    suite_project(pytester, '[assistants.my-bot]\nkind = "python"\ncallable = "mybot:reply"\npath = ["."]\n')
    pytester.makepyfile(mybot=code)
    return pytester


@pytest.mark.parametrize("mode", ["once", "new_episodes"])
def test_a_bots_second_dialogue_is_not_compared_with_its_first_as_a_recording(pytester, mode):
    """A bot whose every reply differs: its second dialogue meets the first's request again, and the first's reply,
    recorded moments before in this run, is no recording of it - never a 'reply changed'."""
    from .support.project import latest_results, run_against

    project = _bot_project(pytester, VARYING_BOT)
    with FakeLLM(Script(terminate_after=3, loop_first_dialogue=True)) as fake:
        run_against(project, fake.url, *BOT, "--record-mode", mode, "--rerun-user-faults")
    (row,) = read_rows(latest_results(project.path))
    assert row["rerun"]["first"] and row["reply_change"] is None and row["status"] == "passed"


@pytest.mark.parametrize("mode", ["once", "new_episodes", "all"])
def test_a_bots_two_dialogues_rejudge_as_recorded_in_every_record_mode(pytester, mode):
    """Each turn of both dialogues is in the cassette - the second's first turn too, though its request and reply are
    the first's - so --rejudge plays them all and judges the same dialogue alike."""
    from .support.project import latest_results, run_against

    project = _bot_project(pytester, STEADY_BOT)
    with FakeLLM(Script(terminate_after=3, loop_first_dialogue=True, judge_rule=_judged_by_dialogue)) as fake:
        run_against(project, fake.url, *BOT, "--record-mode", mode, "--rerun-user-faults")
    (recorded,) = read_rows(latest_results(project.path))
    with FakeLLM(Script(judge_rule=_judged_by_dialogue)) as judge:
        run_against(project, judge.url, *BOT, "--rejudge", "--record-mode", "all")
    (rejudged,) = read_rows(latest_results(project.path))
    assert recorded["scores"]["personalization"] == 4 and rejudged["scores"] == recorded["scores"]
    assert rejudged["dialogue_digest"] == recorded["dialogue_digest"] and rejudged["rerun"]["first"]


def test_the_rerecord_command_keeps_the_option_that_shapes_the_recording(tmp_path):
    from personalens_testkit.run.recording import Recording
    from personalens_testkit.settings.resolve import resolve_settings

    settings = resolve_settings({"rerun_user_faults": True}, tmp_path, {})
    assert Recording(settings, [], assistant_is_bot=False).rerecord_command("suites/ -k x").endswith(
        "--record-mode all --rerun-user-faults")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.builds(lambda turn, rule, direction: {"turn": turn, "rule": rule, "direction": direction},
                          st.integers(0, 30), st.sampled_from(["repeated_turn", "pasted_profile", "turn_limit",
                                                               "spoke_as_assistant", "off_task"]),
                          st.sampled_from(["hindered", "helped", "noted"])), max_size=6))
def test_a_dialogue_is_run_again_exactly_when_a_fault_hindered_or_helped_and_the_why_names_those_faults(faults):
    policy = UserAgentRerun(True, Path("/nonexistent-run"))
    why = policy.why(_evaluation(faults))
    spoiling = [f for f in faults if f["direction"] != "noted"]
    assert (why is None) == (not spoiling)
    if why is not None:
        kind = "hindered" if any(f["direction"] == "hindered" for f in faults) else "helped"
        assert why.startswith(f"the user agent {kind} the bot:")
        assert all(f["rule"] in why for f in faults if f["direction"] == kind)
