"""Cassettes end to end through the plugin: record live against a loopback model server, then
replay with the server gone; misses, re-judging, bots, Bedrock without credentials, xdist."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_results, recorded_rows, suite_project, write_recorded, with_runs

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
ALARM = ["--profiles", "7", "--domains", "Alarm"]
#: nothing listens there: a replay that tried to call a model would fail
DEAD = "http://127.0.0.1:9/v1"
TIMINGS = ("run_id", "started_at", "finished_at", "seconds", "transcript_path")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return suite_project(pytester)


def run(project: pytest.Pytester, url: str, *args: str, subprocess: bool = False) -> pytest.RunResult:
    project._monkeypatch.setenv("OPENAI_BASE_URL", url)  # noqa: SLF001 - pytester's own monkeypatch
    argv = [*SPECS, *args]
    return project.runpytest_subprocess(*argv, timeout=600) if subprocess else project.runpytest(*argv)


def last_rows(project: pytest.Pytester) -> list[dict]:
    latest = latest_results(project.path)
    return with_runs([json.loads(line) for line in latest.read_text().splitlines()])


def without_timings(row: dict) -> dict:
    row = {k: v for k, v in row.items() if k not in TIMINGS}
    row["calls"] = [{k: v for k, v in call.items() if k != "seconds"} for call in row["calls"]]
    return row


def cassette_dir(project: pytest.Pytester, assistant: str = "reference") -> Path:
    return project.path / "cassettes" / assistant


def test_a_recording_replays_offline_and_reproduces_every_row(project):
    with FakeLLM(Script(terminate_after=2)) as fake:
        recording = run(project, fake.url, *ALARM, "--record-mode", "once")
    recording.assert_outcomes(passed=4, deselected=1)
    recording.stdout.fnmatch_lines(["personalens: record mode once: 0 of 4 selected scenarios have a cassette in *",
                                    "personalens: 4 recorded result rows -> */cassettes/reference/results.jsonl.xz"])
    files = sorted(p.name for p in cassette_dir(project).iterdir())
    assert files == ["results.jsonl.xz"] + [f"user7-SD-Alarm-task-{n}.json.xz" for n in range(1, 5)]
    assert len(fake.requests) == 4 * 12

    first = run(project, DEAD, *ALARM)  # the model server is gone
    first.assert_outcomes(passed=4, deselected=1)
    first.stdout.fnmatch_lines(["personalens: replaying 4 of 4 selected scenarios offline from */cassettes/reference; each must reproduce its recorded result (cassettes/reference/results.jsonl.xz)"])
    rows_first = last_rows(project)
    second = run(project, DEAD, *ALARM)
    second.assert_outcomes(passed=4, deselected=1)
    rows_second = last_rows(project)
    assert [json.dumps(without_timings(r)) for r in rows_first] == [json.dumps(without_timings(r)) for r in rows_second]
    recorded = {row["scenario_id"]: row for row in recorded_rows(cassette_dir(project))}
    for row in rows_first:
        assert row["scores"] == recorded[row["scenario_id"]]["scores"] == fake.script.scores
        assert recorded[row["scenario_id"]]["transcript"] == row["transcript"]  # the base's, to judge again live
        assert recorded[row["scenario_id"]]["calls"] == [] and row["calls"]  # kept slim: no call list
        assert row["turns"] == recorded[row["scenario_id"]]["turns"] and row["transcript"]
        assert row["cassette"] == f"cassettes/reference/{row['scenario_id']}.json.xz"


def test_the_header_counts_what_replays_and_how_to_record_the_rest(project):
    with FakeLLM() as fake:
        run(project, fake.url, *ALARM, "-k", "task-1 or task-2", "--record-mode", "once").assert_outcomes(passed=2, deselected=3)
    result = run(project, DEAD, "--profiles", "7")
    result.stdout.fnmatch_lines([
        "personalens: replaying 2 of 64 selected scenarios offline from */cassettes/reference; "
        "record the other 62 with --record-mode once (live models); each must reproduce its recorded result *",
    ])
    result.assert_outcomes(passed=2, deselected=1)


def test_nothing_to_replay_is_an_error_not_a_green_run(project):
    result = run(project, DEAD, *ALARM)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: nothing to replay offline: none of the 4 selected scenarios has a cassette in */cassettes/reference; "
        "record them with --record-mode once (live models), or choose another --cassette-dir or --assistant",
    ])


def test_once_records_only_the_missing_cassettes(project):
    with FakeLLM() as fake:
        run(project, fake.url, *ALARM, "-k", "task-1", "--record-mode", "once").assert_outcomes(passed=1, deselected=4)
        before = len(fake.requests)
        run(project, fake.url, *ALARM, "--record-mode", "once").assert_outcomes(passed=4, deselected=1)
    assert len(fake.requests) - before == 3 * 12  # task-1 replayed, the other three recorded


def test_a_changed_request_is_one_clear_miss_never_a_stale_answer(project):
    with FakeLLM() as fake:
        run(project, fake.url, *ALARM, "-k", "task-1", "--record-mode", "once").assert_outcomes(passed=1, deselected=4)
    # the reference assistant now sees the interaction summaries: its prompt differs from the recording
    result = run(project, DEAD, *ALARM, "--assistant-context", "interactions")
    result.assert_outcomes(errors=1, deselected=1)
    result.stdout.fnmatch_lines([
        "*the dialogue failed (ReplayMissError): user7-SD-Alarm-task-1: assistant (reply, turn 1): no recorded request "
        "matches it (prompts, model settings or the assistant's replies differ from the recording) in "
        "*cassettes/reference/user7-SD-Alarm-task-1.json.xz (the recorded request of this call differs at character *: "
        "recorded *, now *). Re-record it: "
        "pytest '*test_single_domain.py::test_single_domain[[]user7-SD-Alarm-task-1[]]' --assistant reference --record-mode all",
    ])
    assert "Traceback" not in result.stdout.str() and "CannotOverwrite" not in result.stdout.str()
    (row,) = last_rows(project)
    assert row["status"] == "error" and row["error"]["kind"] == "ReplayMissError"


def test_a_replay_that_scores_differently_from_its_recording_fails(project):
    with FakeLLM() as fake:
        run(project, fake.url, *ALARM, "-k", "task-1", "--record-mode", "once")
    (row,) = recorded_rows(cassette_dir(project))
    row["scores"]["personalization"] = 2
    write_recorded(cassette_dir(project), [row])
    result = run(project, DEAD, *ALARM)
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines([
        "user7-SD-Alarm-task-1 did not reproduce its recorded result:",
        "  - scores.personalization: recorded 2, replayed 3",
    ])


def test_a_failed_scenario_keeps_no_half_recorded_cassette(project):
    """A call left without an answer (the models fail after the preflight) ends the scenario: what it recorded
    would only replay as a miss, so none is kept. (One that ends in an unreadable judge answer, every call
    answered, keeps it: tests/test_untrusted_text.py.)"""
    with FakeLLM(Script(status=500, status_pings=False)) as fake:
        result = run(project, fake.url, *ALARM, "-k", "task-1", "--record-mode", "once", "--retries", "0")
    result.assert_outcomes(skipped=1, deselected=4)  # the user agent failed: not scored
    assert not cassette_dir(project).exists() or not list(cassette_dir(project).glob("*.json.xz"))


def test_rejudge_scores_recorded_dialogues_with_another_judge(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake.url, *ALARM, "--record-mode", "once").assert_outcomes(passed=4, deselected=1)
    recorded = {row["scenario_id"]: row for row in last_rows(project)}  # the recording run's own rows
    stricter = Script(terminate_after=1)
    stricter.scores = {**stricter.scores, "personalization": 4, "naturalness_assistant": 3}
    with FakeLLM(stricter) as judge:
        result = run(project, judge.url, *ALARM, "--rejudge", "--record-mode", "once", "--judge-model", "openai:new-judge")
    result.assert_outcomes(passed=4, deselected=1)
    result.stdout.fnmatch_lines(["personalens: re-judging 4 of 4 selected scenarios recorded in *; judge live (openai:new-judge)*"])
    assert len(judge.requests) == 4 * 6 and all("response_format" in body for body in judge.requests)
    rows = last_rows(project)
    for row in rows:
        assert row["scores"]["personalization"] == 4 and row["judge_model"] == "openai:new-judge"
        assert row["transcript"] == recorded[row["scenario_id"]]["transcript"]
    judged = sorted(p.relative_to(cassette_dir(project)).as_posix() for p in cassette_dir(project).glob("rejudged/*/*"))
    assert len(judged) == 4 and all(p.startswith("rejudged/openai-new-judge-") for p in judged)
    # the re-judging replays offline too, from its own cassettes
    again = run(project, DEAD, *ALARM, "--rejudge", "--judge-model", "openai:new-judge")
    again.assert_outcomes(passed=4, deselected=1)
    assert [r["scores"] for r in last_rows(project)] == [r["scores"] for r in rows]


def test_rejudging_a_reviewed_recording_asks_the_review_again_with_the_judge(project):
    """--rejudge calls what judges a finished dialogue: the judge, and the review of the user agent (its own role);
    the dialogue itself replays."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake.url, *ALARM, "--record-mode", "once").assert_outcomes(passed=4, deselected=1)
    with FakeLLM(Script(terminate_after=1)) as judge:
        result = run(project, judge.url, *ALARM, "--rejudge", "--record-mode", "once", "--judge-model",
                     "openai:new-judge", "--review-user", "--review-user-model", "openai:new-reviewer")
        reviews = [body for body in judge.requests if "faults" in json.dumps(body.get("response_format") or {})]
    result.assert_outcomes(passed=4, deselected=1)
    assert len(reviews) == 4 and {body["model"] for body in reviews} == {"new-reviewer"}
    assert len(judge.requests) == 4 * 6 + 4  # no user agent's or assistant's call: the dialogues replayed
    rows = last_rows(project)
    assert all([c["role"] for c in row["calls"] if not c["replayed"]].count("reviewer") == 1 for row in rows)
    # a live role of the re-judging: its model checked and pinged before any case (the preflight's one call)
    report = json.loads((latest_results(project.path).parent / "report.json").read_text())
    assert report["cost"]["roles"]["reviewer"]["live_calls"] == 4 + 1


