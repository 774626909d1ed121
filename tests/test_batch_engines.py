"""The providers' batch engines (issue 50, first step): a job's requests sent as the online calls send them, its state
read, and its results joined back on their record ids - every record exactly once, answered or in error with the
provider's code, whatever order the results come in, whatever part of them is missing. The OpenAI Batch API against
a loopback fake with its real shapes (tests/support/fake_batch.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import ModelError
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.batch.jobs import RECORD_ID, BatchJob, BatchRequest, record_ids
from personalens_testkit.llm.batch.openai_batch import ENDPOINT, OpenAIBatch
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat

from .support.fake_batch import OUTCOMES, FakeBatchAPI


def _requests(count: int) -> list[BatchRequest]:
    return [BatchRequest(record, ChatRequest(messages=(Message("user", f"judge dialogue {n}"),), purpose="judge",
                                             temperature=0.0, max_tokens=64))
            for n, record in enumerate(record_ids(count))]


def _engine(fake: FakeBatchAPI) -> OpenAIBatch:
    chat = OpenAICompatibleChat(spec="openai:fake-judge", base_url=fake.url, model="fake-judge", api_key="sk-test")
    return OpenAIBatch(chat)


def _run(engine: OpenAIBatch, requests: list[BatchRequest]):
    job = engine.submit(requests, name="personalens-test")
    states = []
    while not (state := engine.state(job)).finished:
        states.append(state.state)
    return job, states, state, engine.answers(BatchJob.from_dict(json.loads(json.dumps(job.as_dict()))))


def test_a_job_is_sent_as_the_online_calls_and_every_answer_read_back_by_its_record():
    requests = _requests(5)
    with FakeBatchAPI() as fake:
        engine = _engine(fake)
        job, states, state, answers = _run(engine, requests)
        (upload,) = fake.uploads
    assert upload["purpose"] == "batch"
    assert [line["custom_id"] for line in upload["lines"]] == [r.record_id for r in requests]
    assert all(line["url"] == ENDPOINT and line["method"] == "POST" for line in upload["lines"])
    assert [line["body"] for line in upload["lines"]] == [engine.chat.payload(r.request) for r in requests]
    assert fake.batches[job.job_id]["completion_window"] == "24h"
    assert states == ["running"] and state.state == "completed" and (state.answered, state.total) == (5, 5)
    assert [a.record_id for a in answers] == [r.record_id for r in requests]  # the job's order, not the file's
    assert [a.response.text for a in answers] == [f"answer to {r.record_id}" for r in requests]
    assert [a.response.prompt_tokens for a in answers] == [10 + n for n in range(5)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=30), st.sampled_from(["completed", "expired"]),
       st.integers(0, 3), st.integers(0, 1000))
def test_every_record_is_answered_once_whatever_the_results_hold(outcomes, end, foreign, seed):
    """Results out of order, partly in error, partly missing, with lines for records the job never held: one answer
    per record, in the job's order - its response when the results answered it, else an error with the provider's
    code (``missing`` when they hold nothing for it); never a record's answer given to another."""
    requests = _requests(len(outcomes))
    plan = {r.record_id: outcome for r, outcome in zip(requests, outcomes)}
    with FakeBatchAPI(outcomes=plan, end=end, foreign=foreign, seed=seed) as fake:
        _, _, state, answers = _run(_engine(fake), requests)
    assert state.state == end
    assert [a.record_id for a in answers] == [r.record_id for r in requests]
    for n, answer in enumerate(answers):
        outcome = plan[answer.record_id]
        dropped = outcome == "missing" or (end == "expired" and n % 2)
        if dropped:
            assert answer.error_code == "missing" and answer.response is None and end in answer.error
        elif outcome == "ok":
            assert answer.ok and answer.response.text == f"answer to {answer.record_id}"
        else:
            assert not answer.ok
            assert answer.error_code == {"error_line": "invalid_prompt", "error_status": "invalid_value",
                                         "malformed": "unreadable"}[outcome]


def test_a_failed_batch_says_why_and_leaves_no_record_unanswered():
    requests = _requests(4)
    with FakeBatchAPI(end="failed") as fake:
        _, _, state, answers = _run(_engine(fake), requests)
    assert state.state == "failed" and "enqueued token limit" in state.message
    assert len(answers) == 4 and sum(a.ok for a in answers) == 2
    assert all(a.error_code == "missing" and "failed" in a.error for a in answers if not a.ok)


def test_an_endpoint_without_the_batch_api_is_one_clear_error():
    with FakeBatchAPI() as fake:
        chat = OpenAICompatibleChat(spec="openai:x", base_url=fake.url + "/nothing", model="x")
        with pytest.raises(ModelError, match=r"POST /files: HTTP 404"):
            OpenAIBatch(chat).submit(_requests(1), name="x")


@given(st.integers(0, 5000))
def test_record_ids_are_distinct_and_of_the_form_every_provider_takes(count):
    ids = record_ids(count)
    assert len(set(ids)) == count and all(RECORD_ID.match(i) for i in ids)


