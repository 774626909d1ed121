"""A row says what produced it, and no run adopts another's: ``--resume`` refuses, in one line naming the
field, rows that another set-up produced (another bot, judge, floors, an older testkit) unless told to run
those cases again; ``personalens merge`` refuses shards of different set-ups; and a case given twice (a
results file concatenated with itself) is one case for every reader - resume, report, merge, compare, the
recorded results and the results file a resumed run writes. Real runs (a subprocess, loopback HTTP, python
bots) and the readers' rule itself, property-tested."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from personalens_testkit.cli import main as cli
from personalens_testkit.errors import UsageError
from personalens_testkit.gating.compare import compare_rows
from personalens_testkit.report.agreement import labels_by_scenario
from personalens_testkit.results.files import check_one_run, dedupe_rows, load_rows, write_rows
from personalens_testkit.results.recorded import merge_recorded
from personalens_testkit.results.identity import RunIdentity, identity_difference
from personalens_testkit.results.rows import ResultRow, RunInfo

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows, recorded_rows, write_recorded, with_runs
from .test_reliability import ALARM, LIVE, assert_rows_are_cases, project, python_entry, run_rows

BOT = "def reply(request):\n    return 'at your service, from {name}'\n"


def bots(tmp: Path) -> str:
    """Two python bots, botA and botB, as config entries."""
    return "".join(python_entry(name, BOT.format(name=name), tmp) for name in ("botA", "botB"))


def first_run(pytester: pytest.Pytester, fake: FakeLLM, tmp: Path) -> Path:
    """botA's live run of user7's four Alarm cases; its results.jsonl."""
    project(pytester, fake, bots(tmp))
    result, rows = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE)
    result.assert_outcomes(passed=4, deselected=1)
    assert_rows_are_cases(result, rows)
    assert all(row["identity"]["assistant"] == "botA" for row in rows)
    return Path(next(line.split(" -> ", 1)[1] for line in result.stdout.lines
                     if " result rows -> " in line and " recorded result rows" not in line))


def refused(pytester: pytest.Pytester, fake: FakeLLM, *args: str) -> str:
    """A run that must stop before any case and any call: its one ERROR line."""
    calls = len(fake.requests) + len(fake.pings)
    result = pytester.runpytest_subprocess(*ALARM, *LIVE, *args, timeout=120)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert "Traceback" not in text and "INTERNALERROR" not in text
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr.lines
    assert len(fake.requests) + len(fake.pings) == calls  # nothing was called
    return errors[0]


# -- a resume adopts only its own set-up's rows ------------------------------------------------------------------------

def test_a_resume_of_another_set_ups_rows_is_refused_in_one_line_naming_the_field(pytester, tmp_path):
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        resume = ["--resume", str(results)]

        line = refused(pytester, fake, "--assistant", "botB", *resume)
        assert line == (f'ERROR: --resume {results}: the scored rows were produced by assistant "botA", this run\'s is '
                        '"botB" (field assistant): resume with the set-up that produced them, or pass '
                        '--resume-mismatch rerun to run those cases again')

        line = refused(pytester, fake, "--assistant", "botA", "--judge-model", "openai:other-judge", *resume)
        assert 'produced by judge model "openai:fake-judge", this run\'s is "openai:other-judge" (field judge_model)' in line

        (pytester.path / "thresholds.yaml").write_text("version: 1\nscenario:\n  personalization: 3\n")
        line = refused(pytester, fake, "--assistant", "botA", *resume)
        assert ('per-scenario floors "task_completion, personalization>=2, naturalness_assistant>=3, '
                'coherence_assistant>=3", this run\'s is "task_completion, personalization>=3, naturalness_assistant>=3, '
                'coherence_assistant>=3" (field floors)') in line
        (pytester.path / "thresholds.yaml").unlink()

        old = tmp_path / "old.jsonl"  # the rows of an older testkit: no identity
        old.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "identity"}) + "\n"
                               for row in read_rows(results)))
        line = refused(pytester, fake, "--assistant", "botA", "--resume", str(old))
        assert "the scored rows carry no identity (written by an older testkit)" in line and "(field identity)" in line

        # the same set-up resumes: every case was already scored
        same = pytester.runpytest_subprocess("--assistant", "botA", *ALARM, *LIVE, *resume, timeout=120)
        assert same.ret == pytest.ExitCode.OK
        same.stdout.fnmatch_lines([f"personalens: resuming {results}: 4 scored cases kept, 0 to run"])


def test_rerun_drops_another_set_ups_rows_and_runs_their_cases_and_merge_refuses_the_mix(pytester, tmp_path, capsys):
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        result, rows = run_rows(pytester, "--assistant", "botB", *ALARM, *LIVE, "--resume", str(results),
                                "--resume-mismatch", "rerun")
    result.assert_outcomes(passed=4, deselected=1)
    assert_rows_are_cases(result, rows)
    result.stdout.fnmatch_lines([f'personalens: resuming {results}: 0 scored cases kept, 4 set aside to run again (the '
                                 'scored rows were produced by assistant "botA", this run\'s is "botB"), 4 to run'])
    assert {row["assistant"] for row in rows} == {row["identity"]["assistant"] for row in rows} == {"botB"}
    assert all(reply["content"] == "at your service, from botB" for row in rows for reply in row["transcript"]
               if reply["role"] == "assistant")

    capsys.readouterr()
    theirs = Path(next(line.split(" -> ", 1)[1] for line in result.stdout.lines
                       if " result rows -> " in line and " recorded result rows" not in line))
    assert cli(["merge", str(results), str(theirs), "-o", str(tmp_path / "all.jsonl")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f'personalens: error: merge: {theirs}: rows were produced by assistant "botB", {results}\'s by "botA" '
                   "(field assistant): rows produced differently are not one run's and make no one report"]
    assert not (tmp_path / "all.jsonl").exists()


# -- a case given twice is one case, for every reader ------------------------------------------------------------------

def test_a_results_file_concatenated_twice_is_four_cases_everywhere(pytester, tmp_path, capsys):
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        twice = tmp_path / "twice.jsonl"
        twice.write_text(results.read_text() * 2)
        resumed, rows = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE, "--resume", str(twice))
    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()[-3000:]
    resumed.stdout.fnmatch_lines([f"personalens: resuming {twice}: 4 scored cases kept, 0 to run",
                                  "personalens: 4 recorded result rows -> *"])
    assert len(rows) == 4 and len({row["scenario_id"] for row in rows}) == 4  # the results file it writes
    assert len(recorded_rows(pytester.path / "cassettes" / "botA")) == 4

    capsys.readouterr()
    assert cli(["report", str(twice), "--json", str(tmp_path / "report.json")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["rows"]) == 4 and report["counts"] == {"cases": 4, "passed": 4}
    overall = report["aggregates"]["overall"]
    assert overall["scored"] == 4 and {m["n"] for m in overall["metrics"].values()} == {4}

    assert cli(["merge", str(twice), str(results), "-o", str(tmp_path / "merged.jsonl")]) == 0
    assert "merged 4 cases from 2 files" in capsys.readouterr().out
    assert len(read_rows(tmp_path / "merged.jsonl")) == 4

    comparison = compare_rows(load_rows(twice), load_rows(twice), margin=0.0, confidence=0.95)
    assert comparison.shared_scenarios == 4


def test_a_resume_keeps_only_rows_of_cases_this_run_selects_and_an_edited_id_is_the_same_case(pytester, tmp_path):
    """Rows of cases this run does not select (another scenario, another try) are left out, and a row whose id was
    edited (a trailing space, upper case, a zero-width space) is the same case: 4 cases, 4 rows."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        rows = with_runs([json.loads(line) for line in results.read_text().splitlines()])
        extra = [{**rows[0], "scenario_id": rows[0]["scenario_id"] + " "},
                 {**rows[1], "scenario_id": rows[1]["scenario_id"].upper()},
                 {**rows[2], "scenario_id": "\u200b" + rows[2]["scenario_id"]},
                 {**rows[3], "repeat": 2}, {**rows[3], "scenario_id": "user999-SD-Alarm-task-9"}]
        edited = tmp_path / "edited.jsonl"
        edited.write_text("".join(json.dumps(r) + "\n" for r in rows[:3] + extra))
        resumed, new_rows = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE, "--resume", str(edited))
    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()[-3000:]
    resumed.stdout.fnmatch_lines([f"personalens: resuming {edited}: 3 scored cases kept, 2 left out (cases this run "
                                  "does not select), 1 to run"])
    assert len(new_rows) == 4 and len({r["scenario_id"].strip().lower() for r in new_rows}) == 4