BOT = '''
import os, pathlib

def reply(request):
    with open("bot-calls.txt", "a") as log:
        log.write(request["scenario_id"] + "\\n")
    return os.environ.get("BOT_TEXT", "Your usual alarm is set.")
'''


def test_a_bot_is_live_in_a_replay_and_a_changed_bot_is_a_miss(project):
    project.makepyfile(mybot=BOT)
    project.makefile(".toml", personalens='[assistants.my-bot]\nkind = "python"\ncallable = "mybot:reply"\npath = ["."]\n')
    args = [*ALARM, "-k", "task-1", "--assistant", "my-bot"]
    with FakeLLM(Script(terminate_after=2)) as fake:
        run(project, fake.url, *args, "--record-mode", "once").assert_outcomes(passed=1, deselected=4)
    calls = project.path / "bot-calls.txt"
    assert len(calls.read_text().splitlines()) == 3
    stored = json.loads(lzma.decompress((cassette_dir(project, "my-bot") / "user7-SD-Alarm-task-1.json.xz").read_bytes()))
    turns = [i for i in stored["interactions"] if i["request"]["uri"] == "http://assistant.personalens/reply"]
    assert len(turns) == 3 and json.loads(turns[0]["response"]["body"]["string"])["reply"] == "Your usual alarm is set."

    same = run(project, DEAD, *args)  # the unchanged bot, live; the models replay
    same.assert_outcomes(passed=1, deselected=1)
    assert len(calls.read_text().splitlines()) == 6
    # re-judging replays the bot's recorded turns: it is not called
    before = len(calls.read_text().splitlines())
    with FakeLLM() as judge:
        run(project, judge.url, *args, "--rejudge", "--record-mode", "once").assert_outcomes(passed=1, deselected=1)
    assert len(calls.read_text().splitlines()) == before and len(judge.requests) == 6