@pytest.mark.parametrize("kept, field", [
    ({"engine": "openai", "job_id": "", "record_ids": []}, "job_id"),
    ({"engine": "openai", "job_id": "b", "record_ids": ["R0000000000", "R0000000000"]}, "twice"),
    ({"engine": "openai", "job_id": "b", "record_ids": ["short"]}, "record_ids"),
    ({"engine": "openai", "job_id": "b", "record_ids": [], "places": {"a": 1}}, "places"),
    ([], "an object"),
])
def test_a_kept_job_that_is_not_one_says_which_field(kept, field):
    with pytest.raises(ValueError, match=field):
        BatchJob.from_dict(kept)


def test_a_job_outside_the_engines_bounds_or_with_a_record_twice_is_refused_before_anything_is_sent():
    with FakeBatchAPI() as fake:
        engine = _engine(fake)
        with pytest.raises(ValueError, match="takes 1 to 50,000"):
            engine.submit([], name="x")
        twice = _requests(2)
        with pytest.raises(ValueError, match="twice"):
            engine.submit([twice[0], twice[0]], name="x")
        assert fake.uploads == []


# -- Amazon Bedrock: botocore's Stubber in place of the network (every call's parameters checked against the service
# models of bedrock and s3) -------------------------------------------------------------------------------------------

ROLE = "arn:aws:iam::123456789012:role/personalens-batch"
JOB = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc123"
CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"


def _bedrock(region: str = "us-east-1"):
    import boto3
    from botocore.stub import Stubber

    from personalens_testkit.llm.batch.bedrock_batch import BedrockBatch
    from personalens_testkit.llm.bedrock import BedrockChat

    bedrock, s3 = boto3.client("bedrock", region_name=region), boto3.client("s3", region_name=region)
    chat = BedrockChat(spec=f"bedrock:{CLAUDE}", model_id=CLAUDE, client=boto3.client("bedrock-runtime",
                                                                                        region_name=region))
    engine = BedrockBatch(chat, role_arn=ROLE, s3_uri="s3://team-evals/personalens/", bedrock=bedrock, s3=s3)
    written: list[dict] = []  # what each put_object was given (botocore's event, before the Stubber answers)
    s3.meta.events.register("provide-client-params.s3.PutObject", lambda params, **_: written.append(dict(params)))
    return engine, Stubber(bedrock), Stubber(s3), written


def _converse(text: str, n: int) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}}, "stopReason": "end_turn",
            "usage": {"inputTokens": 100 + n, "outputTokens": 5, "totalTokens": 105 + n}}


def _body(lines: list[dict]) -> dict:
    import io

    from botocore.response import StreamingBody

    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return {"Body": StreamingBody(io.BytesIO(data), len(data)), "ContentLength": len(data)}


@pytest.mark.usefixtures("aws_env")
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["ok", "error", "missing", "malformed"]), min_size=100, max_size=140),
       st.randoms(use_true_random=False), st.integers(1, 3))
def test_a_bedrock_job_is_written_to_s3_run_as_converse_and_joined_back_by_record(outcomes, rng, parts):
    """Records of the Converse form without a tool (batch jobs take none: the answer is read as free text), a job
    naming the role, the locations and Converse; the output - out of order, in several objects, with the provider's
    errors and records missing - joined back: one answer per record."""
    from botocore.stub import ANY

    engine, bedrock, s3, written = _bedrock()
    requests = _requests(len(outcomes))
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    requests = [BatchRequest(r.record_id, ChatRequest(messages=r.request.messages, purpose="judge", temperature=0.0,
                                                      max_tokens=64, json_schema=schema, schema_name="rating"))
                for r in requests]
    s3.add_response("put_object", {"ETag": '"1"'}, {"Bucket": "team-evals", "Key": "personalens/nightly-1/input.jsonl",
                                                    "Body": ANY})
    bedrock.add_response("create_model_invocation_job", {"jobArn": JOB}, {
        "jobName": "nightly-1", "roleArn": ROLE, "modelId": CLAUDE, "timeoutDurationInHours": 24,
        "modelInvocationType": "Converse",
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://team-evals/personalens/nightly-1/input.jsonl",
                                                  "s3InputFormat": "JSONL"}},
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://team-evals/personalens/nightly-1/output/"}}})
    lines = []
    for n, (request, outcome) in enumerate(zip(requests, outcomes)):
        if outcome == "ok":
            lines.append({"recordId": request.record_id, "modelInput": {}, "modelOutput": _converse(f"score {n}", n)})
        elif outcome == "error":
            lines.append({"recordId": request.record_id, "modelInput": {},
                          "error": {"errorCode": 400, "errorMessage": "Malformed input request"}})
        elif outcome == "malformed":
            lines.append({"recordId": request.record_id, "modelInput": {}, "modelOutput": {"output": None}})
    rng.shuffle(lines)
    chunks = [lines[i::parts] for i in range(parts)]
    keys = [f"personalens/nightly-1/output/abc123/input{i}.jsonl.out" for i in range(parts)]
    status = {"jobArn": JOB, "jobName": "nightly-1", "modelId": CLAUDE, "roleArn": ROLE,
              "submitTime": "2026-11-29T00:00:00Z", "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://a/b"}},
              "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://team-evals/personalens/nightly-1/output/"}}}
    for word in ("InProgress", "PartiallyCompleted"):
        bedrock.add_response("get_model_invocation_job", {**status, "status": word}, {"jobIdentifier": JOB})
    s3.add_response("list_objects_v2", {"IsTruncated": True, "NextContinuationToken": "t", "Contents": [
        {"Key": "personalens/nightly-1/output/abc123/manifest.json.out"}, *({"Key": k} for k in keys[:1])]},
        {"Bucket": "team-evals", "Prefix": "personalens/nightly-1/output/abc123/"})  # the job's own folder only
    s3.add_response("list_objects_v2", {"IsTruncated": False, "Contents": [{"Key": k} for k in keys[1:]]},
                    {"Bucket": "team-evals", "Prefix": "personalens/nightly-1/output/abc123/", "ContinuationToken": "t"})
    for key, chunk in zip(keys, chunks):
        s3.add_response("get_object", _body(chunk), {"Bucket": "team-evals", "Key": key})
    bedrock.add_response("get_model_invocation_job", {**status, "status": "PartiallyCompleted"}, {"jobIdentifier": JOB})
    with bedrock, s3:
        job = engine.submit(requests, name="nightly-1")
        assert engine.state(job).state == "running" and engine.state(job).state == "completed"
        answers = engine.answers(BatchJob.from_dict(job.as_dict()))
        bedrock.assert_no_pending_responses()
        s3.assert_no_pending_responses()
    record = json.loads(written[0]["Body"].decode().splitlines()[0])
    assert record["recordId"] == requests[0].record_id and "toolConfig" not in record["modelInput"]
    assert "modelId" not in record["modelInput"] and record["modelInput"]["messages"][0]["role"] == "user"
    assert [a.record_id for a in answers] == [r.record_id for r in requests]
    for n, (answer, outcome) in enumerate(zip(answers, outcomes)):
        if outcome == "ok":
            assert answer.response.text == f"score {n}" and answer.response.prompt_tokens == 100 + n
        else:
            assert answer.error_code == {"error": "400", "missing": "missing", "malformed": "unreadable"}[outcome]