def test_a_last_row_without_a_final_newline_is_kept_and_a_torn_one_dropped(tmp_path):
    whole = row(1, "2025-01-01T10:00:00+00:00").model_dump_json() + "\n" + row(2, "2025-01-01T10:00:00+00:00").model_dump_json()
    (tmp_path / "a.jsonl").write_text(whole)
    (tmp_path / "b.jsonl").write_text(whole[:-20])
    assert len(load_rows(tmp_path / "a.jsonl")) == 2 and len(load_rows(tmp_path / "b.jsonl")) == 1


def test_merge_refuses_older_rows_that_state_different_set_ups():
    one, other = row(1, "", judge_model="openai:j"), row(2, "", judge_model="openai:other")
    with pytest.raises(UsageError, match="field judge_model"):
        check_one_run([("a.jsonl", [one]), ("b.jsonl", [other])], what="merge")


# -- the readers' rule: one row per case, the newest ---------------------------------------------------------------------

def row(task: int, finished: str, *, repeat: int = 1, tag: str = "", status: str = "passed", **fields) -> ResultRow:
    return ResultRow(scenario_id=f"user7-SD-Alarm-task-{task}", status=status, repeat=repeat, finished_at=finished,
                     run_id=tag, **fields)


def test_the_newest_row_wins_ties_go_to_the_later_and_cases_keep_their_first_place():
    rows = [row(1, "2025-01-01T10:00:05+00:00", tag="a"), row(2, "2025-01-01T10:00:00+00:00", tag="b"),
            row(1, "2025-01-01T10:00:01+00:00", tag="older, later in the file"),
            row(2, "2025-01-01T10:00:00+00:00", tag="tie, later"), row(1, "", tag="no time"),
            row(1, "2025-01-01T09:00:06-01:00", tag="newest, another zone"), row(2, "2025-01-01T10:00:00", repeat=2)]
    assert [(r.case_id, r.run_id) for r in dedupe_rows(rows)] == [
        ("user7-SD-Alarm-task-1", "newest, another zone"), ("user7-SD-Alarm-task-2", "tie, later"),
        ("user7-SD-Alarm-task-2-r2", "")]


