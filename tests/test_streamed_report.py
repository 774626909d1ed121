"""The end of a run keeps one digest a case and reads whole rows again from the results file (issue 22): its
report must be the report built from the whole rows in memory - every figure to the last digit, every file the
same text - whatever the rows hold (errors of every source, unreadable answers, repeats, second judgements,
changed replies, live and replayed calls), and a foreign or doubled line changes neither."""

from __future__ import annotations

import errno
import io
import json
import random
import re

import pytest

from personalens_testkit.costs.prices import load_prices
from personalens_testkit.gating.compare import compare_rows
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
from personalens_testkit.report.html import render_html
from personalens_testkit.report.junit import junit_xml
from personalens_testkit.report.markdown import render_markdown
from personalens_testkit.report.model import build_report, tally_rows
from personalens_testkit.report.outputs import report_json
from personalens_testkit.results.digest import RowDigest
from personalens_testkit.results.files import ResultsWriter, read_rows
from personalens_testkit.results.rows import ResultRow
from personalens_testkit.results.source import RowSource
from personalens_testkit.scales import METRICS

DOMAINS = ["Alarm", "Books", "Music", "Travel"]
SOURCES = ["assistant", "judge", "user_agent", "setup"]


def _scores(rng: random.Random) -> dict:
    return {m.name: (rng.random() < 0.8) if m.kind == "bool" else rng.randint(int(m.low), int(m.high)) for m in METRICS}


def _calls(rng: random.Random) -> list[dict]:
    return [{"role": rng.choice(["user_agent", "assistant", "judge"]), "label": "x", "turn": n, "seconds": rng.random(),
             "prompt_tokens": rng.choice([None, rng.randint(10, 5000)]), "completion_tokens": rng.randint(1, 300),
             "attempts": rng.choice([1, 1, 2]), "cache_read_tokens": rng.choice([None, 64]),
             "replayed": rng.random() < 0.7} for n in range(rng.randint(0, 12))]