# -- the run: --judge-batch submit, then collect in another process ---------------------------------------------------

def test_a_run_judged_on_the_batch_engine_scores_as_online_and_replays_offline(pytester, monkeypatch):
    """Submit: the dialogues run live, the judge's calls go out as one batch job at the end, no case is scored (none
    from a stand-in). Collect, in a second process: the job still running - one line, no row; then, waited for, its
    answers (out of order) are the judge's cassettes, and the rows score what the same judge online scores. Then an
    offline replay, every endpoint dead, reproduces them."""
    from .support.fake_llm import FakeLLM, Script
    from .support.project import latest_results, read_rows, suite_project

    script = Script(terminate_after=2, judge_rule=lambda text: {"personalization": 4} if "Step" in text else {},
                    vary_assistant_text=True)
    online = FakeLLM(script)
    selection = ("--profiles", "7", "--domains", "Alarm")
    with FakeLLM(script) as fake, FakeBatchAPI(answer=online.answer, polls=3) as batch:
        suite_project(pytester, f'record_mode = "all"\n[models.batch-judge]\nkind = "openai"\nmodel = "fake-judge"\n'
                                f'base_url = "{batch.url}"\n')
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        specs = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
                 "--judge-model", "batch-judge", *selection)
        submit = pytester.runpytest(*specs, "--judge-batch", "submit")
        submit.assert_outcomes(skipped=4, deselected=1)
        assert not [r for r in fake.requests if "response_format" in r]  # no judge call went online
        (upload,) = batch.uploads
        assert len(upload["lines"]) == 4 * 6 and "sent as 1 batch job(s)" in submit.stdout.str()
        assert all(r["error"]["kind"] == "BatchPendingError" and r["scores"] is None
                   for r in read_rows(latest_results(pytester.path)))
        early = pytester.runpytest_subprocess(*specs, "--judge-batch", "collect")
        assert "1 of 1 batch job(s) still running" in early.stderr.str() + early.stdout.str()
        collect = pytester.runpytest_subprocess(*specs, "--judge-batch", "collect", "--batch-wait",
                                                "--batch-poll-s", "0.01")
        collect.assert_outcomes(passed=4, deselected=1)
        collected = read_rows(latest_results(pytester.path))
    assert [r["scores"]["personalization"] for r in collected] == [4] * 4
    assert all(c["replayed"] for r in collected for c in r["calls"])
    # ever after: an offline re-judging from those cassettes, every endpoint dead
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    again = pytester.runpytest(*specs[:-4], "--judge-model", "batch-judge", *selection, "--rejudge",
                               "--record-mode", "none")
    again.assert_outcomes(passed=4, deselected=1)
    assert [r["scores"] for r in read_rows(latest_results(pytester.path))] == [r["scores"] for r in collected]


@pytest.mark.parametrize("judge, said", [
    ("bedrock:anthropic.claude-3-haiku-20240307-v1:0", "asks for its answer through a tool (json_mode 'tool')"),
    ("bedrock:meta.llama3-70b-instruct-v1:0", "batch_role_arn and batch_s3 expected in its [models] entry"),
    ("openai:fake-judge", "does not offer the Batch API"),  # an endpoint that answers chat calls only
    ("local", "is the embedded model, which has no batch engine"),
])
def test_a_submit_run_whose_judge_has_no_batch_engine_stops_before_any_dialogue(pytester, monkeypatch, judge, said):
    from .support.fake_llm import FakeLLM, Script
    from .support.project import suite_project

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with FakeLLM(Script()) as fake:
        suite_project(pytester, 'record_mode = "all"\n')
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        result = pytester.runpytest("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model",
                                    "openai:fake-bot", "--judge-model", judge, "--profiles", "7", "--domains", "Alarm",
                                    "--judge-batch", "submit")
        assert not fake.requests  # not one dialogue began
    assert result.ret == pytest.ExitCode.USAGE_ERROR and said in result.stderr.str()