TIMES = st.sampled_from(["", "not a time", "2025-03-01T12:00:00+00:00", "2025-03-01T12:00:01+00:00",
                         "2025-03-01T13:00:01+01:00", "2025-03-01T12:00:02", "2025-03-02T00:00:00+00:00"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 2), TIMES), max_size=25), st.randoms())
def test_dedupe_keeps_one_row_per_case_the_newest_whatever_the_order(specs, rng):
    rows = [row(task, finished, repeat=repeat, tag=str(i)) for i, (task, repeat, finished) in enumerate(specs)]
    out = dedupe_rows(rows)
    assert [r.case_id for r in out] == list(dict.fromkeys(r.case_id for r in rows))  # each case once, in first place
    for winner in out:
        same = [r for r in rows if r.case_id == winner.case_id]
        newest = max(instant(r) for r in same)
        assert instant(winner) == newest
        assert winner is [r for r in same if instant(r) == newest][-1]  # a tie: the later
    # another order changes only which of equally new rows wins
    shuffled = rows[:]
    rng.shuffle(shuffled)
    assert {r.case_id: instant(r) for r in dedupe_rows(shuffled)} == {r.case_id: instant(r) for r in out}
    unique = [r for r in rows if sum(instant(s) == instant(r) for s in rows if s.case_id == r.case_id) == 1]
    unique_out = {r.case_id: r.run_id for r in dedupe_rows(unique)}
    random.Random(rng.random()).shuffle(unique)
    assert {r.case_id: r.run_id for r in dedupe_rows(unique)} == unique_out
    assert dedupe_rows(out) == out  # deduped rows stay as they are