def _row(rng: random.Random, n: int, repeat: int) -> dict:
    kind = "md" if n % 5 == 0 else "sd"
    row = {"run_id": "r1", "scenario_id": f"user{n}-{kind.upper()}-task-{n % 3}", "repeat": repeat, "task_kind": kind,
           "domains": rng.sample(DOMAINS, 2 if kind == "md" else 1), "user_model": "openai:gpt-4o-mini",
           "judge_model": rng.choice(["openai:gpt-4o", "bedrock:unknown-model"]), "assistant": "bot",
           "assistant_model": rng.choice([None, "openai:gpt-4.1-mini"]), "calls": _calls(rng), "turns": rng.randint(1, 20),
           "seconds": rng.random() * 9, "finished_at": f"2026-11-26T10:{n % 60:02d}:00+00:00",
           "transcript": [{"role": "user", "content": f"hello {n} <b>&"}], "cassette": f"c/{n}.json.xz"}
    fate = rng.random()
    if fate < 0.12:
        kind_ = rng.choice(["ModelError", "ReplyChangedError"])
        row.update(status="error", error={"kind": kind_, "phase": "dialogue", "message": f"failed {n}\nsecond line",
                                          "source": rng.choice(SOURCES)})
    elif fate < 0.2:
        partial = _scores(rng)
        dropped = rng.sample([m.name for m in METRICS], 2)
        partial.update(dict.fromkeys(dropped, None))
        row.update(status="error", partial_scores=partial, unreadable=dict.fromkeys(dropped, "hedged"),
                   error={"kind": "JudgeAnswerError", "phase": "judging", "message": "unreadable", "source": "judge"})
    else:
        scores = _scores(rng)
        row.update(status=rng.choice(["passed", "failed"]), scores=scores, verdict=rng.choice(["pass", "regression"]),
                   expected=rng.choice([None, "pass", "fail personalization"]))
        if row["status"] == "failed":
            row["shortfalls"] = [{"metric": "personalization", "value": scores["personalization"], "floor": 2}]
    if rng.random() < 0.2:
        row["retest"] = ({"scores": _scores(rng), "first": rng.choice(["live", "replayed"]), "second": "live"}
                         if rng.random() < 0.8 else {"error": "judging again failed"})
    if rng.random() < 0.1:
        row["reply_change"] = {"turn": 2, "recorded": "old reply", "reply": "new reply"}
    if rng.random() < 0.1:
        row["injection_flags"] = [{"turn": 1, "kind": "score claim", "excerpt": "give 4", "removed": rng.random() < 0.5}]
    if rng.random() < 0.3:
        row["turn_personalization"] = [rng.randint(1, 4) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.2:
        row["preference_leak"] = {"leaked": rng.random() < 0.3}
    if rng.random() < 0.05:
        row["analysis_errors"] = {"turn_level": "the analysis failed"}
    return row


def _results(tmp_path, rng: random.Random) -> tuple:
    writer = ResultsWriter(tmp_path / "results.jsonl")
    records = [_row(rng, n, repeat) for n in range(160) for repeat in ((1, 2) if n % 7 == 0 else (1,))]
    for record in records:
        writer.write(ResultRow.model_validate(record))
    older = dict(records[3], finished_at="2026-11-26T09:00:00+00:00", status="error", scores=None,
                 error={"kind": "ModelError", "phase": "x", "message": "older try", "source": "judge"})
    writer.write(ResultRow.model_validate(older))  # a doubled case: its newer row stands
    writer.write(ResultRow.model_validate(records[5]))  # the same row twice
    writer.close()
    with open(writer.path, "a", encoding="utf-8") as handle:  # a line the run did not write, then a torn one
        handle.write(json.dumps(dict(records[8], scenario_id="user999-SD-task-1")) + "\n" + '{"scenario_id": "to')
    return writer.path, writer.written


def _same_moment(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "T", text)


def test_a_report_from_digests_is_the_report_from_whole_rows(tmp_path):
    path, written = _results(tmp_path, random.Random(22))
    thresholds, prices = load_thresholds(default_thresholds_path()), load_prices()
    rows = read_rows(path, written=written)
    source = RowSource(path, written=written)
    digests, tallied = tally_rows(source, prices)
    assert len(digests) == len(rows) == 160 + 23 and all(isinstance(d, RowDigest) for d in digests)
    assert [d.case_id for d in digests] == [r.case_id for r in rows]
    base = rows[::2]  # a baseline: every other case
    settings = {"completion_counting": "ours"}
    whole = build_report(rows, thresholds, run={"run_id": "r1"}, settings=settings, prices=prices, baseline=base,
                         comparison=compare_rows(base, rows, margin=0.1))
    streamed = build_report(digests, thresholds, run={"run_id": "r1"}, settings=settings, prices=prices, baseline=base,
                            comparison=compare_rows(base, digests, margin=0.1), source=source, tallied=tallied)
    assert whole.changes and whole.verdict.failures  # the set is varied enough to show changes and failures
    for render in (lambda r: "".join(report_json(r)), lambda r: "".join(junit_xml(r)), render_html, render_markdown):
        assert _same_moment(render(streamed)) == _same_moment(render(whole))
    data = json.loads("".join(report_json(streamed)))
    assert len(data["rows"]) == len(data["ledger"]["per_scenario"]) == 183
    assert data["cost"]["total_spent"] is None and data["cost"]["known_spent"] > 0  # an unpriced model, priced calls


def test_the_html_page_shows_a_bounded_number_of_dialogues_those_that_did_not_pass_first(tmp_path, monkeypatch):
    from personalens_testkit.report import html

    path, written = _results(tmp_path, random.Random(7))
    source = RowSource(path, written=written)
    digests, tallied = tally_rows(source, load_prices())
    report = build_report(digests, load_thresholds(default_thresholds_path()), source=source, tallied=tallied)
    monkeypatch.setattr(html, "DIALOGUES_SHOWN", 10)
    page = render_html(report)
    shown = re.findall(r"<details class='dialogue'[^>]*data-verdict='([^']*)'", page)
    not_passed = sum(report.verdict.of(d.case_id, d.status) != "pass" for d in digests)
    assert len(shown) == 10 and not_passed >= 10 and "pass" not in shown
    assert f"{len(digests) - 10:,} more dialogues are not shown here" in page


def test_a_results_file_rewritten_after_its_rows_were_chosen_is_never_shown_as_the_run(tmp_path):
    path, written = _results(tmp_path, random.Random(3))
    source = RowSource(path, written=written)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"personalization":', '"personalization": ', 1), encoding="utf-8")  # one byte more
    from personalens_testkit.errors import StorageError

    with pytest.raises(StorageError, match="changed while its rows were read"):
        list(source.lines())


class _FullFolder(io.RawIOBase):
    """A temporary file's bytes on a folder with room for ``room`` of them (a full /tmp)."""

    def __init__(self, room: int) -> None:
        self.room, self.data, self.position = room, bytearray(), 0

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.position + len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.data[self.position:self.position + len(data)] = data
        self.position += len(data)
        return len(data)

    def readinto(self, buffer) -> int:
        chunk = self.data[self.position:self.position + len(buffer)]
        buffer[:len(chunk)] = chunk
        self.position += len(chunk)
        return len(chunk)

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = (offset, self.position + offset, len(self.data) + offset)[whence]
        return self.position

    def tell(self) -> int:
        return self.position


@pytest.mark.parametrize("share", [None, 0.0, 0.5, 0.99, 1.0])
def test_report_json_is_the_same_whether_the_per_case_ledger_was_spooled_or_its_spool_could_not_be_written(
        tmp_path, monkeypatch, share):
    """``share``: the room the temporary folder has, as a share of the spool's size (None: no file can be made there);
    a buffered file meets a full folder when its buffer is written, during the rows or at their end."""
    from personalens_testkit.report import ledger

    path, written = _results(tmp_path, random.Random(11))
    thresholds, prices = load_thresholds(default_thresholds_path()), load_prices()
    source = RowSource(path, written=written)
    digests, tallied = tally_rows(source, prices)
    entries = list(tallied[0].spooled_entries())
    spooled = "".join(report_json(build_report(digests, thresholds, prices=prices, source=source, tallied=tallied)))
    size = sum(len(entry.encode("utf-8")) + 1 for entry in entries)

    def temporary_file() -> object:
        if share is None:
            raise OSError(errno.ENOSPC, "No space left on device")
        return io.BufferedRandom(_FullFolder(int(size * share)))

    monkeypatch.setattr(ledger.tempfile, "TemporaryFile", temporary_file)
    digests, tallied = tally_rows(source, prices)
    assert (tallied[0].spooled_entries() is None) == (share != 1.0)  # else the rows are read again
    again = build_report(digests, thresholds, prices=prices, source=source, tallied=tallied)
    assert _same_moment("".join(report_json(again))) == _same_moment(spooled)
    again.ledger.close()  # as the end of a run lets go of it: a report drawn again reads the rows again
    assert again.ledger.spooled_entries() is None
    assert _same_moment("".join(report_json(again))) == _same_moment(spooled)
    assert len(json.loads(spooled)["ledger"]["per_scenario"]) == len(entries) == 183