@pytest.mark.parametrize("kept, said", [
    (None, "no batch jobs wait to be collected for the judge batch-judge"),
    ("{not json", "cannot be read"),
    ('{"version": 2, "jobs": [{"spec": "x", "role": "judge", "job": {"engine": "openai"}}], "records": {}}', "not a submit run's jobs"),
])
def test_collecting_without_a_submit_runs_jobs_is_one_line_naming_the_file(pytester, monkeypatch, kept, said):
    from .support.project import suite_project

    suite_project(pytester, '[models.batch-judge]\nkind = "openai"\nmodel = "j"\nbase_url = "http://127.0.0.1:9/v1"\n')
    if kept is not None:
        folder = pytester.path / "cassettes/reference/rejudged/batch-judge"
        folder.mkdir(parents=True)
        (folder / "batch-jobs.json").write_text(kept)
    result = pytester.runpytest("-p", "no:deepeval", "--judge-model", "batch-judge", "--judge-batch", "collect")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and said in result.stderr.str()
    assert len([line for line in result.stderr.str().splitlines() if line.startswith("ERROR")]) == 1


@pytest.mark.parametrize("options, said", [
    ({"judge_batch": "submit", "judge_retest": 0.5}, "--judge-retest cannot go with it"),
    ({"judge_batch": "collect", "judge_retest": 0.5}, "--judge-retest cannot go with it"),
    ({"judge_batch": "collect", "record_mode": "once"}, "--record-mode once would call the judge live"),
    ({"batch_wait": True}, "--batch-wait: only with --judge-batch collect"),
    ({"judge_batch": "submit", "batch_poll_s": 5.0}, "--batch-poll-s: only with --judge-batch collect"),
    ({"judge_batch": "later"}, "'later' is not one of off, submit, collect"),
])
def test_what_the_batch_mode_cannot_go_with_is_refused_in_one_line(tmp_path, options, said):
    from personalens_testkit.errors import UsageError
    from personalens_testkit.settings.resolve import resolve_settings

    with pytest.raises(UsageError, match=said):
        resolve_settings(options, tmp_path, {})


def _hashed(text: str) -> dict:
    """A judge whose every score follows from what it reads: a request answered for another is seen."""
    import zlib

    v = zlib.crc32(text.encode())
    return {"personalization": 1 + v % 4, "naturalness_assistant": 1 + (v >> 3) % 5,
            "coherence_assistant": 1 + (v >> 6) % 5, "naturalness_user": 1 + (v >> 9) % 5,
            "coherence_user": 1 + (v >> 12) % 5, "task_completion": bool((v >> 15) % 2)}


def _judging(row: dict) -> tuple:
    return (row["scenario_id"], row["repeat"], row["scores"], row["turn_personalization"], row["preference_leak"],
            row["user_review"], (row["error"] or {}).get("kind"))


def _batch_project(pytester, batch_url: str, model: str = "fake-judge") -> None:
    from .support.project import suite_project

    suite_project(pytester, f'record_mode = "all"\n[models.batch-judge]\nkind = "openai"\nmodel = "{model}"\n'
                            f'base_url = "{batch_url}"\n')


def _submit_and_collect(pytester, monkeypatch, args=(), *, edit=None, script=None, env=(), online=True):
    """Submit, (edit what a submit keeps,) collect in another process, then the same judge online: the three runs'
    rows, and the collect run's result."""
    from .support.fake_llm import FakeLLM, Script
    from .support.project import latest_results, read_rows

    script = script or Script(terminate_after=2, vary_assistant_text=True, judge_rule=_hashed)
    base = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
            "--judge-model", "batch-judge", "--profiles", "7", "--domains", "Alarm", *args)
    for name, value in env:
        monkeypatch.setenv(name, value)
    with FakeLLM(script) as fake, FakeBatchAPI(answer=FakeLLM(script).answer, polls=1) as batch:
        _batch_project(pytester, batch.url)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        pytester.runpytest_subprocess(*base, "--judge-batch", "submit")
        submitted = read_rows(latest_results(pytester.path))
        if edit is not None:
            edit(pytester.path)
        collect = pytester.runpytest_subprocess(*base, "--judge-batch", "collect")
        collected = read_rows(latest_results(pytester.path)) if collect.ret != pytest.ExitCode.USAGE_ERROR else []
        if not online:
            return submitted, collect, collected, []
        _batch_project(pytester, fake.url)  # the same judge, online
        pytester.runpytest_subprocess(*base, "--rejudge", "--record-mode", "all")
        return submitted, collect, collected, read_rows(latest_results(pytester.path))


@pytest.mark.parametrize("args", [(), ("--review-user", "--turn-level", "--leak-check", "--concurrency", "3"),
                                  ("--repeat", "2", "-n", "2", "--rerun-user-faults")])