def instant(r: ResultRow) -> float:
    from personalens_testkit.results.files import finished_instant

    return finished_instant(r.finished_at)


def test_every_reader_counts_a_case_once(tmp_path):
    one = [row(1, "2025-01-01T10:00:00+00:00", tag="old"), row(2, "2025-01-01T10:00:00+00:00", tag="old")]
    newer = row(1, "2025-01-02T10:00:00+00:00", tag="new")
    path = tmp_path / "results.jsonl"
    write_rows(path, one + [newer] + one)
    assert [(r.case_id, r.run_id) for r in load_rows(path)] == [("user7-SD-Alarm-task-1", "new"),
                                                                 ("user7-SD-Alarm-task-2", "old")]
    report = {"runs": [{"run_id": "old"}, {"run_id": "new"}],
              "rows": [json.loads(r.model_dump_json()) for r in one + [newer] + one]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert len(load_rows(tmp_path / "report.json")) == 2
    # agreement's labels: the newest record of a case; a newer error leaves the case without a label
    scored = {"task_completion": True, "personalization": 2}
    labels = labels_by_scenario([
        {"scenario_id": "u-1", "scores": {**scored, "personalization": 4}, "finished_at": "2025-01-02T00:00:00+00:00"},
        {"scenario_id": "u-1", "scores": scored, "finished_at": "2025-01-01T00:00:00+00:00"},
        {"scenario_id": "u-2", "scores": scored, "finished_at": "2025-01-01T00:00:00+00:00"},
        {"scenario_id": "u-2", "status": "error", "scores": None, "finished_at": "2025-01-03T00:00:00+00:00"}])
    assert labels == {"u-1": {"task_completion": True, "personalization": 4}}


def test_the_recorded_results_keep_the_newest_row_of_each_case(tmp_path):
    folder = tmp_path / "cassettes" / "botA"
    folder.mkdir(parents=True)
    recorded = [row(1, "2025-01-05T00:00:00+00:00", tag="re-recorded"), row(2, "2025-01-01T00:00:00+00:00", tag="old")]
    write_recorded(folder, [{**json.loads(r.model_dump_json()), "assistant": "botA"} for r in recorded + recorded])
    kept = [row(1, "2025-01-02T00:00:00+00:00", tag="a resumed run's kept row"),
            row(2, "2025-01-03T00:00:00+00:00", tag="new"), row(2, "2025-01-03T00:00:00+00:00", tag="new")]
    assert merge_recorded(folder / "results.jsonl.xz", kept) == 1
    assert {r["scenario_id"][-1]: r["run_id"] for r in recorded_rows(folder)} == {"1": "re-recorded", "2": "new"}
    assert len(recorded_rows(folder)) == 2


# -- identities ----------------------------------------------------------------------------------------------------------

IDENTITY = RunIdentity(assistant="botA", assistant_kind="python", user_model="openai:u", judge_model="openai:j",
                       data="bundled 50-profile sample #0123456789ab", floors="task_completion", testkit="0.1.0")


@pytest.mark.parametrize("change, field", [
    ({}, None), ({"assistant": "botB"}, "assistant"), ({"assistant_kind": "http"}, "assistant_kind"),
    ({"assistant_model": "openai:m"}, "assistant_model"), ({"assistant_prompt": "llama"}, "assistant_prompt"),
    ({"assistant_context": "D"}, "assistant_context"), ({"user_model": "local"}, "user_model"),
    ({"judge_model": "local"}, "judge_model"), ({"data": "upstream data #0123456789ab"}, "data"),
    ({"floors": "none"}, "floors"), ({"testkit": "0.2.0"}, "testkit"),
    ({"assistant": "botB", "testkit": "0.2.0"}, "assistant"),  # the first field that differs
])
def test_identities_differ_in_their_first_differing_field(change, field):
    assert identity_difference(IDENTITY.model_copy(update=change), IDENTITY) == field
    assert identity_difference(None, IDENTITY) == identity_difference(IDENTITY, None) == "identity"
    assert identity_difference(None, None) is None


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["max_turns", "leak_check", "review_user", "reply_cut"]),
                       st.none() | st.sampled_from(["true", "5", "#0123456789ab"]), max_size=4),
       st.sampled_from(["max_turns", "leak_check", "review_user", "reply_cut"]))
