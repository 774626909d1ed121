"""Bedrock batch judging under a hostile world (the kinds a hostile review found, each as a rule): a jobs file edited,
the S3 input object changed after the job ran, one resend's output beside another's, a submit that fails part way,
a record's input that is no request. Whatever happens, no score is ever another call's answer's, nothing paid for is
lost, and a bad file is one line. Through boto3's own clients against the loopback fake (tests/support/
fake_bedrock_batch.py), the judge's online calls through FakeLLM's Converse."""

from __future__ import annotations

import json

import pytest

from .test_batch_engines import LLAMA, ROLE, _hashed

SD = ("--profiles", "7", "--task-kind", "sd")
ALARM = ("--profiles", "7", "--domains", "Alarm")
BASE = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
        "--judge-model", "batch-judge")


def _project(pytester, runtime_url, extra=""):
    from .support.project import suite_project

    suite_project(pytester, f'record_mode = "all"\n[models.batch-judge]\nkind = "bedrock"\nmodel = "{LLAMA}"\n'
                            f'region = "us-east-1"\njson_mode = "none"\nendpoint_url = "{runtime_url}"\n'
                            f'batch_role_arn = "{ROLE}"\nbatch_s3 = "s3://team-evals/personalens/"\n{extra}')


class World:
    """The fakes of one test: the chat server (user agent, bot, the judge online) and Bedrock's batch with S3."""

    def __init__(self, pytester, monkeypatch, **batch):
        from .support.fake_bedrock_batch import FakeBedrockBatch
        from .support.fake_llm import FakeLLM, Script, _chat_from_converse, _converse_answer

        script = Script(terminate_after=2, vary_assistant_text=True, judge_rule=_hashed)
        judge = FakeLLM(script)

        def answer(model_input):
            chat = _chat_from_converse(model_input)
            return _converse_answer(chat, judge.answer(chat))

        self.pytester, self.monkeypatch = pytester, monkeypatch
        self.fake, self.batch = FakeLLM(script), FakeBedrockBatch(answer, **batch)

    def __enter__(self) -> World:
        self.fake.__enter__()
        self.batch.__enter__()
        for name in ("S3", "BEDROCK"):
            self.monkeypatch.setenv(f"AWS_ENDPOINT_URL_{name}", self.batch.url)
        self.monkeypatch.setenv("OPENAI_BASE_URL", self.fake.url)
        self.runtime = self.fake.url.removesuffix("/v1")
        return self

    def __exit__(self, *exc):
        self.batch.__exit__(*exc)
        self.fake.__exit__(*exc)

    def run(self, *args):
        from .support.project import latest_results, read_rows

        result = self.pytester.runpytest_subprocess(*BASE, *args)
        rows = read_rows(latest_results(self.pytester.path)) if result.ret != pytest.ExitCode.USAGE_ERROR else []
        return result, rows

    def online(self, selection):
        """The same judge online: its rows."""
        return self.run(*selection, "--rejudge", "--record-mode", "all")[1]


def _no_wrong_score(collected, online):
    by = {(r["scenario_id"], r["repeat"]): r["scores"] for r in online}
    wrong = [r["scenario_id"] for r in collected if r["scores"] is not None
             and r["scores"] != by[(r["scenario_id"], r["repeat"])]]
    assert wrong == [] and collected


def _jobs_file(root):
    path = next(root.glob("cassettes/**/batch-jobs.json"))
    return path, json.loads(path.read_text())


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("swap", ["sent", "side cassettes"])
def test_online_calls_swapped_in_the_jobs_file_lend_no_answer_to_another_call(pytester, monkeypatch, swap):
    """An online call's answer is kept with the very call it answers (a cassette), never in the jobs file: what the
    jobs file says was sent, swapped between two cases' records, or the cases' kept answers swapped, meets no answer -
    an error - never the other call's."""
    with World(pytester, monkeypatch) as world:
        _project(pytester, world.runtime)
        world.run(*ALARM, "--judge-batch", "submit")
        path, state = _jobs_file(pytester.path)
        cases: dict[str, list[str]] = {}
        for record, entry in state["records"].items():
            cases.setdefault(entry["case"], []).append(record)
        (c1, r1), (c2, r2) = list(cases.items())[:2]
        if swap == "sent":
            a, b = state["online"][r1[0]], state["online"][r2[0]]
            a["sent"], b["sent"] = b["sent"], a["sent"]
            path.write_text(json.dumps(state))
        else:
            side = next(pytester.path.glob("cassettes/**/batch-online")).iterdir()
            one, two = sorted(side)[:2]
            data = one.read_bytes()
            one.write_bytes(two.read_bytes())
            two.write_bytes(data)
        collect, collected = world.run(*ALARM, "--judge-batch", "collect")
        if swap == "side cassettes":  # a cassette holding another case's calls: one line, nothing written
            err = collect.stderr.str()
            assert collect.ret == pytest.ExitCode.USAGE_ERROR and "cassettes swapped, renamed or moved" in err
            assert list(pytester.path.glob("cassettes/*/rejudged/*/*.xz")) == []
            return
        assert collect.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), collect.stderr.str()
        assert any(r["error"] for r in collected)
        _project(pytester, world.runtime)
        _no_wrong_score(collected, world.online(ALARM))


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("after_the_job_ran", [True, False])
def test_the_input_object_changed_at_s3_lends_no_answer_to_another_call(pytester, monkeypatch, after_the_job_ran):
    """Two records' inputs swapped in the S3 input object - after the job ran (what ran is in its output, beside each
    answer) or before (what ran is the swapped input: each answer still answers its own request)."""
    with World(pytester, monkeypatch) as world:
        _project(pytester, world.runtime)
        world.run(*SD, "--judge-batch", "submit")
        _, state = _jobs_file(pytester.path)
        case = next(iter({e["case"] for e in state["records"].values()}))
        r1, r2 = [r for r, e in state["records"].items() if e["case"] == case][2:4]
        if after_the_job_ran:
            for arn in list(world.batch.jobs):
                world.batch._status(arn)
        key = next(k for k in world.batch.objects if k[1].endswith("input.jsonl"))
        lines = [json.loads(line) for line in world.batch.objects[key].decode().splitlines() if line.strip()]
        i, j = (next(n for n, line in enumerate(lines) if line["recordId"] == r) for r in (r1, r2))
        lines[i]["modelInput"], lines[j]["modelInput"] = lines[j]["modelInput"], lines[i]["modelInput"]
        world.batch.objects[key] = "".join(json.dumps(line) + "\n" for line in lines).encode()
        _, collected = world.run(*SD, "--judge-batch", "collect")
        _project(pytester, world.runtime)
        _no_wrong_score(collected, world.online(SD))