def test_judging_on_the_batch_engine_scores_what_the_same_judge_scores_online(pytester, monkeypatch, args):
    submitted, _, collected, online = _submit_and_collect(pytester, monkeypatch, args)
    assert all(r["scores"] is None and r["error"]["kind"] == "BatchPendingError" for r in submitted)
    assert sorted(map(repr, map(_judging, collected))) == sorted(map(repr, map(_judging, online)))
    assert all(r["scores"] is not None for r in collected)


def _edited(change):
    def edit(root):
        path = next(root.glob("cassettes/**/batch-jobs.json"))
        state = json.loads(path.read_text())
        change(state, root)
        path.write_text(json.dumps(state))
    return edit


def _swap_cases(state, root):
    records = [r for r, e in state["records"].items() if e["case"].endswith(("task-1", "task-2"))]
    first = next(r for r in records if state["records"][r]["case"].endswith("task-1"))
    second = next(r for r in records if state["records"][r]["case"].endswith("task-2"))
    a, b = state["records"][first], state["records"][second]
    a["case"], b["case"] = b["case"], a["case"]


def _other_model(state, root):
    text = (root / "personalens.toml").read_text().replace('model = "fake-judge"', 'model = "other-judge"')
    (root / "personalens.toml").write_text(text)


@pytest.mark.parametrize("change", [_swap_cases, _other_model])
def test_a_jobs_file_edited_or_a_judge_changed_since_never_lends_an_answer_to_another_request(pytester, monkeypatch,
                                                                                            change):
    """Each answer is recorded for the request the provider holds as sent with its record - not for what the jobs
    file or the config says now: a case named wrongly, or a judge that now sends another request, meets no answer
    (its case's error), never another request's."""
    _, _, collected, online = _submit_and_collect(pytester, monkeypatch, edit=_edited(change))
    by_case = {r["scenario_id"]: r for r in online}
    if change is _other_model:  # the online run was made with the edited config's restored judge: compare none
        assert all(r["scores"] is None and r["error"]["source"] == "judge" for r in collected)
        return
    for row in collected:
        assert row["scores"] is None or row["scores"] == by_case[row["scenario_id"]]["scores"]
    assert {r["scenario_id"] for r in collected if r["scores"] is None} == {"user7-SD-Alarm-task-1", "user7-SD-Alarm-task-2"}


@pytest.mark.parametrize("change, said", [
    (lambda state, root: next(iter(state["records"].values())).update(case="../../../../escaped"), "not a case id"),
    (lambda state, root: next(iter(state["records"].values())).update(role="reviewer"), "model and role"),
    (lambda state, root: state["records"].popitem(), "records are not its jobs'"),
    (lambda state, root: state.update(version=2), "version 3 expected"),
])
def test_a_jobs_file_that_is_not_a_submits_is_one_line_and_nothing_is_written(pytester, monkeypatch, change, said):
    _, collect, _, _ = _submit_and_collect(pytester, monkeypatch, edit=_edited(change), online=False)
    assert collect.ret == pytest.ExitCode.USAGE_ERROR and said in collect.stderr.str()
    assert not list(pytester.path.glob("cassettes/**/rejudged/**/*.xz")) and not list(pytester.path.glob("escaped*")) and not list(pytester.path.parent.glob("escaped*"))


def test_a_secret_never_reaches_the_kept_calls_or_the_jobs_file_and_the_answers_still_match(pytester, monkeypatch):
    from .support.fake_llm import Script

    secret = "sk-proj-LEAKED0123456789abcdef"
    script = Script(terminate_after=2, assistant_text=f"Sure - my key is {secret}, all set.", judge_rule=_hashed)
    _, _, collected, _ = _submit_and_collect(pytester, monkeypatch, script=script, env=[("ACME_API_KEY", secret)])
    assert all(r["scores"] is not None for r in collected)
    files = [*pytester.path.glob("cassettes/**/batch-jobs*.json"), *pytester.path.glob("personalens-results/*/batch-requests/*")]
    assert files and not any(secret in f.read_text() for f in files)


def test_a_second_submit_before_the_first_is_collected_is_refused_before_any_dialogue(pytester, monkeypatch):
    from .support.fake_llm import FakeLLM, Script

    with FakeLLM(Script(terminate_after=2)) as fake, FakeBatchAPI(polls=1) as batch:
        _batch_project(pytester, batch.url)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        base = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
                "--judge-model", "batch-judge", "--profiles", "7", "--domains", "Alarm", "--judge-batch", "submit")
        pytester.runpytest(*base)
        before = len(fake.requests)
        again = pytester.runpytest(*base)
        assert len(fake.requests) == before and len(batch.batches) == 1
    assert again.ret == pytest.ExitCode.USAGE_ERROR and "are not collected yet" in again.stderr.str()


def test_the_estimate_prices_the_judges_calls_at_the_batch_price_and_nothing_else(tmp_path):
    """--judge-batch: the judge's and the reviewer's calls at half their on-demand price, every other role as it is."""
    from personalens_testkit.data import open_dataset
    from personalens_testkit.run.cost_estimate import run_estimate
    from personalens_testkit.settings.resolve import resolve_settings

    dataset = open_dataset()
    cases = [(s, 1) for s in dataset.scenarios_for(7)][:6]
    costs = {}
    for mode in ("off", "submit"):
        settings = resolve_settings({"judge_model": "openai:gpt-4o-mini", "user_model": "openai:gpt-4o-mini",
                                     "assistant_model": "openai:gpt-4o", "review_user": True, "record_mode": "all",
                                     "judge_batch": mode}, tmp_path, {})
        found = run_estimate(settings, dataset, cases)
        costs[mode] = {role.role: role.cost for role in found.roles}
        assert ("batch engine" in " ".join(found.basis)) is (mode == "submit")
    for role, cost in costs["off"].items():
        share = 0.5 if role in ("judge", "reviewer") else 1.0
        assert costs["submit"][role] == pytest.approx(tuple(share * c for c in cost)) and cost[1] > 0


