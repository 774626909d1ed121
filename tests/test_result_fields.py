"""Some fields of a results file's records (results/fields.py) are what load_records reads, cut to those fields:
the same values type for type, or the same error - whatever the file holds."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import UsageError
from personalens_testkit.results.fields import _from_lines, load_fields
from personalens_testkit.results.files import load_records
from personalens_testkit.results.recorded import COMPARED, load_compared

NAMES = ("repeat", "finished_at", "scores")
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8) | st.sampled_from(["\u2028", "\x85", "\r", "\ufeff"])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
RECORD = st.dictionaries(st.sampled_from(["scenario_id", "repeat", "finished_at", "scores", "other", "calls"]), VALUES,
                         max_size=6)


def _loaded(read, path):
    try:
        return repr(read(path))  # repr: 1 is not 1.0 nor True, nan is nan
    except UsageError as exc:
        return f"UsageError: {exc}"


def _slow(path):
    return [{name: record[name] for name in ("scenario_id", *NAMES) if name in record}
            for record in load_records(path, what="recorded results")]


def _fast(path):
    return load_fields(path, NAMES, what="recorded results")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(RECORD, max_size=5), st.sampled_from(["\n", "\r\n", ""]), st.integers(0, 10 ** 6),
       st.binary(max_size=3), st.booleans())
def test_any_json_lines_file_reads_as_load_records_reads_it(tmp_path, records, end, where, spliced, damage):
    text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)[:-1] + end if records else end
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    if damage:  # a few bytes changed anywhere: torn lines, broken JSON, bytes that are not UTF-8
        at = where % (len(data) + 1)
        data[at:at + len(spliced)] = spliced
    path = tmp_path / "results.jsonl"
    path.write_bytes(bytes(data))
    assert _loaded(_fast, path) == _loaded(_slow, path)


PIECES = st.sampled_from(['{"scenario_id": "a", "scores": 1}', '{"scenario_id": "b"}', '{"repeat": 2}', "[", ",", "]",
                          '{"rows": [', "]}", '"x"', "", " ", "1" * 4301])
BREAKS = st.sampled_from(["\n", "\r", "\r\n", "\x85", "\u2028", "\x0b", "\x1c", " "])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(PIECES, BREAKS), max_size=7))
def test_pieces_of_json_on_any_line_breaks_read_as_load_records_reads_them(tmp_path, pieces):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(piece + end for piece, end in pieces), encoding="utf-8")
    assert _loaded(_fast, path) == _loaded(_slow, path)


@pytest.mark.parametrize("text", [
    '{"scenario_id": "a", "scores": 1}\n{"scenario_id": "b", "scores": 2}\n',  # the fast path
    '{"scenario_id": "a", "scores": {"x": 1, "x": [2]}}\n{"scenario_id": "b", "scenario_id": "c"}\n',  # repeated keys
    '{"scenario_id": "a", "scores": NaN}\n{"scenario_id": "b", "scores": -Infinity, "other": NaN}\n',
    '{"scenario_id": "a", "scores": "\\ud800"}\n{"scenario_id": "b"}\n',  # a lone surrogate, escaped
    '{"scenario_id": "a", "other": "\\udfff"}\n{"scenario_id": "b"}\n',  # in a field not asked for
    '{"scenario_id": "a", "scores": ' + "1" * 4301 + '}\n{"scenario_id": "b"}\n',  # json refuses 4,301 digits
    '{"scenario_id": "a", "scores": ' + "1" * 4300 + '}\n{"scenario_id": "b"}\n',
    '\ufeff{"scenario_id": "a"}\n{"scenario_id": "b"}\n',  # a byte order mark
    '{"scenario_id": "a"}\n{"repeat": 2}\n',  # a record without scenario_id
    '{"scenario_id": "a"}\n[1, 2]\n',  # a line that is no object
    '{"scenario_id": "a"}\n{"scenario_id": "b", "scores": 1}{"x": 1}\n',  # two values on a line
    '{"scenario_id": "a", "scores": "x\u2028y"}\n{"scenario_id": "b"}\n',  # a line separator inside a string
    '{"scenario_id": "a", "scores": 1e400, "repeat": 1.0000000000000002, "finished_at": -0.0}\n{"scenario_id": "b"}\n',
    '{"scenario_id": "a"}\n{"scenario_id": "b", "sco',  # a torn last line
    '{"scenario_id": "a"}\n\n   \n{"scenario_id": "b"}',  # blank lines, no final line break
    '{"scenario_id": "a", "scores": 3}\n',  # one row
    '{"rows": [{"scenario_id": "a", "scores": 3}], "run": {}}',  # a report
    '[\n{"scenario_id": "a"},\n{"scenario_id": "b"}\n]\n',  # a list, a record a line
    '[{"scenario_id": "a"}, {"scenario_id": "b"}]',
    '{"scenario_id": "a", "scores": ' + "[" * 5000 + "]" * 5000 + '}\n{"scenario_id": "b"}\n',  # nested too deep
    "[" * 5000 + "]" * 5000, '{"scenario_id": "a"}\n' + "[" * 5000,
    '[\r{"scenario_id": "a"}\n,\r{"scenario_id": "b"}\n,{"scenario_id": "c"}]',  # lone carriage returns: one list
    '{"rows": [\r{"scenario_id": "a"}\n,\r{"scenario_id": "b"}\n], "scenario_id": "z"}',
    '{"scenario_id": "a"}\r{"scenario_id": "b"}\n', '{"scenario_id": "a"}\x85{"scenario_id": "b"}\n',
    '{"scenario_id": "a", "v": 1}\n{"scenario_id": "b", "w": ' + "[" * 5000 + "]" * 5000 + "}",  # deep, no last break
    '', '\n\n', 'not json\nat all\n', '{"scenario_id": "a"} \n {"scenario_id": "b"}\t\n',
])
def test_a_file_read_apart_reads_alike(tmp_path, text):
    path = tmp_path / "results.jsonl"
    path.write_text(text, encoding="utf-8")
    assert _loaded(_fast, path) == _loaded(_slow, path)


def test_the_fast_path_reads_json_lines_and_steps_aside_for_anything_else():
    names = ("scenario_id", *NAMES)
    assert _from_lines('{"scenario_id": "a", "calls": [1]}\n{"scenario_id": "b"}\n', names) == [
        {"scenario_id": "a"}, {"scenario_id": "b"}]
    assert _from_lines('{"scenario_id": "a"}\n', names) is None  # one JSON value: load_records reads it
    assert _from_lines('{"scenario_id": "a"}\n{"repeat": 1}\n', names) is None  # its error is load_records'
    runs = '{"run": {"run_id": "r", "assistant": "botA"}}\n{"scenario_id": "a", "run_id": "r"}\n{"scenario_id": "b"}\n'
    assert _from_lines(runs, names) == [{"scenario_id": "a"}, {"scenario_id": "b"}]  # a run's record is no row's


def test_an_xz_file_and_a_missing_one_read_alike(tmp_path):
    path = tmp_path / "results.jsonl.xz"
    path.write_bytes(lzma.compress(b'{"scenario_id": "a", "scores": 1}\n{"scenario_id": "b"}\n'))
    assert _loaded(_fast, path) == _loaded(_slow, path)
    path.write_bytes(b"not xz")
    assert _loaded(_fast, path) == _loaded(_slow, path)
    assert _loaded(_fast, tmp_path / "gone.jsonl").startswith("UsageError: recorded results")


def test_the_shipped_recording_is_compared_on_the_fields_load_records_gives():
    path = Path(__file__).resolve().parent.parent / "cassettes" / "reference" / "results.jsonl.xz"
    compared = load_compared(path)
    records = load_records(path, what="recorded results")
    assert len(compared) == len(records) > 20
    for record in records:
        assert repr(compared[record["scenario_id"]]) == repr({name: record.get(name) for name in COMPARED})


@pytest.mark.parametrize(("text", "why"), [
    ('{"scenario_id": "a", "scores": ' + "1" * 4301 + "}\n", "4300 digits"),
    ('{\n  "rows": [{"scenario_id": "a", "scores": ' + "1" * 4301 + "}]\n}\n", "4300 digits"),  # a report, indented
    ("[" * 5000 + "]" * 5000, "recursion"),
    ('{"scenario_id": "a"}\n{"scenario_id": "b", "scores": ' + "[" * 5000 + "\n", "recursion"),
    ('{"scenario_id": "a"}\n{"scenario_id": "b", "scores": ' + "[" * 5000 + "]" * 5000 + "}", "recursion"),
])
def test_json_that_python_refuses_is_one_clear_line_naming_the_file_and_why(tmp_path, text, why):
    path = tmp_path / "results.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=r"^recorded results .*results\.jsonl: not JSON or JSON lines \(") as caught:
        load_fields(path, NAMES, what="recorded results")
    assert why in str(caught.value)