@pytest.mark.usefixtures("aws_env")
def test_a_second_resend_reads_its_own_jobs_output_only(pytester, monkeypatch):
    """Two resends in a row use the same record ids; each job's answers are read from its own output folder (named
    after it by Bedrock), never from another job's under the same location."""
    from personalens_testkit.llm.batch.jobs import record_ids

    first, again = record_ids(400), record_ids(400, prefix="S")
    collect = ("--judge-batch", "collect", "--batch-wait", "--batch-poll-s", "0.01")
    with World(pytester, monkeypatch, outcomes={first[6 * n]: "error" for n in range(20)}) as world:
        _project(pytester, world.runtime)
        world.run(*SD, "--judge-batch", "submit")
        world.run(*SD, *collect, "--batch-resend")
        world.batch.outcomes = {again[6 * n]: "error" for n in range(2, 20)}
        world.run(*SD, *collect, "--batch-resend")
        world.batch.outcomes = {again[0]: "missing"}
        _, collected = world.run(*SD, *collect)
        names = [job["jobName"] for job in world.batch.jobs.values()]
        assert len(set(names)) == len(names)  # every job a name, and so a place, of its own
        _no_wrong_score(collected, world.online(SD))


@pytest.mark.usefixtures("aws_env")
def test_a_submit_that_fails_part_way_keeps_the_jobs_it_made_and_collect_reads_them(pytester, monkeypatch):
    reviewer = (f'[models.batch-reviewer]\nkind = "bedrock"\nmodel = "mistral.mistral-large-2402-v1:0"\n'
                f'region = "us-east-1"\njson_mode = "none"\nbatch_role_arn = "{ROLE}"\n'
                f'batch_s3 = "s3://team-evals/personalens/"\n')
    selection = (*SD, "--repeat", "2", "--review-user", "--review-user-model", "batch-reviewer")  # two jobs
    with World(pytester, monkeypatch, jobs_allowed=1) as world:
        _project(pytester, world.runtime, reviewer + f'endpoint_url = "{world.runtime}"\n')
        submit, _ = world.run(*selection, "--judge-batch", "submit")
        said = submit.stdout.str() + submit.stderr.str()
        [made] = list(world.batch.jobs)
        assert "sending stopped part way" in said and made in said and "Traceback" not in said
        _, state = _jobs_file(pytester.path)
        assert [j["job"]["job_id"] for j in state["jobs"]] == [made]
        assert set(state["records"]) == set(state["jobs"][0]["job"]["record_ids"])
        collect, collected = world.run(*selection, "--judge-batch", "collect")
        assert collect.ret != pytest.ExitCode.USAGE_ERROR and len(collected) == len({e["case"] for e in
                                                                                      state["records"].values()})


@pytest.mark.usefixtures("aws_env")
def test_a_record_whose_input_is_no_request_is_one_line_and_nothing_is_written(pytester, monkeypatch):
    with World(pytester, monkeypatch) as world:
        _project(pytester, world.runtime)
        world.run(*ALARM, "--judge-batch", "submit")
        path, state = _jobs_file(pytester.path)
        kept = json.loads(json.dumps(state))
        state["online"][list(state["online"])[-1]]["sent"] = {"messages": "not a list"}
        path.write_text(json.dumps(state))
        collect, _ = world.run(*ALARM, "--judge-batch", "collect")
        err = collect.stderr.str()
        assert collect.ret == pytest.ExitCode.USAGE_ERROR and "is not a Converse request" in err
        assert len([line for line in err.splitlines() if line.strip()]) == 1 and "Traceback" not in err
        judged = [p for p in pytester.path.glob("cassettes/*/rejudged/*/*.xz")]
        assert judged == []  # not one re-judging cassette written
        path.write_text(json.dumps(kept))  # mended: collected whole
        collect, collected = world.run(*ALARM, "--judge-batch", "collect")
        assert collected and all(r["error"] is None for r in collected)


@pytest.mark.usefixtures("aws_env")
def test_a_collect_whose_job_answered_many_cases_in_error_still_judges_every_case(pytester, monkeypatch):
    """Records in error are recorded answers, no dead endpoint: the breaker (5 alike in a row) never stops a collect,
    every case gets its row - those in error with the provider's code, the others scored."""
    from personalens_testkit.llm.batch.jobs import record_ids

    failing = {record: "error" for record in record_ids(6 * 8)}  # the first eight cases' every call
    with World(pytester, monkeypatch, outcomes=failing) as world:
        _project(pytester, world.runtime)
        _, submitted = world.run(*SD, "--judge-batch", "submit")
        collect, collected = world.run(*SD, "--judge-batch", "collect")
        assert len(collected) == len(submitted) and "in a row" not in collect.stdout.str()
        assert sum(r["error"] is not None for r in collected) == 8