def test_a_submit_the_budget_left_cannot_pay_for_sends_nothing_and_says_so(pytester, monkeypatch):
    from .support.fake_llm import FakeLLM, Script
    from .support.project import suite_project

    with FakeLLM(Script(terminate_after=2)) as fake, FakeBatchAPI(polls=1) as batch:
        suite_project(pytester, f'record_mode = "all"\n[models.batch-judge]\nkind = "openai"\nmodel = "fake-judge"\n'
                                f'base_url = "{batch.url}"\n[prices."fake-user"]\ninput = 0.0\noutput = 0.0\n'
                                '[prices."fake-bot"]\ninput = 0.0\noutput = 0.0\n'
                                '[prices."fake-judge"]\ninput = 100.0\noutput = 100.0\n')
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        base = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
                "--judge-model", "batch-judge", "--profiles", "7", "--domains", "Alarm", "--judge-batch", "submit")
        refused = pytester.runpytest(*base, "--max-cost", "1.5")  # each case may start, the batch would pass it
        assert batch.uploads == [] and "no job sent" in refused.stdout.str()
        sent = pytester.runpytest(*base, "--max-cost", "50")
        assert len(batch.uploads) == 1 and "at the batch price" in sent.stdout.str()


def _json_values():
    return st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=12),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                      max_size=3), max_leaves=6)


def _paths(value, at=()):
    yield at
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _paths(inner, (*at, index))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_any_corruption_of_a_jobs_file_is_read_whole_or_refused_in_one_line(tmp_path_factory, data):
    """Whatever part of a submit's jobs file is replaced, dropped or given another value: it is read only when it is
    still a whole, consistent one (each record once, in a job of its role and model, its case a case id), else one
    UsageError - never another exception, never a case that is a path."""
    import copy

    from personalens_testkit.errors import UsageError
    from personalens_testkit.run.batch_judging import _CASE, read_state, state_path
    from personalens_testkit.settings.resolve import resolve_settings

    root = tmp_path_factory.mktemp("jobs")
    settings = resolve_settings({"judge_model": "openai:fake-judge"}, root, {})
    ids = record_ids(4)
    valid = {"version": 2, "run_id": "r", "judge": "openai:fake-judge",
             "jobs": [{"spec": "openai:fake-judge", "role": "judge",
                       "job": {"engine": "openai", "job_id": "batch_1", "record_ids": ids,
                               "places": {"input_file_id": "file-1"}}}],
             "records": {r: {"case": f"user7-SD-Alarm-task-{n}", "role": "judge", "spec": "openai:fake-judge"}
                         for n, r in enumerate(ids, 1)}}
    state = copy.deepcopy(valid)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(state))))
        if not path:
            state = data.draw(_json_values())
            continue
        parent = state
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_json_values() | st.sampled_from(["../../x", "reviewer", ids[0], 2]))
    target = state_path(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(state))
    try:
        found = read_state(settings)
    except UsageError as exc:
        assert "\n" not in str(exc) and str(target) in str(exc)
        return
    owners = [r for *_, job in found["jobs"] for r in job.record_ids]
    assert sorted(owners) == sorted(found["records"]) and len(set(owners)) == len(owners)
    assert all(_CASE.match(e["case"]) and e["role"] in ("judge", "reviewer") for e in found["records"].values())


def test_a_partly_failed_job_is_resumed_its_failed_cases_sent_again_and_collected_next(pytester, monkeypatch):
    """One record answered with an error: its case is an error (the provider's code), the others are scored; with
    --batch-resend every call of that case goes out again as it was sent, and the next collect scores it too."""
    from .support.fake_llm import FakeLLM, Script
    from .support.project import latest_results, read_rows

    script = Script(terminate_after=2, vary_assistant_text=True, judge_rule=_hashed)
    ids = record_ids(24)
    with FakeLLM(script) as fake, FakeBatchAPI(answer=FakeLLM(script).answer, polls=1,
                                              outcomes={ids[7]: "error_status"}) as batch:
        _batch_project(pytester, batch.url)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        base = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
                "--judge-model", "batch-judge", "--profiles", "7", "--domains", "Alarm")
        pytester.runpytest(*base, "--judge-batch", "submit")
        first = pytester.runpytest_subprocess(*base, "--judge-batch", "collect", "--batch-wait", "--batch-resend",
                                              "--batch-poll-s", "0.01")
        rows = read_rows(latest_results(pytester.path))
        assert [r["scenario_id"] for r in rows if r["scores"] is None] == ["user7-SD-Alarm-task-2"]
        error = next(r["error"] for r in rows if r["scores"] is None)
        assert "invalid_value" in error["message"] and error["source"] == "judge"
        assert "sent again as 1 batch job(s)" in first.stderr.str() + first.stdout.str()
        resent = batch.uploads[1]["lines"]
        assert len(resent) == 6 and [line["body"] for line in resent] == \
            [line["body"] for line in batch.uploads[0]["lines"][6:12]]  # task-2's six calls, as they were sent
        pytester.runpytest_subprocess(*base, "--judge-batch", "collect", "--batch-wait", "--batch-poll-s", "0.01")
        again = read_rows(latest_results(pytester.path))
    assert all(r["scores"] is not None for r in again)
    assert [r["scores"] for r in again if r["scenario_id"] != "user7-SD-Alarm-task-2"] == \
        [r["scores"] for r in rows if r["scores"] is not None]


