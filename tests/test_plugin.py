"""The pytest plugin end to end through real HTTP: collection, cases, verdicts, result rows, xdist."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from personalens_testkit.transcript_file import read_transcript

from .support.fake_llm import FakeLLM, Script, task_of
from .support.project import with_runs

SUITES = Path(__file__).resolve().parent.parent / "suites"
FAKE_SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("test_single_domain.py", "test_multi_domain.py"):
        shutil.copy(SUITES / name, pytester.path / name)
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings =\n    ignore::pytest.PytestAssertRewriteWarning\n"
    )
    # these tests run live against a fake model server (cassettes are tested in test_replay.py); a failed call is
    # retried as always, after hundredths of a second instead of seconds
    pytester.makefile(".toml", personalens='record_mode = "all"\nretry_initial_s = 0.01\nretry_max_s = 0.05\n')
    return pytester


def rows(pytester: pytest.Pytester) -> list[dict]:
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    return with_runs([json.loads(line) for line in results.read_text().splitlines()])


def test_collects_the_whole_sample_with_readable_ids(suite):
    result = suite.runpytest("-p", "no:deepeval", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["4096 tests collected*"])
    lines = set(result.stdout.lines)
    assert "test_single_domain.py::test_single_domain[user7-SD-Alarm-task-1]" in lines
    assert "test_single_domain.py::test_single_domain[user1377-SD-RentalCars-task-4]" in lines
    assert "test_multi_domain.py::test_multi_domain[user1495-MD-task-25]" in lines


def test_keyword_selection(suite):
    movies = suite.runpytest("-p", "no:deepeval", "--collect-only", "-q", "-k", "Movies")
    movies.stdout.fnmatch_lines(["200/4096 tests collected (3896 deselected)*"])
    exact = suite.runpytest("-p", "no:deepeval", "--collect-only", "-q", "-k", "user7-")
    exact.stdout.fnmatch_lines(["64/4096 tests collected*"])
    assert all("[user7-" in line for line in exact.stdout.lines if "::" in line)
    prefix = suite.runpytest("-p", "no:deepeval", "--collect-only", "-q", "-k", "user7")
    ids = [line for line in prefix.stdout.lines if "::" in line]
    assert {line.split("[")[1].split("-")[0] for line in ids} == {"user7", "user701", "user746", "user774", "user788"}


def test_options_select_and_an_empty_suite_is_deselected(suite):
    result = suite.runpytest("-p", "no:deepeval", "--collect-only", "-q", "--profiles", "7", "--domains", "Movies")
    result.stdout.fnmatch_lines(["4/5 tests collected (1 deselected)*"])
    md = suite.runpytest("-p", "no:deepeval", "--collect-only", "-q", "--sample", "30", "--task-kind", "md")
    md.stdout.fnmatch_lines(["486/487 tests collected (1 deselected)*"])


@pytest.mark.parametrize("args, message", [
    (["--profiles", "7;8"], "ERROR: --profiles: '7;8' is not a profile id*"),
    (["--sample", "100"], "ERROR: --sample 100: 50 profile(s) not in bundled 50-profile sample*--personalens-data DIR*"),
    (["--domains", "Cinema"], "ERROR: --domains: 'Cinema' is not a benchmark domain*"),
    (["--assistant", "my-bot"], "ERROR: --assistant: unknown assistant 'my-bot' (known: reference)"),
    (["--judge-model", "claude"], "ERROR: --judge-model: model spec 'claude': unknown backend 'claude'*"),
    (["--max-turns", "0"], "ERROR: --max-turns: must be at least 1 (got 0)"),
    (["--personalens-data", "/nowhere"], "ERROR: --personalens-data: /nowhere: no such folder*"),
])
def test_bad_options_fail_with_one_line(suite, args, message):
    result = suite.runpytest("-p", "no:deepeval", "--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def run_suite(pytester: pytest.Pytester, fake: FakeLLM, *args: str, subprocess: bool = False):
    pytester._monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # noqa: SLF001 - pytester's own monkeypatch
    argv = ["-p", "no:deepeval", *FAKE_SPECS, *args]
    return pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)


def test_passing_cases_write_full_result_rows(suite):
    with FakeLLM(Script(terminate_after=2)) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm")
    result.assert_outcomes(passed=4, deselected=1)
    found = rows(suite)
    assert [r["scenario_id"] for r in found] == [f"user7-SD-Alarm-task-{n}" for n in range(1, 5)]
    row = found[0]
    assert row["status"] == "passed" and row["termination"] == "user_terminated" and row["turns"] == 3
    assert row["scores"] == fake.script.scores
    assert row["reasons"]["personalization"] == "personalization looks fine"
    assert row["observations"] == ["used the saved preference"]
    assert [m["role"] for m in row["transcript"]] == ["user", "assistant"] * 3
    assert all("TERMINATE" not in m["content"] for m in row["transcript"])
    roles = [c["role"] for c in row["calls"]]
    assert roles.count("judge") == 6 and roles.count("assistant") == 3 and roles.count("user_agent") == 3
    assert all(c["prompt_tokens"] and c["seconds"] >= 0 for c in row["calls"])
    assert (row["user_model"], row["judge_model"], row["assistant_model"]) == ("openai:fake-user", "openai:fake-judge", "openai:fake-bot")
    assert read_transcript(row["transcript_path"]).startswith("# user7-SD-Alarm-task-1")
    # the judge calls asked for schema-constrained JSON in the OpenAI dialect
    judge_calls = [r for r in fake.requests if "response_format" in r]
    assert len(judge_calls) == 24 and judge_calls[0]["response_format"]["type"] == "json_schema"
    # the rows are in the file; the reports pytest keeps all session hold none (its memory does not grow with them)
    reports = result.reprec.getreports("pytest_runtest_logreport")
    assert len(reports) >= 12 and not any(hasattr(r, "personalens_row") or hasattr(r, "personalens_error") for r in reports)


def test_each_case_reads_its_own_item_and_a_nested_run_gives_the_outer_one_back(suite, request):
    from personalens_testkit.plugin import fixtures

    assert fixtures._running() is request.node  # noqa: SLF001 - this test's own item, as pytest runs it
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm")
    result.assert_outcomes(passed=4, deselected=1)  # each case's row kept on its own item, and written
    assert [(r["scenario_id"], read_transcript(r["transcript_path"]).split("\n")[0]) for r in rows(suite)] == [
        (f"user7-SD-Alarm-task-{n}", f"# user7-SD-Alarm-task-{n}") for n in range(1, 5)]
    assert fixtures._running() is request.node  # noqa: SLF001
    fixtures._RUNNING.item = None  # noqa: SLF001 - as outside any test: the fixtures say what is wrong
    try:
        with pytest.raises(RuntimeError, match="while pytest sets up or runs a test"):
            fixtures._running()  # noqa: SLF001
    finally:
        fixtures._RUNNING.item = request.node  # noqa: SLF001


def test_each_thread_reads_the_item_it_runs(request):
    import threading

    from personalens_testkit.plugin import fixtures

    barrier, seen = threading.Barrier(2), {}

    def run(item, phase):
        wrapper = phase(item)
        next(wrapper)  # inside the phase: the thread's own item, whatever the other thread runs meanwhile
        barrier.wait()
        seen[item] = fixtures._running()  # noqa: SLF001
        barrier.wait()
        with pytest.raises(StopIteration):
            wrapper.send(None)

    threads = [threading.Thread(target=run, args=(item, phase)) for item, phase in
               (("item-A", fixtures.pytest_runtest_setup), ("item-B", fixtures.pytest_runtest_call))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"item-A": "item-A", "item-B": "item-B"}
    assert fixtures._running() is request.node  # noqa: SLF001 - this thread's, as it was


def test_scores_below_the_floors_fail_with_scores_reasons_and_transcript(suite):
    script = Script()
    script.scores = {**script.scores, "personalization": 1, "task_completion": False}
    import shutil

    from personalens_testkit.gating.thresholds import default_thresholds_path

    shipped = default_thresholds_path().read_text()  # "report": a floor missed on a live judgement stays evidence
    (suite.path / "thresholds.yaml").write_text(shipped.replace("live_judged_floors: confirm", "live_judged_floors: report"))
    with FakeLLM(script) as fake:
        unconfirmed = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--max-turns", "2", "-rx")
    unconfirmed.assert_outcomes(xfailed=4, deselected=1)
    unconfirmed.stdout.fnmatch_lines(["XFAIL *user7-SD-Alarm-task-1* - unconfirmed: task_completion false below true; "
                                      "personalization 1 below 2 on a live judgement (one judgement*"])
    calls_reported = len(fake.requests)
    # the default, "confirm": the run above recorded the same dialogue, whose recorded judgement missed the same floors:
    # cleared without a call
    (suite.path / "thresholds.yaml").write_text(shipped)
    with FakeLLM(script) as fake:
        cleared = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--max-turns", "2", "-rx")
    cleared.assert_outcomes(xfailed=4, deselected=1)
    cleared.stdout.fnmatch_lines(["XFAIL *user7-SD-Alarm-task-1* - unconfirmed: * on a live judgement (the base's "
                                  "recorded judgement missed it too: not confirmed;*"])
    assert len(fake.requests) == calls_reported
    # no recording to take the base's dialogue from: the case's alone is judged again; this judge never varies
    shutil.rmtree(suite.path / "personalens-results")  # one run's rows below
    shutil.rmtree(suite.path / "cassettes")
    with FakeLLM(script) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--max-turns", "2")
    result.assert_outcomes(failed=4, deselected=1)
    assert len(fake.requests) - calls_reported == 4 * 4 * 2  # 4 cases need 4 judgements each, of the 2 floors
    result.stdout.fnmatch_lines([
        "user7-SD-Alarm-task-1 is below its thresholds:",
        "  - Task completion: the judge found the task not completed (required: completed)",
        "  - Personalization: 1 is below the floor of 2",
        "  personalization = 1: personalization looks fine",
        "transcript: */transcripts/main.txt:*",
    ])
    row = rows(suite)[0]
    assert row["status"] == "failed" and row["verdict"] == "regression"
    assert row["shortfalls"] == [
        {"metric": "task_completion", "value": False, "floor": True},
        {"metric": "personalization", "value": 1, "floor": 2},
    ]
    confirmation = row["confirmation"]  # no recording to take the base's dialogue from: the case's alone, confirmed
    assert confirmation["confirmed"] == confirmation["missed"] == ["task_completion", "personalization"]
    assert confirmation["judgements"] == len(confirmation["case"]) == 4 and confirmation["base"] is None
    assert "no recorded results" in confirmation["without_base"]
    assert len(row["calls"]) == row["turns"] * 2 + 6 + 4 * 2  # the new judgements' calls are the case's, and cost


def test_an_unparseable_judge_answer_is_an_error_never_a_score(suite):
    """The judge is the benchmark's model, not the bot: its failure leaves the case not scored (a skip, counted
    apart), and a run that cannot score more than 5 % of its cases fails on that alone, naming the cause."""
    with FakeLLM(Script(judge_text="I would say it was quite good overall.")) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--max-turns", "1", "-rs")
    result.assert_outcomes(skipped=4, deselected=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "  not scored: user7-SD-Alarm-task-1: judging failed (JudgeAnswerError): judge answer for task_completion "
        "could not be parsed*raw answer: 'I would say it was quite good overall.'",
        "personalens: FAILED infrastructure: 4 of 4 cases (100%) were not scored because the user agent, the judge or "
        "the setup failed - over the 5% allowed: the scores no longer represent the sample",
        "SKIPPED * not scored (infrastructure): judging failed (JudgeAnswerError): judge answer for task_completion "
        "could not be parsed*",
    ])
    row = rows(suite)[0]
    assert row["status"] == "error" and row["scores"] is None and row["verdict"] == "not scored"
    assert row["error"]["raw_answer"] == "I would say it was quite good overall."
    assert len(row["transcript"]) == 3  # the dialogue itself was kept


def test_a_failing_model_is_an_error_with_its_cause(suite):
    with FakeLLM(Script(status=500, status_pings=False)) as fake:  # answers the preflight, then fails
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--stop-after-errors", "2")
    result.assert_outcomes(skipped=2, deselected=1)  # the circuit breaker stopped it after two identical errors
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["  not scored: user7-SD-Alarm-task-1: the dialogue failed (ModelError): user agent "
                                 "(opening) call to openai:fake-user failed: HTTP 500*scripted failure*"])
    row = rows(suite)[0]
    assert row["status"] == "error" and row["error"]["phase"] == "the dialogue" and row["termination"] == "error"


def test_bad_thresholds_file_names_the_key(suite):
    (suite.path / "thresholds.yaml").write_text("version: 1\nscenario:\n  personalization: 5\n")
    with FakeLLM() as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "--max-turns", "1", "-x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # before any case, in one line
    result.stderr.fnmatch_lines(["ERROR: *thresholds.yaml: scenario.personalization: must be a whole number from 1 to 4, "
                                 "or null (got 5)"])
    assert len([line for line in result.stderr.lines if line.startswith("ERROR")]) == 1
    assert "Traceback" not in result.stderr.str() and fake.requests == []


def test_rows_under_xdist_are_complete_and_never_interleaved(suite):
    with FakeLLM(Script(terminate_after=3)) as fake:
        result = run_suite(suite, fake, "--profiles", "7,53", "--domains", "Alarm,Music,Events", "-n", "2",
                           subprocess=True)
    outcomes = result.parseoutcomes()
    found = rows(suite)
    expected = outcomes["passed"]
    assert expected >= 20 and outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0
    assert len(found) == expected and len({r["scenario_id"] for r in found}) == expected
    assert {r["run_id"] for r in found} == {found[0]["run_id"]}
    assert all(r["turns"] == 4 and r["scores"]["personalization"] == 3 for r in found)
    assert any(r["task_kind"] == "md" for r in found)


def test_the_plugin_stays_out_of_unrelated_test_runs(pytester: pytest.Pytester):
    pytester.makepyfile(test_other="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:deepeval", "-n", "2",
                                           "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "personalens-results").exists()
    assert "personalens:" not in "\n".join(line for line in result.stdout.lines if "result rows" in line)


def test_with_embedded_models_workers_take_turns_scenario_by_scenario(suite):
    """Under -n 2, the shared single-slot embedded servers see one whole scenario at a time."""
    with FakeLLM(Script(echo_task=True, terminate_after=2)) as fake:
        result = suite.runpytest_subprocess(
            "-p", "no:deepeval", "--local-url", fake.url, "--profiles", "7", "--domains", "Alarm", "-n", "2")
        result.assert_outcomes(passed=4)
        order = []
        for body in fake.requests:
            prompt = body["messages"][-1]["content"]
            tasks = re.findall(r"\(I mean: ([^)]*)\)", prompt)
            label = tasks[0] if tasks else task_of(prompt)
            if not order or order[-1] != label:
                order.append(label)
    assert len(order) == 4, f"scenarios interleaved: {order}"
    assert all(r["user_model"] == "local" for r in rows(suite))


def test_models_that_cannot_start_make_error_rows(suite):
    result = suite.runpytest("-p", "no:deepeval", "--local-url", "http://127.0.0.1:9/v1",
                             "--profiles", "7", "--domains", "Alarm", "--stop-after-errors", "1")
    result.assert_outcomes(skipped=1, deselected=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["  not scored: user7-SD-Alarm-task-1: starting the models failed (ModelServerError): "
                                 "call to local failed: the model server at http://127.0.0.1:9/v1 was not healthy "
                                 "within 10 s*"])
    (row,) = rows(suite)
    assert row["status"] == "error" and row["error"]["phase"] == "starting the models" and row["transcript"] == []


def test_bots_are_checked_only_when_the_run_collects_suites(pytester: pytest.Pytester):
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\nasyncio_default_fixture_loop_scope = "function"\n'
                      '[tool.personalens]\nassistant = "down-bot"\n'
                      '[tool.personalens.assistants.down-bot]\nkind = "http"\nurl = "http://127.0.0.1:9/reply"\n')
    pytester.makepyfile(test_unit="def test_one():\n    assert True\n")
    unrelated = pytester.runpytest("-p", "no:deepeval", "test_unit.py")
    unrelated.assert_outcomes(passed=1)
    shutil.copy(SUITES / "test_single_domain.py", pytester.path)
    suite = pytester.runpytest("-p", "no:deepeval", "--profiles", "7")
    assert suite.ret == pytest.ExitCode.USAGE_ERROR
    suite.stderr.fnmatch_lines(["ERROR: assistant 'down-bot' (*): cannot reach http://127.0.0.1:9/reply*"])


@pytest.mark.parametrize("option", ["--expectations", "--thresholds"])
def test_a_path_option_given_as_a_separate_argument_keeps_the_project(suite, tmp_path_factory, option):
    """pytest takes the value of ``--option PATH`` for a test path and may take its rootdir from it (a folder
    with its own pyproject.toml): the run still reads this project's config, cassettes and results folder."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "pyproject.toml").write_text('[tool.personalens]\nassistant = "not-this-one"\n')
    (elsewhere / "file.yaml").write_text("version: 1\n")
    result = suite.runpytest("--collect-only", "--profiles", "7", "--domains", "Alarm", *FAKE_SPECS,
                             option, str(elsewhere / "file.yaml"))
    result.stdout.fnmatch_lines([f"personalens: project {suite.path} (pytest took its rootdir, *"])
    assert "not-this-one" not in result.stdout.str() + result.stderr.str()


