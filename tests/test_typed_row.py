"""A result row's closed fields are typed (issue 47, item 5): a case's verdict, the source an error is counted
against and the status are each one of their few values - a results file holding any other is refused in one
line naming the file and the field, never read as a verdict - and a role's usage is named figures, an older
recording's positional list read as the same figures."""

from __future__ import annotations

import json
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import ErrorSource, UsageError
from personalens_testkit.results.files import load_rows
from personalens_testkit.results.recorded import slim
from personalens_testkit.results.rows import USAGE_FIELDS, CaseVerdict, ResultRow, RoleUsage

VERDICTS = typing.get_args(CaseVerdict)
SOURCES = typing.get_args(ErrorSource)
BASE = {"scenario_id": "user7-SD-Alarm-task-1", "status": "passed", "scores": {
    "task_completion": True, "personalization": 3, "naturalness_user": 4, "naturalness_assistant": 4,
    "coherence_user": 4, "coherence_assistant": 4}}
ERROR = {"scenario_id": "user7-SD-Alarm-task-1", "status": "error",
         "error": {"kind": "ModelError", "phase": "the dialogue", "message": "the bot failed"}}


def _file(tmp_path, row: dict) -> str:
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VERDICTS) | st.text(max_size=20))
def test_a_verdict_is_one_of_the_case_verdicts_or_the_row_is_refused_naming_it(tmp_path_factory, verdict):
    path = _file(tmp_path_factory.mktemp("r"), {**BASE, "verdict": verdict})
    if verdict in VERDICTS:
        (row,) = load_rows(path)
        assert row.verdict == verdict
        return
    with pytest.raises(UsageError) as caught:
        load_rows(path)
    assert "verdict" in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SOURCES) | st.text(max_size=20))
def test_an_error_is_counted_against_one_of_the_sources_or_the_row_is_refused(tmp_path_factory, source):
    path = _file(tmp_path_factory.mktemp("r"), {**ERROR, "error": {**ERROR["error"], "source": source}})
    if source in SOURCES:
        (row,) = load_rows(path)
        assert row.error.source == source
        return
    with pytest.raises(UsageError) as caught:
        load_rows(path)
    assert "source" in str(caught.value)


FIGURES = st.lists(st.integers(min_value=0, max_value=10**9), max_size=len(USAGE_FIELDS))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["user_agent", "assistant", "judge"]), FIGURES, max_size=3))
def test_an_older_recordings_usage_lists_read_as_named_figures_and_write_named(usage):
    row = ResultRow.model_validate({**BASE, "usage": usage})
    for role, figures in usage.items():
        padded = (*figures, *[0] * (len(USAGE_FIELDS) - len(figures)))
        assert row.usage_by_role()[role].figures() == padded
        assert row.usage_by_role()[role].model_dump() == dict(zip(USAGE_FIELDS, padded))
    written = json.loads(slim(row).model_dump_json())["usage"]
    assert written == (None if not usage else {role: dict(zip(USAGE_FIELDS, row.usage_by_role()[role].figures()))
                                               for role in usage})
    assert ResultRow.model_validate_json(slim(row).model_dump_json()).usage_by_role() == row.usage_by_role()


def test_usage_counted_from_the_calls_is_the_same_named_figures():
    calls = [{"role": "judge", "label": "scores", "turn": 0, "seconds": 1.0, "prompt_tokens": 10,
              "completion_tokens": 2, "cache_read_tokens": 5},
             {"role": "judge", "label": "scores", "turn": 0, "seconds": 1.0, "prompt_tokens": 7}]
    row = ResultRow.model_validate({**BASE, "calls": calls})
    assert row.usage_by_role() == {"judge": RoleUsage(calls=2, prompt_tokens=17, completion_tokens=2,
                                                      cache_read_tokens=5, cache_write_tokens=0)}


def test_more_figures_than_named_is_refused():
    with pytest.raises(ValueError, match="at most 5 figures"):
        RoleUsage.model_validate([1, 2, 3, 4, 5, 6])
