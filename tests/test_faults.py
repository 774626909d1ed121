"""Fault injection: a loopback model server that answers 20 % of requests with a 429, a 500,
a hang past the client's time limit, a dropped connection or a malformed body. A run of many
scenarios finishes; every scenario is scored correctly or is an error naming its cause;
none is lost; retries are counted."""

from __future__ import annotations

import json

import pytest

from personalens_testkit.agents.calls import CallLog
from personalens_testkit.errors import ModelError
from personalens_testkit.llm.retry import RetryPolicy

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project, with_runs

CAUSES = ("HTTP 429", "HTTP 500", "no answer within the time limit", "cannot reach", "malformed answer")
#: every fault the fake server can inject: statuses, hangs, dropped connections, broken, non-UTF-8 and
#: lone-surrogate bodies
FAULTS = ("429", "500", "hang", "drop", "malformed", "nonutf8", "surrogate")


def project_for(pytester: pytest.Pytester, url: str, extra: str = "") -> None:
    models = "".join(
        f'[models.{name}]\nkind = "openai"\nmodel = "fake-{name}"\nbase_url = "{url}"\ntimeout_s = 1.0\n'
        for name in ("user", "judge", "bot"))
    suite_project(pytester, f'record_mode = "all"\nretry_initial_s = 0.01\nretry_max_s = 0.05\n'
                            f'user_model = "user"\njudge_model = "judge"\nassistant_model = "bot"\n{extra}{models}')


def test_a_run_with_twenty_percent_faults_loses_nothing_and_misscores_nothing(pytester):
    script = Script(terminate_after=1, fault_rate=0.2, hang_s=1.5, faults=FAULTS)
    with FakeLLM(script) as fake:
        project_for(pytester, fake.url)
        result = pytester.runpytest("--profiles", "7,53", "--domains", "Alarm,Books,Buses", "--max-turns", "2", "-n", "4")
    outcomes = result.parseoutcomes()
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    rows = with_runs([json.loads(line) for line in results.read_text().splitlines()])
    selected = sum(outcomes.get(kind, 0) for kind in ("passed", "failed", "errors", "skipped", "xfailed", "xpassed"))
    assert len(rows) == selected >= 12, "a scenario was lost"
    assert sorted({r["scenario_id"] for r in rows}) == sorted(r["scenario_id"] for r in rows)
    assert sum(fake.injected.values()) >= 0.1 * len(fake.requests) and len(fake.injected) == len(FAULTS), fake.injected
    retries = sum(c.get("attempts", 1) - 1 for r in rows for c in r["calls"])
    assert retries > 0
    for row in rows:
        if row["status"] == "error":
            assert any(cause in row["error"]["message"] for cause in CAUSES), row["error"]
            assert row["scores"] is None and row["error"]["source"] in ("user_agent", "assistant", "judge")
        else:
            assert row["status"] == "passed" and row["scores"] == script.scores  # never a mis-score
    report = json.loads((results.parent / "report.json").read_text())
    assert sum(v["retries"] for v in report["ledger"]["total"].values()) == retries
    print(f"faults: {len(rows)} scenarios, {len(fake.requests)} requests, {sum(fake.injected.values())} faults "
          f"injected {fake.injected}, {retries} retries, {sum(r['status'] == 'error' for r in rows)} errors, lost 0")


def test_a_call_that_keeps_failing_is_an_error_with_its_cause_after_bounded_attempts():
    calls = []

    def always_429():
        calls.append(1)
        raise ModelError("HTTP 429 from http://x: slow down", model="openai:m", retryable=True)

    log = CallLog(retry=RetryPolicy(attempts=3, initial_s=0.001, max_s=0.002, jitter_s=0.0))
    with pytest.raises(ModelError, match=r"judge \(task_completion\) call to openai:m failed: HTTP 429 .* \(after 3 attempts\)"):
        log.run(always_429, role="judge", label="task_completion", turn=0)
    assert len(calls) == 3


def test_errors_that_are_not_retryable_are_not_retried():
    calls = []

    def bad_request():
        calls.append(1)
        raise ModelError("HTTP 400 from http://x: bad", model="openai:m", retryable=False)

    with pytest.raises(ModelError):
        CallLog(retry=RetryPolicy(attempts=5, initial_s=0.001)).run(bad_request, role="user_agent", label="opening", turn=0)
    assert len(calls) == 1


def test_a_scenario_time_limit_stops_the_dialogue_as_an_error(pytester):
    with FakeLLM(Script(terminate_after=None)) as fake:
        project_for(pytester, fake.url, extra="scenario_timeout_s = 0.05\n")
        result = pytester.runpytest("--profiles", "7", "--domains", "Alarm", "-k", "task-1")
    # an error of the bot (the limit ran out in its call) or not scored (in the user agent's): either way, one row
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) + outcomes.get("skipped", 0) == 1 and outcomes["deselected"] == 4
    result.stdout.fnmatch_lines(["*: the scenario's time limit of 0.05 s ran out*"])


@pytest.mark.parametrize("limit, check", [
    ("--max-concurrency=2", lambda fake: fake.max_in_flight <= 2),
    # every call starts no sooner than 1/8 s after the one before (its arrival, later still on a busy machine):
    # the calls span at least (calls - 1) / 8 s, less the first call's way from its turn to the server
    ("--max-rps=8", lambda fake: max(fake.arrivals) - min(fake.arrivals) >= (len(fake.arrivals) - 1) / 8 - 0.5),
])
def test_limits_hold_across_xdist_workers(pytester, limit, check):
    with FakeLLM(Script(terminate_after=1, delay_s=0.3)) as fake:
        project_for(pytester, fake.url)
        result = pytester.runpytest_subprocess("--profiles", "7", "--domains", "Alarm,Books", "--max-turns", "1",
                                               "-n", "4", limit, timeout=300)
    assert result.parseoutcomes().get("passed") == 9, result.stdout.str()[-2000:]
    assert check(fake), (fake.max_in_flight, len(fake.arrivals))


def test_without_limits_four_workers_overlap(pytester):
    with FakeLLM(Script(terminate_after=1, delay_s=0.3)) as fake:
        project_for(pytester, fake.url)
        pytester.runpytest_subprocess("--profiles", "7", "--domains", "Alarm,Books", "--max-turns", "1", "-n", "4",
                                      timeout=300)
    assert fake.max_in_flight >= 3  # what the limit above prevents