def test_a_path_option_into_another_project_from_a_folder_without_config(pytester, tmp_path_factory):
    """No config file in the folder pytest runs in (nor above it), and a path option into another project: the
    run is this folder's, as pytest's own rootdir would be without that option."""
    shutil.copy(SUITES / "test_single_domain.py", pytester.path)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "pyproject.toml").write_text('[tool.personalens]\nassistant = "not-this-one"\n')
    (elsewhere / "file.yaml").write_text("version: 1\n")
    result = pytester.runpytest("--collect-only", "--profiles", "7", "--domains", "Alarm", *FAKE_SPECS,
                                "--record-mode", "all", "--expectations", str(elsewhere / "file.yaml"),
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.stdout.fnmatch_lines([f"personalens: project {pytester.path} (pytest took its rootdir, *"])
    assert "not-this-one" not in result.stdout.str() + result.stderr.str()


PROBE_COLLECTIONS = '''
import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    dsession = session.config.pluginmanager.getplugin("dsession")
    if dsession is None:
        return
    lists = list(dsession.sched.node2collection.values())
    shared = all(a is b for other in lists[1:] for a, b in zip(lists[0], other))
    with open("collections.txt", "w") as out:
        out.write(f"{len(lists)} {len(lists[0])} {shared}")
'''


def test_xdist_keeps_each_workers_node_ids_as_the_first_workers_strings(suite):
    """Every worker sends the node ids it collected and xdist's scheduler keeps each list: at -n 16 and the
    full dataset, 250 MB of the same strings. Equal lists are kept as the first one's strings."""
    suite.makeconftest(PROBE_COLLECTIONS)
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run_suite(suite, fake, "--profiles", "7", "--domains", "Alarm", "-n", "3", subprocess=True)
    assert result.ret == 0, result.stdout.str()[-2000:]
    workers, cases, shared = (suite.path / "collections.txt").read_text().split()
    assert (workers, shared) == ("3", "True") and int(cases) >= 4


def test_a_workers_node_ids_unlike_the_first_workers_are_left_as_they_are(pytestconfig):
    from personalens_testkit.plugin.reports import KeptReports

    kept = KeptReports(pytestconfig, "personalens")
    first = ["suites/test_a.py::test[" + str(n) + "]" for n in range(3)]
    same = ["suites/test_a.py::test[" + str(n) + "]" for n in range(3)]
    other = ["suites/test_a.py::test[" + str(n) + "]" for n in range(4)]
    for ids in (first, same, other):
        kept.pytest_xdist_node_collection_finished(None, ids)
    assert all(a is b for a, b in zip(first, same))
    assert len(other) == 4 and not any(a is b for a, b in zip(first, other))


def test_the_installed_plugin_loads_without_a_warning(tmp_path):
    """pytest marks each module the plugin lists for assertion rewriting when it reaches it: one already imported by
    another it listed earlier is warned about in every run's summary (a fresh project, pytest's own defaults)."""
    import os
    import subprocess
    import sys

    for name in ("test_single_domain.py", "test_multi_domain.py"):
        shutil.copy(SUITES / name, tmp_path / name)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider", "--record-mode", "once",
                           "--profiles", "7", "--domains", "Alarm"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "warning" not in (done.stdout + done.stderr).lower(), done.stdout[-3000:]