def test_a_setting_an_identity_lacks_is_unset_there(kept, added):
    """An identity written before a setting existed lacks its key: that is the setting unset (a flag off), so rows of
    the older version stand for a run that leaves it unset, and only for such a run."""
    older = IDENTITY.model_copy(update={"settings": {k: v for k, v in kept.items() if k != added}})
    unset = IDENTITY.model_copy(update={"settings": {**older.settings, added: None}})
    given_now = IDENTITY.model_copy(update={"settings": {**older.settings, added: "true"}})
    assert identity_difference(older, unset) is None and identity_difference(unset, older) is None
    assert identity_difference(older, given_now) == identity_difference(given_now, older) == f"settings.{added}"


def test_old_rows_stay_readable_and_merge_alike_only():
    old = ResultRow.model_validate({"scenario_id": "user7-SD-Alarm-task-1", "status": "passed"})
    assert old.identity is None
    check_one_run([("a", [old]), ("b", [old])], what="merge")  # rows of an older testkit: nothing to compare
    dressed = old.model_copy(update={"run": RunInfo(identity=IDENTITY)})
    check_one_run([("a", [dressed]), ("b", [dressed])], what="merge")
    with pytest.raises(UsageError) as caught:
        check_one_run([("a", [dressed]), ("b", [old])], what="merge")
    assert str(caught.value) == ("merge: b: rows carry no identity (written by an older testkit), a's do (field identity): "
                                 "rows produced differently are not one run's and make no one report")
    other = dressed.model_copy(update={"run": RunInfo(identity=IDENTITY.model_copy(update={"data": "upstream data #ffffffffffff"}))})
    with pytest.raises(UsageError) as caught:
        check_one_run([("a", [dressed, other])], what="merge")
    assert str(caught.value).startswith('merge: a: rows were produced by data "upstream data #ffffffffffff", other rows '
                                        'by "bundled 50-profile sample #0123456789ab" (field data)')


def test_the_data_identity_follows_the_content_not_the_folder(data_copy, tmp_path):
    import shutil

    from personalens_testkit.data.loader import open_dataset

    bundled = open_dataset().identity
    assert bundled.startswith("bundled 50-profile sample #") and bundled == open_dataset().identity
    copy = open_dataset(data_copy).identity
    assert copy.startswith("upstream data #") and copy.split("#")[1] != bundled.split("#")[1]
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(data_copy, elsewhere)
    assert open_dataset(elsewhere).identity == copy  # another machine's checkout of the same data
    tasks = elsewhere / "data" / "profile" / "user7" / "tasks.json"
    tasks.write_text(tasks.read_text() + "\n")
    assert open_dataset(elsewhere).identity != copy
    catalogue = data_copy / "data" / "task" / "Alarm" / "task.jsonl"
    catalogue.write_text(catalogue.read_text().replace("alarm", "alarn", 1))  # the same size, other content
    assert open_dataset(data_copy).identity != copy


# -- the identity is everything that can change a score; a resumed row's verdict is worked out again --------------------