# -- Bedrock in the run: boto3's own clients against a loopback fake of batch inference and S3 -------------------------

LLAMA = "meta.llama3-70b-instruct-v1:0"


def _bedrock_project(pytester, runtime_url: str, *, judge: str = LLAMA, json_mode: str = "none") -> None:
    from .support.project import suite_project

    suite_project(pytester, f'record_mode = "all"\n[models.batch-judge]\nkind = "bedrock"\nmodel = "{judge}"\n'
                            f'region = "us-east-1"\njson_mode = "{json_mode}"\nendpoint_url = "{runtime_url}"\n'
                            f'batch_role_arn = "{ROLE}"\nbatch_s3 = "s3://team-evals/personalens/"\n')


def _bedrock_runs(pytester, monkeypatch, selection, *, outcomes=None, model=None, online=True):
    """Submit (a Bedrock judge on batch inference), collect in another process, then the same judge online (its
    answers read as free text alike): the three runs' rows, the collect run, and the fake's calls."""
    from .support.fake_llm import FakeLLM, Script, _chat_from_converse, _converse_answer
    from .support.fake_bedrock_batch import FakeBedrockBatch
    from .support.project import latest_results, read_rows

    script = Script(terminate_after=2, vary_assistant_text=True, judge_rule=_hashed)
    judge = FakeLLM(script)

    def answer(model_input: dict) -> dict:
        chat = _chat_from_converse(model_input)
        return _converse_answer(chat, judge.answer(chat))

    base = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
            "--judge-model", "batch-judge", *selection)
    with FakeLLM(script) as fake, FakeBedrockBatch(answer, outcomes=outcomes, model=model) as batch:
        for name in ("S3", "BEDROCK"):
            monkeypatch.setenv(f"AWS_ENDPOINT_URL_{name}", batch.url)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        runtime = fake.url.removesuffix("/v1")
        _bedrock_project(pytester, runtime)
        submit = pytester.runpytest_subprocess(*base, "--judge-batch", "submit")
        submitted = read_rows(latest_results(pytester.path))
        judged_online_at_submit = len([r for r in fake.requests if "impartial evaluator" in json.dumps(r)])
        collect = pytester.runpytest_subprocess(*base, "--judge-batch", "collect")
        collected = read_rows(latest_results(pytester.path)) if collect.ret != pytest.ExitCode.USAGE_ERROR else []
        runs = {"submit": submit, "submitted": submitted, "collect": collect, "collected": collected,
                "calls": list(batch.calls), "judged_online_at_submit": judged_online_at_submit, "jobs": dict(batch.jobs)}
        if not online:
            return runs
        replayed = pytester.runpytest_subprocess(*base, "--rejudge", "--record-mode", "none")
        again = read_rows(latest_results(pytester.path))
        pytester.runpytest_subprocess(*base, "--rejudge", "--record-mode", "all")
        online = read_rows(latest_results(pytester.path))
        return {**runs, "replayed": replayed, "again": again, "online": online}


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("selection, jobs", [
    (("--profiles", "7", "--task-kind", "sd"), 1),          # more calls than a job's least: one batch job
    (("--profiles", "7", "--domains", "Alarm"), 0),          # fewer: online, with one line
])
def test_a_bedrock_judge_on_batch_inference_scores_what_it_scores_online_and_replays_offline(pytester, monkeypatch,
                                                                                               selection, jobs):
    """Submit writes the records to S3 and starts a Converse job (or, below Bedrock's least job, calls online and
    says so); collect - another process - reads the job's output back by record id and records each answer as the
    answer to the judge's own online call; the rows score what the same judge scores online, and replay offline."""
    runs = _bedrock_runs(pytester, monkeypatch, selection)
    assert all(r["error"]["kind"] == "BatchPendingError" for r in runs["submitted"])
    assert len(runs["jobs"]) == jobs
    said = runs["submit"].stdout.str()
    if jobs:
        assert runs["judged_online_at_submit"] == 0 and "CreateModelInvocationJob" in runs["calls"]
    else:
        assert "fewer than its batch engine's least job (100 records), sent online at the full price ($" in said
        assert runs["judged_online_at_submit"] == 6 * len(runs["submitted"])
    assert runs["collect"].ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), runs["collect"].stderr.str()
    assert all(r["error"] is None for r in runs["collected"]), runs["collected"][0]["error"]
    assert sorted(map(repr, map(_judging, runs["collected"]))) == sorted(map(repr, map(_judging, runs["online"])))
    assert sorted(map(repr, map(_judging, runs["again"]))) == sorted(map(repr, map(_judging, runs["collected"])))
    assert runs["collected"] and all(r["scores"] is not None for r in runs["collected"])


