"""Every bad data file is one line naming the file (and the line or field) and what is expected - at
``--collect-only`` as in a run, before any case or call; never an INTERNALERROR, a case that fails, a line skipped
or a cassette silently missing. The corruptions are composed: each data file the selected cases read x each way a
file goes bad."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project
from .test_reliability import assert_rows_are_cases, project, run_rows

#: the files user7's cases read, by what the test calls them
FILES = {
    "profile": "data/profile/user7/profile.json",
    "single-domain tasks": "data/profile/user7/tasks.json",
    "multi-domain tasks": "data/profile/user7/tasks_md.json",
    "catalogue": "data/task/Alarm/task.jsonl",
}


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"\xff\xfe" + path.read_bytes())


def _wrong_shape(path: Path) -> None:
    path.write_text('{"user_id": 7}\n' if path.suffix == ".json" else path.read_text() + '["not", "an", "object"]\n')


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _empty(path: Path) -> None:
    path.write_bytes(b"")


CORRUPTIONS = {"truncated": _truncated, "not UTF-8": _not_utf8, "wrong shape": _wrong_shape, "a folder": _folder,
               "empty": _empty}


def _error_lines(result: pytest.RunResult) -> list[str]:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-3000:]
    return [line for line in result.stdout.lines + result.stderr.lines if line.startswith("ERROR")]


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS))
@pytest.mark.parametrize("file", list(FILES))
def test_a_bad_data_file_is_one_line_naming_it_at_collection(pytester, data_copy, file, corrupt):
    path = data_copy / FILES[file]
    if corrupt == "empty" and file == "catalogue":
        pytest.skip("an empty catalogue file lists no task: nothing in it is wrong")
    CORRUPTIONS[corrupt](path)
    suite_project(pytester)
    result = pytester.runpytest_subprocess("--personalens-data", str(data_copy), "--profiles", "7", "--collect-only",
                                           timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    (line,) = _error_lines(result)
    assert str(path) in line or FILES[file] in line, line
    if file == "catalogue" and corrupt == "wrong shape":
        assert "line " in line, line


def test_a_truncated_profile_in_a_live_run_is_one_line_before_any_call(pytester, data_copy):
    _truncated(data_copy / FILES["profile"])
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake)
        result = pytester.runpytest_subprocess("--personalens-data", str(data_copy), "--profiles", "7",
                                               "--domains", "Alarm", "--record-mode", "all", timeout=120)
        assert not fake.requests
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    (line,) = _error_lines(result)
    assert "profile.json" in line and "not valid JSON" in line, line


@pytest.mark.parametrize("how", ["a folder", "a link to nothing"])
def test_a_cassette_that_is_not_a_file_is_one_line_naming_it(pytester, how):
    suite_project(pytester)
    cassettes = pytester.path / "cassettes" / "reference"
    shutil.copytree(Path(__file__).resolve().parent.parent / "cassettes" / "reference", cassettes)
    cassette = cassettes / "user7-SD-Alarm-task-1.json.xz"
    cassette.unlink()
    if how == "a folder":
        cassette.mkdir()
    else:
        cassette.symlink_to(cassettes / "nowhere.json.xz")
    result = pytester.runpytest_subprocess("--profiles", "7", "--collect-only", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    (line,) = _error_lines(result)
    assert str(cassette) in line and f"is {how}: a cassette is a file" in line, line


def test_swapped_cassettes_are_each_an_error_naming_the_file_never_blamed_on_a_model(pytester):
    """Two cassettes under each other's names (a rename gone wrong, a merge): each knows the scenario it records,
    so each case is an error of its cassette naming the file and the scenario it holds - not a replay miss of the
    user agent's first call - and rows written == cases run."""
    suite_project(pytester)
    cassettes = pytester.path / "cassettes" / "reference"
    shutil.copytree(Path(__file__).resolve().parent.parent / "cassettes" / "reference", cassettes)
    alarm, books = cassettes / "user7-SD-Alarm-task-1.json.xz", cassettes / "user107-SD-Books-task-1.json.xz"
    swap = alarm.read_bytes()
    alarm.write_bytes(books.read_bytes())
    books.write_bytes(swap)
    result, rows = run_rows(pytester, "test_single_domain.py::test_single_domain[user7-SD-Alarm-task-1]",
                            "test_single_domain.py::test_single_domain[user107-SD-Books-task-1]",
                            "test_single_domain.py::test_single_domain[user230-SD-Buses-task-1]")
    assert_rows_are_cases(result, rows)
    by_id = {row["scenario_id"]: row for row in rows}
    assert by_id["user230-SD-Buses-task-1"]["status"] == "passed"
    for path, holds in ((alarm, "user107-SD-Books-task-1"), (books, "user7-SD-Alarm-task-1")):
        row = by_id[path.name.removesuffix(".json.xz")]
        assert row["status"] == "error" and row["error"]["source"] == "setup", row["error"]
        assert f"{path}: holds the recording of scenario {holds!r}" in row["error"]["message"], row["error"]["message"]