def test_a_changed_bot_is_not_scored_offline_and_scored_live_from_where_it_changed(project):
    """The PR gate for a bot that changes what it says: offline, an honest "not scored" blamed on nobody's
    failure but named as the bot's change, with the command that scores it; with credentials and
    new_episodes, the unchanged part replays and the models are called live from the changed turn."""
    project.makepyfile(mybot=BOT)
    project.makefile(".toml", personalens='[assistants.my-bot]\nkind = "python"\ncallable = "mybot:reply"\npath = ["."]\n')
    args = [*ALARM, "-k", "task-1", "--assistant", "my-bot"]
    with FakeLLM(Script(terminate_after=2)) as fake:
        run(project, fake.url, *args, "--record-mode", "once").assert_outcomes(passed=1, deselected=4)
    project._monkeypatch.setenv("BOT_TEXT", "Something else entirely.")  # noqa: SLF001
    changed = run(project, DEAD, *args)
    changed.assert_outcomes(skipped=1, deselected=1)
    assert changed.ret == pytest.ExitCode.TESTS_FAILED
    changed.stdout.fnmatch_lines([
        "  not scored: user7-SD-Alarm-task-1: the dialogue failed (ReplyChangedError): your bot's reply at turn 1 "
        "differs from the recording: not scored (recorded 'Your usual alarm is set.', now 'Something else entirely.'); "
        "score it with model credentials: pytest '*test_single_domain.py::test_single_domain[[]user7-SD-Alarm-task-1[]]' "
        "--assistant my-bot --record-mode new_episodes",
        "personalens: verdict: INCONCLUSIVE, fails the run (1 cases: 0 regression(s), 0 expected failure(s), 0 unexpected pass(es), "
        "0 not scored, 1 with a changed bot reply)",
        "personalens: FAILED 1 case(s) not scored: your bot's replies differ from the recording, and an offline replay "
        "calls no model (user7-SD-Alarm-task-1); score them live with model credentials and --record-mode "
        "new_episodes, or re-record the cassettes",
    ])
    (row,) = last_rows(project)
    assert row["error"]["source"] == "assistant" and row["verdict"] == "reply changed" and row["scores"] is None

    with FakeLLM(Script(terminate_after=2)) as fake:
        live = run(project, fake.url, *args, "--record-mode", "new_episodes")
    live.assert_outcomes(passed=1, deselected=4)
    (row,) = last_rows(project)
    by_role = {role: [c["replayed"] for c in row["calls"] if c["role"] == role] for role in ("user_agent", "assistant", "judge")}
    assert by_role["user_agent"][0] is True  # the opening replays: it came before the change
    assert not any(by_role["assistant"]) and not any(by_role["user_agent"][1:]) and not any(by_role["judge"])
    assert len(fake.requests) == len(row["calls"]) - 1 - len(by_role["assistant"])  # live: everything after the change
    live.stdout.fnmatch_lines(["calls and tokens: user agent * calls (1 replayed, * live)*"])
    # the new turns joined the cassette: the changed bot now replays offline
    again = run(project, DEAD, *args)
    again.assert_outcomes(passed=1, deselected=1)