def test_a_resume_refuses_rows_of_another_max_turns_analysis_endpoint_or_bot_entry(pytester, tmp_path):
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        resume = ["--assistant", "botA", "--resume", str(results)]
        for option, field in ((["--max-turns", "5"], "settings.max_turns"), (["--turn-level"], "settings.turn_level"),
                              (["--leak-check"], "settings.leak_check")):
            line = refused(pytester, fake, *option, *resume)
            assert f"(field {field})" in line, line
        config = pytester.path / "personalens.toml"  # the same judge spec, served from another endpoint
        before = config.read_text()
        config.write_text(before.replace(fake.url, fake.url.replace("127.0.0.1", "localhost"), 1))
        line = refused(pytester, fake, *resume)
        assert "(field settings.openai_base_url)" in line and fake.url not in line  # an address is shown as a digest
        config.write_text(before)
        assert 'produced by setting max_turns none, this run\'s is "5"' in refused(pytester, fake, "--max-turns", "5",
                                                                                    *resume)
        # the same bot name, running another script
        other = tmp_path / "other"
        other.mkdir()
        config.write_text(config.read_text().replace(f'path = ["{tmp_path / "pybots"}"]', f'path = ["{other}"]', 1))
        (other / "botA.py").write_text(BOT.format(name="someone else"))
        assert "(field assistant_entry)" in refused(pytester, fake, *resume)


def test_a_resume_refuses_rows_of_data_edited_to_the_same_size(pytester, tmp_path, data_copy):
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, bots(tmp_path))
        data = ["--personalens-data", str(data_copy)]
        result, rows = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE, *data)
        assert_rows_are_cases(result, rows) and len(rows) == 4
        results = Path(next(line.split(" -> ", 1)[1] for line in result.stdout.lines
                            if " result rows -> " in line and " recorded result rows" not in line))
        profile = data_copy / "data" / "profile" / "user7" / "profile.json"
        text = profile.read_text()
        assert '"upbeat music"' in text
        profile.write_text(text.replace('"upbeat music"', '"upbeat muzic"', 1))  # one letter of a preference
        assert profile.stat().st_size == len(text.encode())
        assert "(field data)" in refused(pytester, fake, "--assistant", "botA", *data, "--resume", str(results))


def test_a_resumed_rows_status_is_worked_out_from_its_scores_never_read(pytester, tmp_path):
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        edited = tmp_path / "edited.jsonl"
        rows = read_rows(results)
        for row in rows:  # scores below every floor, and "passed" said over them
            row["scores"].update(personalization=1, task_completion=False)
            row.update(status="passed", verdict="pass", shortfalls=[])
        edited.write_text("".join(json.dumps(row) + "\n" for row in rows))
        result, written = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE, "--resume", str(edited))
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    assert [row["status"] for row in written] == ["failed"] * 4
    assert all({s["metric"] for s in row["shortfalls"]} == {"task_completion", "personalization"} for row in written)
    assert "personalens: verdict: REGRESSED" in result.stdout.str()  # a resumed row earns no live-judgement leniency


@settings(max_examples=300, deadline=None)
@given(scores=st.fixed_dictionaries({"task_completion": st.booleans(), "personalization": st.integers(1, 4),
                                     "naturalness_user": st.integers(1, 5), "naturalness_assistant": st.integers(1, 5),
                                     "coherence_user": st.integers(1, 5), "coherence_assistant": st.integers(1, 5)}),
       said=st.sampled_from(["passed", "failed"]), verdict=st.sampled_from(["pass", "regression", "expected failure",
                                                                           "unexpected pass", None]))
