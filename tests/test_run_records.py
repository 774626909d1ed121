"""A run's information is held once per run (issue 47, item 5): a results file holds each run's record once - its
id, assistant, models, record mode and identity - and each row names its run by ``run_id``. Every reader joins a
row to its run (one object per run, shared by its rows); a row naming a run the file does not hold, and one run id
held with two different set-ups, are refused in one line; a row of an older version, which repeated its run's
fields, is read with the run those fields state. Rows and runs are generated, several runs to a file."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import UsageError
from personalens_testkit.results.files import ResultsWriter, load_rows, read_rows, write_rows
from personalens_testkit.results.identity import RunIdentity
from personalens_testkit.results.rows import RUN_FIELDS, ResultRow, RunInfo, run_line
from personalens_testkit.results.source import RowSource

WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
IDENTITIES = st.builds(RunIdentity, assistant=WORDS, assistant_kind=WORDS, user_model=WORDS, judge_model=WORDS,
                       data=WORDS, floors=WORDS, testkit=WORDS,
                       settings=st.dictionaries(WORDS, st.none() | WORDS, max_size=3))
RUNS = st.builds(RunInfo, run_id=st.text("abcdef0123456789-", min_size=1, max_size=8), assistant=WORDS,
                 assistant_kind=WORDS, assistant_context=WORDS, assistant_model=st.none() | WORDS,
                 assistant_prompt=st.none() | WORDS, user_model=WORDS, judge_model=WORDS,
                 record_mode=st.none() | st.sampled_from(["none", "once", "all"]), identity=st.none() | IDENTITIES)


@st.composite
def runs_and_rows(draw):
    """Up to three runs (distinct ids) and up to 12 rows, each of one of them, cases distinct."""
    runs = draw(st.lists(RUNS, min_size=1, max_size=3, unique_by=lambda run: run.run_id))
    owners = draw(st.lists(st.sampled_from(runs), min_size=1, max_size=12))
    rows = [ResultRow(run=run, run_id=run.run_id, scenario_id=f"user{n}-SD-Alarm-task-1", status="passed",
                      finished_at=f"2026-01-01T00:00:{n:02d}+00:00") for n, run in enumerate(owners)]
    return runs, rows


def _check_joined(read: list[ResultRow], rows: list[ResultRow]) -> None:
    assert [(r.scenario_id, r.run) for r in read] == [(r.scenario_id, r.run) for r in rows]
    by_run: dict[str, RunInfo] = {}
    for row in read:  # one object per run, shared by its rows
        assert by_run.setdefault(row.run_id, row.run) is row.run
        for name in RUN_FIELDS:
            assert getattr(row, name) == getattr(row.run, name)


@settings(max_examples=150, deadline=None)
@given(runs_and_rows())
def test_every_reader_joins_each_row_to_its_own_run_held_once(tmp_path_factory, drawn):
    runs, rows = drawn
    folder = tmp_path_factory.mktemp("r")
    writer = ResultsWriter(folder / "results.jsonl")
    for row in rows:
        writer.write(row)
    writer.close()
    records = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").split("\n") if line]
    held = [record["run"]["run_id"] for record in records if "run" in record]
    assert sorted(held) == sorted({row.run_id for row in rows})  # each run's record once, and only the rows' runs
    assert writer.count == len(rows) == sum(1 for record in records if "scenario_id" in record)
    assert not any(name in record for record in records for name in RUN_FIELDS[1:])  # no row repeats its run
    _check_joined(load_rows(folder / "results.jsonl"), rows)
    _check_joined(read_rows(folder / "results.jsonl", written=writer.written), rows)
    _check_joined(list(RowSource(folder / "results.jsonl", written=writer.written).rows()), rows)
    write_rows(folder / "whole.jsonl.xz", rows)  # the recorded results' and merge's writer: runs first, once each
    _check_joined(load_rows(folder / "whole.jsonl.xz"), rows)


def test_a_run_record_after_its_rows_still_joins_them(tmp_path):
    run = RunInfo(run_id="r1", assistant="botA")
    row = ResultRow(run=run, run_id="r1", scenario_id="user1-SD-Alarm-task-1", status="passed")
    path = tmp_path / "results.jsonl"
    path.write_text(row.model_dump_json() + "\n" + run_line(run) + "\n")
    assert [r.assistant for r in load_rows(path)] == [r.assistant for r in read_rows(path)] == ["botA"]


@settings(max_examples=100, deadline=None)
@given(runs_and_rows(), st.data())
def test_a_row_naming_a_run_the_file_does_not_hold_is_refused_by_every_reader(tmp_path_factory, drawn, data):
    _, rows = drawn
    folder = tmp_path_factory.mktemp("r")
    path = folder / "results.jsonl"
    write_rows(path, rows)
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    dropped = data.draw(st.sampled_from([line for line in lines if line.startswith('{"run":')]))
    run_id = json.loads(dropped)["run"]["run_id"]
    path.write_text("".join(line + "\n" for line in lines if line != dropped), encoding="utf-8")
    for read in (load_rows, read_rows, lambda p: list(RowSource(p).rows())):
        with pytest.raises(UsageError) as caught:
            read(path)
        message = str(caught.value)
        assert str(path) in message and repr(run_id) in message and "\n" not in message


@settings(max_examples=100, deadline=None)
@given(RUNS, st.sampled_from(RUN_FIELDS[1:]), WORDS)
def test_one_run_id_held_with_two_set_ups_is_refused_naming_the_field(tmp_path_factory, run, field, value):
    other = run.model_copy(update={field: value if field != "identity" else None})
    row = ResultRow(run=run, run_id=run.run_id, scenario_id="user1-SD-Alarm-task-1", status="passed")
    path = tmp_path_factory.mktemp("r") / "results.jsonl"
    path.write_text(run_line(run) + "\n" + run_line(other) + "\n" + row.model_dump_json() + "\n")
    if other == run:
        assert load_rows(path)[0].run == run  # the same record twice (a file joined with itself) is one run
        return
    for read in (load_rows, read_rows, lambda p: list(RowSource(p).rows())):
        with pytest.raises(UsageError) as caught:
            read(path)
        assert f"(field {field})" in str(caught.value) and str(path) in str(caught.value)


def test_a_row_of_an_older_version_is_read_with_the_run_its_own_fields_state(tmp_path):
    identity = RunIdentity(assistant="botA", assistant_kind="python", user_model="u", judge_model="j", data="d",
                           floors="f", testkit="0.1.0")
    old = {"schema_version": 1, "run_id": "old", "scenario_id": "user1-SD-Alarm-task-1", "status": "passed",
           "assistant": "botA", "assistant_kind": "python", "judge_model": "j", "identity": identity.model_dump()}
    new_run = RunInfo(run_id="new", assistant="botB")
    new = ResultRow(run=new_run, run_id="new", scenario_id="user1-SD-Alarm-task-2", status="passed")
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(old) + "\n" + run_line(new_run) + "\n" + new.model_dump_json() + "\n")
    first, second = load_rows(path)
    assert (first.run_id, first.assistant, first.judge_model, first.identity) == ("old", "botA", "j", identity)
    assert (second.run_id, second.assistant, second.identity) == ("new", "botB", None)


def test_a_report_holds_its_rows_runs_and_reads_back_as_its_rows(tmp_path):
    from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
    from personalens_testkit.report.model import build_report
    from personalens_testkit.report.outputs import report_json

    run = RunInfo(run_id="r1", assistant="botA", judge_model="j")
    rows = [ResultRow(run=run, run_id="r1", scenario_id=f"user{n}-SD-Alarm-task-1", status="error") for n in range(3)]
    report = build_report(rows, load_thresholds(default_thresholds_path()), run=run.model_dump())
    path = tmp_path / "report.json"
    path.write_text("".join(report_json(report)))
    assert [r["run_id"] for r in json.loads(path.read_text())["runs"]] == ["r1"]
    assert [(r.scenario_id, r.run) for r in load_rows(path)] == [(r.scenario_id, run) for r in rows]


def test_a_run_record_goes_through_the_secret_redaction_as_rows_do(tmp_path, monkeypatch):
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("MY_BOT_API_KEY", secret)
    run = RunInfo(run_id="r1", assistant=f"http://bot.example/?key={secret}")
    writer = ResultsWriter(tmp_path / "results.jsonl")
    writer.write(ResultRow(run=run, run_id="r1", scenario_id="user1-SD-Alarm-task-1", status="passed"))
    writer.close()
    text = (tmp_path / "results.jsonl").read_text()
    assert secret not in text and "bot.example" in text


def test_a_row_whose_run_id_is_not_its_runs_is_refused():
    with pytest.raises(ValueError, match="run_id"):
        ResultRow(run=RunInfo(run_id="a"), run_id="b", scenario_id="user1-SD-Alarm-task-1", status="passed")


LINE_ENDS_OF_UNICODE = "\x85\u2028\u2029\r\x0b\x0c\x1c\x1d\x1e"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(st.sampled_from(LINE_ENDS_OF_UNICODE) | st.characters(codec="utf-8", exclude_categories=("Cs",)),
                        max_size=30), min_size=1, max_size=4))
def test_a_row_holding_any_unicode_line_end_reads_back_whole_through_every_reader(tmp_path_factory, replies):
    """JSON writes U+0085, U+2028 and U+2029 as they are inside a string: a reader that split lines where
    ``str.splitlines`` does read such a row (a bot's reply) as two broken lines and refused the file."""
    from personalens_testkit.results.fields import load_fields

    run = RunInfo(run_id="r1", assistant="bot\u2028A")
    rows = [ResultRow(run=run, run_id="r1", scenario_id=f"user{n}-SD-Alarm-task-1", status="passed",
                      transcript=[{"role": "assistant", "content": reply}]) for n, reply in enumerate(replies)]
    path = tmp_path_factory.mktemp("r") / "results.jsonl"
    write_rows(path, rows)
    expected = [(r.scenario_id, r.transcript, "bot\u2028A") for r in rows]
    for read in (load_rows, read_rows, lambda p: list(RowSource(p).rows())):
        assert [(r.scenario_id, r.transcript, r.assistant) for r in read(path)] == expected
    assert [f["transcript"] for f in load_fields(path, ("transcript",))] == [r.transcript for r in rows]