def test_xdist_record_and_replay_lose_nothing(project):
    args = ["--profiles", "7,53", "--domains", "Alarm,Books,Buses,Calendar", "--max-turns", "1"]
    with FakeLLM(Script(terminate_after=1)) as fake:
        recording = run(project, fake.url, *args, "--record-mode", "once", "-n", "4", subprocess=True)
    outcomes = recording.parseoutcomes()
    total = outcomes.get("passed", 0)
    assert total >= 16 and set(outcomes) <= {"passed", "deselected", "warnings"}, recording.stdout.str()[-2000:]
    cassettes = list(cassette_dir(project).glob("*.json.xz"))
    assert len(cassettes) == total
    assert not [p for p in cassette_dir(project).iterdir() if p.name.startswith(".")]  # no temporary files left
    recorded = recorded_rows(cassette_dir(project))
    assert len(recorded) == total
    replay = run(project, DEAD, *args, "-n", "4", subprocess=True)
    assert replay.parseoutcomes().get("passed") == total, replay.stdout.str()[-2000:]
    assert sorted(r["scenario_id"] for r in last_rows(project)) == sorted(r["scenario_id"] for r in recorded)


def test_bedrock_replays_with_no_aws_credentials_and_no_secret_is_stored(project, monkeypatch, tmp_path):
    planted = {
        "AWS_ACCESS_KEY_ID": "AKIAPLANTEDKEY000001", "AWS_SECRET_ACCESS_KEY": "planted-aws-secret-key-value",
        "AWS_SESSION_TOKEN": "planted-aws-session-token-value", "OPENAI_API_KEY": "sk-planted-openai-key-0001",
        "TEAM_GATEWAY_TOKEN": "planted-gateway-token-0001",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # the bot repeats a secret (it reaches later prompts and the stored answers)
    with FakeLLM(Script(terminate_after=1, assistant_text="Done. (debug: planted-gateway-token-0001)")) as fake:
        project.makefile(".toml", personalens=f'''
[models.gateway]
kind = "openai"
model = "gw-user"
base_url = "{fake.url}"
headers = {{ "X-Api-Key" = "${{TEAM_GATEWAY_TOKEN}}" }}

[models.claude]
kind = "bedrock"
model = "anthropic.claude-3-haiku-20240307-v1:0"
endpoint_url = "{fake.url.removesuffix('/v1')}"
''')
        args = [*ALARM, "-k", "task-1", "--user-model", "gateway", "--judge-model", "claude"]
        recording = run(project, fake.url, *args, "--record-mode", "once")
        recording.assert_outcomes(passed=1, deselected=4)
    assert any("planted-gateway-token-0001" in str(h) for h in fake.headers)  # it was really sent
    stored = b"".join(lzma.decompress(p.read_bytes()) for p in cassette_dir(project).glob("*.json.xz"))
    for name, value in planted.items():
        assert value.encode() not in stored, name
    # nor in any other output: results, transcripts, report JSON / JUnit / HTML, logs, the terminal
    outputs = [p for p in project.path.rglob("*") if p.is_file() and "cassettes" not in p.parts and p.suffix != ".py"]
    assert {p.name for p in outputs} >= {"results.jsonl", "report.json", "junit.xml", "report.html", "main.txt"}
    text = "\n".join(p.read_text(errors="replace") for p in outputs) + recording.stdout.str() + recording.stderr.str()
    for name, value in planted.items():
        assert value not in text, name
    results = next(p for p in outputs if p.name == "results.jsonl")
    assert "Done. (debug: <TEAM_GATEWAY_TOKEN>)" in results.read_text()  # the echoed secret, replaced by its name
    assert b"<TEAM_GATEWAY_TOKEN>" in stored
    assert b"http://local/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse" in stored

    for name in (*planted, "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name)
    result = run(project, DEAD, *args)  # no credentials, no region, no server
    result.assert_outcomes(passed=1, deselected=1)


def test_a_recording_made_through_a_gateway_replays_without_it(project):
    """A model's identity in a cassette is its spec, not the base URL the environment gave it: recorded through
    a gateway (another path, another host), replayed where OPENAI_BASE_URL is not set at all."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        gateway = fake.url.replace("/v1", "/team-gateway/openai/v1")
        run(project, gateway, *ALARM, "-k", "task-1", "--record-mode", "once").assert_outcomes(passed=1, deselected=4)
    stored = json.loads(lzma.decompress((cassette_dir(project) / "user7-SD-Alarm-task-1.json.xz").read_bytes()))
    # an address's path may carry a token (issue 43): kept as the variable that gave it
    assert stored["interactions"][0]["request"]["uri"] == "http://local<openai_base_url:path>/chat/completions"
    project._monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # noqa: SLF001
    replay = project.runpytest(*SPECS, *ALARM)  # would go to https://api.openai.com/v1: nothing is sent
    replay.assert_outcomes(passed=1, deselected=1)