def test_a_resumed_row_passes_only_when_its_scores_meet_every_floor(scores, said, verdict):
    from personalens_testkit.gating.expectations import PASS, row_judged_now
    from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds, shortfalls

    thresholds = load_thresholds(default_thresholds_path())
    row = ResultRow.model_validate({"scenario_id": "user7-SD-Alarm-task-1", "status": said, "scores": scores,
                                    "verdict": verdict})
    judged = row_judged_now(row, thresholds, PASS)
    below = shortfalls(thresholds.scenario, scores)
    assert (judged.status == "passed") == (not below and said == "passed")
    assert judged.verdict == ("pass" if judged.status == "passed" else "regression")
    assert [s.metric for s in judged.shortfalls] == [s.metric for s in below]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_every_setting_but_the_declared_ones_is_part_of_the_identity(tmp_path_factory, data):
    """A setting a case's score may depend on changes the rows' identity, named by the setting; one declared not to
    (paths, progress, parallelism, report options) never does. Generated over the settings table itself."""
    from personalens_testkit.run.state import Run
    from personalens_testkit.settings.model import RunSettings
    from personalens_testkit.settings.table import NOT_IN_IDENTITY, SETTINGS

    name = data.draw(st.sampled_from([s.name for s in SETTINGS]))
    base = {s.name: s.default for s in SETTINGS}
    value = data.draw(st.one_of(st.integers(0, 99), st.booleans(), st.text(max_size=12), st.none()).filter(
        lambda v: json.dumps(v) != json.dumps(base[name])))
    identity = Run(RunSettings(resolved=base), run_id="r", is_controller=False).cases.identity
    other = Run(RunSettings(resolved={**base, name: value}), run_id="r", is_controller=False).cases.identity
    if name in NOT_IN_IDENTITY:
        assert other == identity
        return
    assert identity_difference(other, identity) == f"settings.{name}"


def test_a_new_setting_is_part_of_the_identity_unless_declared_not_to_be():
    from personalens_testkit.run.state import Run
    from personalens_testkit.settings.model import RunSettings
    from personalens_testkit.settings.table import NOT_IN_IDENTITY, SETTING

    assert set(NOT_IN_IDENTITY) <= set(SETTING)
    one = Run(RunSettings(resolved={"a_new_setting": 1}), run_id="r", is_controller=False).cases.identity
    two = Run(RunSettings(resolved={"a_new_setting": 2}), run_id="r", is_controller=False).cases.identity
    assert identity_difference(two, one) == "settings.a_new_setting"


def test_a_resume_given_node_ids_finds_a_scored_case_and_keeps_its_row_running_only_the_others(pytester, tmp_path):
    """Node ids on the command line (as `--lf` or a CI retry passes them): one that names a case the --resume
    results scored is found - not "not found" - and stands as its kept row (deselected, never called again); the
    other named cases run. Rows written == cases: the kept rows and the one run."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        results = first_run(pytester, fake, tmp_path)
        rows = read_rows(results)
        partial = tmp_path / "partial.jsonl"
        partial.write_text("".join(json.dumps(row) + "\n" for row in rows[:3]))
        listed = pytester.runpytest_subprocess("--assistant", "botA", *ALARM, *LIVE, "--collect-only", "-q",
                                               timeout=120)
        ids = {row["scenario_id"]: next(line for line in listed.stdout.lines if f"[{row['scenario_id']}]" in line)
               for row in rows}
        scored, unscored = ids[rows[0]["scenario_id"]], ids[rows[3]["scenario_id"]]
        calls = len(fake.requests)
        alone, kept = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE, "--resume", str(partial), scored)
        assert alone.ret == pytest.ExitCode.OK, alone.stdout.str()[-3000:]
        assert "not found" not in alone.stdout.str() + alone.stderr.str()
        alone.assert_outcomes(deselected=1)
        assert len(fake.requests) == calls and len(kept) == 3  # nothing called: the three kept rows, as they were
        both, new_rows = run_rows(pytester, "--assistant", "botA", *ALARM, *LIVE, "--resume", str(partial), scored,
                                  unscored)
    assert both.ret == pytest.ExitCode.OK, both.stdout.str()[-3000:]
    both.assert_outcomes(passed=1, deselected=1)
    assert sorted(r["scenario_id"] for r in new_rows) == sorted(r["scenario_id"] for r in rows)