@pytest.mark.usefixtures("aws_env")
def test_a_bedrock_record_in_error_is_its_cases_error_with_the_providers_code_and_the_rest_score(pytester, monkeypatch):
    runs = _bedrock_runs(pytester, monkeypatch, ("--profiles", "7", "--task-kind", "sd"),
                         outcomes={"R0000000007": "error", "R000000000A": "missing"}, online=False)
    failed = [r for r in runs["collected"] if r["error"] is not None]
    assert len(failed) in (1, 2) and all(r["scores"] is None for r in failed)
    assert any("400: Malformed input request (batch)" in r["error"]["message"] for r in failed)
    assert all(r["scores"] is not None for r in runs["collected"] if r["error"] is None)
    assert len(runs["collected"]) == len(runs["submitted"])
    assert "2 in error" in runs["collect"].stderr.str()


@pytest.mark.usefixtures("aws_env")
def test_a_bedrock_job_that_ran_another_model_lends_no_answer(pytester, monkeypatch):
    runs = _bedrock_runs(pytester, monkeypatch, ("--profiles", "7", "--task-kind", "sd"),
                         model="anthropic.claude-3-haiku-20240307-v1:0", online=False)
    assert runs["collect"].ret == pytest.ExitCode.USAGE_ERROR and runs["collected"] == []
    assert "ran 'anthropic.claude-3-haiku-20240307-v1:0', not meta.llama3-70b-instruct-v1:0" in runs["collect"].stderr.str()
    assert not list(pytester.path.glob("cassettes/**/rejudged/**/*.xz"))


def _chat_requests():
    text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)
    message = st.builds(lambda role, content, cut: Message(role, content, cut % (len(content) + 1)),
                        st.sampled_from(["user", "assistant"]), text, st.integers(0, 50))
    return st.builds(
        lambda system, turns, temperature, top_p, stop, tokens: ChatRequest(
            messages=(*([Message("system", system)] if system else []), *turns), purpose="judge",
            temperature=temperature, max_tokens=tokens, top_p=top_p, stop=tuple(stop),
            json_schema={"type": "object", "properties": {"score": {"type": "integer"}}}, schema_name="rating"),
        st.none() | text, st.lists(message, min_size=1, max_size=4), st.none() | st.floats(0, 1),
        st.none() | st.floats(0.1, 1), st.lists(text, max_size=5), st.none() | st.integers(1, 4000))


@pytest.mark.usefixtures("aws_env")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_chat_requests(), st.sampled_from([LLAMA, CLAUDE, "mistral.mistral-7b-instruct-v0:2",
                                          "us.anthropic.claude-sonnet-4-20250514-v1:0"]),
       st.sampled_from([None, "http://127.0.0.1:8123"]))
def test_a_collected_bedrock_answer_is_recorded_as_the_call_the_judges_replaying_client_makes(request, model, endpoint):
    """Whatever the request (a system prompt or none, cache points, stop sequences, a model that refuses a system
    prompt, an inference profile, an endpoint of its own), the call botocore builds from the record's input is the
    one the judge's own client makes when it replays - matched as one, its answer read alike."""
    import boto3

    from personalens_testkit.llm.batch.bedrock_batch import BedrockBatch
    from personalens_testkit.llm.bedrock import BedrockChat
    from personalens_testkit.replay.cassette import Request
    from personalens_testkit.replay.matching import same_call

    answer = _converse("a free-text answer", 3)
    stored = {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["application/json"]},
              "body": {"string": json.dumps(answer).encode()}}
    seen: list[Request] = []

    def keep(method, uri, body, payload, send):
        seen.append(Request(method, uri, body, {}))
        return send()

    client = boto3.client("bedrock-runtime", region_name="us-west-2", endpoint_url=endpoint)
    chat = BedrockChat(spec=f"bedrock:{model}", model_id=model, json_mode="none", client=client)
    engine = BedrockBatch(chat, role_arn=None, s3_uri=None, bedrock=None, s3=None)
    method, uri, body = engine.call.request(engine.call.body(request))
    seen.append(Request(method, uri, body, {}))
    replaying = BedrockChat(spec=f"bedrock:{model}", model_id=model, json_mode="none", region="us-west-2",
                            endpoint_url=endpoint, replay_only=True, exchange=lambda m, u, b, p, send: keep(
                                m, u, b, p, lambda: stored))
    assert replaying.complete(request).text == "a free-text answer"
    assert len(seen) == 2 and same_call(seen[0], seen[1])
    engine.close()


@pytest.mark.usefixtures("aws_env")
def test_a_bedrock_engine_is_checked_before_any_dialogue_and_says_what_is_missing():
    engine, bedrock, s3, _ = _bedrock()
    s3.add_response("head_bucket", {}, {"Bucket": "team-evals"})
    bedrock.add_response("list_model_invocation_jobs", {"invocationJobSummaries": []}, {"maxResults": 1})
    s3.add_client_error("head_bucket", "403", "Forbidden", 403, expected_params={"Bucket": "team-evals"})
    with bedrock, s3:
        engine.check()
        with pytest.raises(ModelError, match="HeadBucket: 403"):
            engine.check()
    engine.role_arn = None
    with pytest.raises(ValueError, match="batch_role_arn and batch_s3 expected"):
        engine.check()
