"""--otel-endpoint: each scenario a trace, sent by the OpenTelemetry SDK's own OTLP/HTTP exporter to a real receiver on
loopback that decodes the protocol (tests/support/otlp_receiver.py). What is checked: one trace per case and nothing
crossed (xdist workers, --concurrency lanes), the tree (case -> dialogue -> turns -> calls; judging -> calls), the
GenAI attributes against the row, replayed calls marked, every score a gen_ai.evaluation.result log record parented to
its dialogue's span, errors with their cause, contents only when asked, no secret in any spelling, and a dead collector
one line with the same rows and verdict."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .support.fake_llm import FakeLLM, Script
from .support.otlp_receiver import OTLPReceiver
from .support.project import latest_results, read_rows, suite_project

SECRET = "sk-live-0123456789abcdef"
BASE = ("-p", "no:deepeval", "--user-model", "openai:fake-user", "--assistant-model", "openai:fake-bot",
        "--judge-model", "openai:fake-judge", "--profiles", "7", "--domains", "Alarm")


def _run(pytester, monkeypatch, *args, script=None, endpoint=None, mode="all"):
    """A run (live and recorded, or replayed) with its traces sent to a receiver: (rows, receiver, the run's output)."""
    monkeypatch.setenv("SERVICE_API_KEY", SECRET)
    with FakeLLM(script or Script(terminate_after=2, vary_assistant_text=True)) as fake, OTLPReceiver() as receiver:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        suite_project(pytester, f'record_mode = "{mode}"\n')
        result = pytester.runpytest_subprocess(*BASE, "--otel-endpoint", endpoint or receiver.url, *args, timeout=120)
    return read_rows(latest_results(pytester.path)), receiver, result


def _traces(receiver):
    by_trace: dict[str, list[dict]] = {}
    for span in receiver.spans:
        by_trace.setdefault(span["trace_id"], []).append(span)
    return by_trace


def _check_tree(rows, receiver, *, content: bool):
    traces = _traces(receiver)
    assert len(traces) == len(rows)  # one trace a case
    roots = {}
    for trace_id, spans in traces.items():
        ids = {s["span_id"]: s for s in spans}
        [root] = [s for s in spans if not s["parent_id"]]
        assert all(s["parent_id"] in ids for s in spans if s is not root)  # every parent in the same trace
        roots[root["attributes"]["personalens.case.id"]] = (root, spans)
    for row in rows:
        root, spans = roots[row["scenario_id"]]
        attributes = root["attributes"]
        assert attributes["personalens.run.id"] == row["run_id"] == root["resource"]["personalens.run.id"]
        assert attributes["personalens.profile"] == row["user_id"] and attributes["personalens.domains"] == row["domains"]
        assert attributes["personalens.status"] == row["status"]
        conversation = attributes["gen_ai.conversation.id"]
        calls = [s for s in spans if s["kind"] == 3]  # CLIENT
        assert len(calls) == len(row["calls"])
        assert all(s["attributes"]["gen_ai.conversation.id"] == conversation for s in calls)
        for call, logged in zip(sorted(calls, key=lambda s: s["start"]), row["calls"]):
            assert call["attributes"]["personalens.role"] == logged["role"]
            assert call["attributes"].get("gen_ai.usage.input_tokens") == logged["prompt_tokens"]
            assert call["attributes"]["personalens.call.replayed"] == logged["replayed"]
            assert call["attributes"]["gen_ai.request.model"] == {"user_agent": "fake-user", "assistant": "fake-bot",
                                                                  "judge": "fake-judge"}[logged["role"]]
        names = Counter(s["name"] for s in spans)
        assert names["dialogue"] == 1 and names["judging"] == 1 and names["turn 0"] == 1
        dialogue = next(s for s in spans if s["name"] == "dialogue")
        events = [e for e in receiver.events if e["attributes"].get("gen_ai.conversation.id") == conversation]
        assert all(e["event_name"] == "gen_ai.evaluation.result" and e["trace_id"] == dialogue["trace_id"]
                   and e["span_id"] == dialogue["span_id"] for e in events)
        scores = {e["attributes"]["gen_ai.evaluation.name"]: e["attributes"]["gen_ai.evaluation.score.value"]
                  for e in events}
        assert scores == {k: float(v) for k, v in row["scores"].items() if v is not None}
        said = [s["attributes"].get("gen_ai.output.messages") for s in calls if s["attributes"]["personalens.role"] != "judge"]
        assert all(said) if content else not any(said)
        assert all(("gen_ai.evaluation.explanation" in e["attributes"]) == content for e in events)
    everything = b"".join(receiver.bodies)
    assert SECRET.encode() not in everything
    transcript_text = rows[0]["transcript"][1]["content"].encode()
    assert (transcript_text in everything) == content


@pytest.mark.parametrize("args", [(), ("--concurrency", "3", "--otel-content"), ("-n", "2", "--otel-content")])
def test_every_case_is_one_trace_of_its_own_with_its_calls_scores_and_no_secret(pytester, monkeypatch, args):
    script = Script(terminate_after=2, vary_assistant_text=True, assistant_text=f"Done; your key is {SECRET}.")
    rows, receiver, result = _run(pytester, monkeypatch, *args, script=script)
    assert rows and all(r["scores"] for r in rows)
    _check_tree(rows, receiver, content="--otel-content" in args)
    assert f"traces: {len(rows)} case(s) sent to" in result.stdout.str()


def test_a_replay_marks_every_call_replayed_and_an_error_row_is_the_cases_error(pytester, monkeypatch):
    _run(pytester, monkeypatch)  # recorded
    rows, receiver, _ = _run(pytester, monkeypatch, mode="none")
    calls = [s for s in receiver.spans if s["kind"] == 3]
    assert calls and all(s["attributes"]["personalens.call.replayed"] is True for s in calls)
    # a judge whose answers the grammar refuses: the cases' errors, on their spans
    script = Script(terminate_after=2, judge_text="I would rather not say.")
    rows, receiver, _ = _run(pytester, monkeypatch, "--rejudge", script=script)
    failed = [r for r in rows if r["error"]]
    assert failed
    for row in failed:
        root = next(s for s in receiver.spans if not s["parent_id"]
                    and s["attributes"]["personalens.case.id"] == row["scenario_id"])
        assert root["status"] == 2 and root["attributes"]["error.type"] == row["error"]["kind"]
        assert row["error"]["kind"] in root["status_message"]


def test_a_dead_collector_is_one_line_and_the_rows_and_verdict_are_the_same(pytester, monkeypatch):
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}"
    rows, _, result = _run(pytester, monkeypatch, endpoint=dead)
    out = result.stdout.str()
    assert [line for line in out.splitlines() if "traces:" in line] == [
        next(line for line in out.splitlines() if "traces:" in line)]
    assert "dropped" in out and "the rows and the verdict are the same without them" in out
    assert "Traceback" not in out + result.stderr.str() and "Failed to export" not in out + result.stderr.str()
    plain = pytester.runpytest_subprocess(*BASE, "--record-mode", "none")
    again = read_rows(latest_results(pytester.path))
    assert [(r["scenario_id"], r["scores"], r["verdict"]) for r in rows] == \
        [(r["scenario_id"], r["scores"], r["verdict"]) for r in again]
    assert plain.ret == result.ret


@pytest.mark.parametrize("args, said", [
    (("--otel-endpoint", "localhost:4318"), "--otel-endpoint: 'localhost:4318' is not an OTLP/HTTP endpoint"),
    (("--otel-content",), "--otel-content: only with --otel-endpoint"),
])
def test_a_bad_endpoint_or_content_without_one_is_one_line(pytester, args, said):
    suite_project(pytester, 'record_mode = "none"\n')
    result = pytester.runpytest_subprocess(*BASE, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and said in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_off_nothing_is_made_and_no_exporter_is_loaded(tmp_path):
    from personalens_testkit.run import traces
    from personalens_testkit.settings.model import RunSettings

    traces.export_case(RunSettings(), tmp_path, "run", None, "{}")  # type: ignore[arg-type]
    traces.finish(tmp_path)
    assert not traces._OPEN and not (tmp_path / traces.FOLDER).exists()
    assert traces.summary(RunSettings(), tmp_path) == []


def test_without_the_extra_the_run_says_how_to_install_it(monkeypatch):
    import importlib.util

    from personalens_testkit.errors import UsageError
    from personalens_testkit.run import traces

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("opentelemetry.exporter") else real(name, *a))
    with pytest.raises(UsageError, match=r"pip install 'personalens-testkit\[otel\]'"):
        traces.check_installed()


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["http://c:4318", "https://collector.example/otlp", "http://127.0.0.1:4318/"]),
       st.sampled_from(["", "/v1/traces", "/v1/logs"]))
def test_the_endpoint_given_whole_or_as_its_base_reaches_the_same_collector(base, tail):
    from personalens_testkit.run.traces import endpoint_base

    assert endpoint_base(base.rstrip("/") + tail) == base.rstrip("/")


def test_the_attributes_hold_no_none_and_no_secret_in_any_spelling(monkeypatch):
    from personalens_testkit.run.traces import _clean

    monkeypatch.setenv("SERVICE_API_KEY", SECRET)
    cleaned = _clean({"a": None, "b": f"x {SECRET} y", "c": [SECRET, "ok"], "d": 3, "e": json.dumps({"k": SECRET})})
    assert "a" not in cleaned and SECRET not in json.dumps(cleaned) and cleaned["d"] == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.booleans()), min_size=1, max_size=20))
def test_a_collector_that_does_not_take_a_batch_is_given_up_at_once(batches):
    """Whatever the collector answers, batch after batch: what it took is counted as sent; after the first batch it
    does not take, no batch reaches it (a dead or hung collector costs one time-out, not one a batch)."""
    from personalens_testkit.run.traces import _Watched

    asked: list[int] = []

    class Inner:
        def __init__(self):
            self.answers = iter(ok for _, ok in batches)

        def export(self, batch):
            asked.append(len(batch))
            return "ok" if next(self.answers) else "failed"

    watched = _Watched(Inner(), "ok", "failed")
    results = [watched.export([0] * size) for size, _ in batches]
    first_failure = next((i for i, (_, ok) in enumerate(batches) if not ok), len(batches))
    assert len(asked) == min(first_failure + 1, len(batches))
    assert watched.sent == sum(size for size, _ in batches[:first_failure])
    assert results[first_failure:] == ["failed"] * (len(batches) - first_failure)


def test_the_exporters_complaints_are_taken_only_while_they_export_for_us():
    """What the OTLP exporter logs while exporting our spans is the run's one line's cause, and printed nowhere; what
    it logs for anyone else in the process (the bot's own telemetry) goes where it always goes."""
    import logging

    from personalens_testkit.run.traces import _LOGGERS, _EXPORTING, _Taken

    taken, seen = _Taken(), []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logging.getLogger(_LOGGERS[0])
    keep = Keep()
    logger.addFilter(taken)
    logger.addHandler(keep)
    try:
        logger.warning("the bot's collector is down")
        _EXPORTING.ours = True
        logger.warning("ours is down\x00\x1b[31m")
        logger.warning("and again")
        _EXPORTING.ours = False
        logger.warning("the bot's again")
    finally:
        logger.removeFilter(taken)
        logger.removeHandler(keep)
    assert seen == ["the bot's collector is down", "the bot's again"]
    assert taken.first is not None and taken.first.startswith("ours is down") and taken.first.isprintable()


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=30_000))
def test_no_attribute_is_longer_than_a_collector_takes(text):
    from personalens_testkit.run.traces import MAX_TEXT, _clean

    cleaned = _clean({"t": text, "l": [text]})
    assert len(cleaned["t"]) <= MAX_TEXT + 40 and all(len(x) <= MAX_TEXT + 40 for x in cleaned["l"])
    assert cleaned["t"] == text if len(text) <= MAX_TEXT else cleaned["t"].endswith(f"({len(text):,} characters)")


@pytest.mark.parametrize("bad", ["http://", "http://host:99999", "http://[::1", "http://x y", "ftp://host:4318",
                                 "host:4318", "http://:4318"])
def test_a_malformed_endpoint_is_one_line_before_any_case(pytester, bad):
    suite_project(pytester, 'record_mode = "none"\n')
    result = pytester.runpytest_subprocess(*BASE, "--otel-endpoint", bad)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "is not an OTLP/HTTP endpoint" in result.stderr.str()


def test_the_collectors_key_in_the_sdks_headers_variable_is_a_secret(pytester, monkeypatch):
    key = "hcKEY-0123456789abcdef"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-honeycomb-team={key},Authorization=Basic%20dXNlcjpwYXNzd29yZA==")
    script = Script(terminate_after=2, vary_assistant_text=True,
                    assistant_text=f"Your team key is {key}; the other is dXNlcjpwYXNzd29yZA==.")
    rows, receiver, _ = _run(pytester, monkeypatch, "--otel-content", script=script)
    everything = b"".join(receiver.bodies) + json.dumps(rows).encode()
    assert key.encode() not in everything and b"dXNlcjpwYXNzd29yZA==" not in everything
    assert b"<OTEL_EXPORTER_OTLP_HEADERS>" in everything


def test_a_collector_that_trickles_its_answer_never_holds_the_run(pytester, monkeypatch):
    """A collector that answers one byte a second: the run ends all the same (what is not sent in the flush's bound
    is counted as dropped), with its rows and one line."""
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            server.settimeout(0.2)
            try:
                conn, _ = server.accept()
            except OSError:
                continue

            def feed(conn=conn):
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                    while not stop.is_set():
                        conn.sendall(b"x")
                        time.sleep(1)
                except OSError:
                    pass
            threading.Thread(target=feed, daemon=True).start()

    threading.Thread(target=trickle, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        rows, _, result = _run(pytester, monkeypatch, endpoint=url)
    finally:
        stop.set()
        server.close()
    out = result.stdout.str()
    assert rows and "traces:" in out and "dropped" in out and "Traceback" not in out + result.stderr.str()


def test_a_call_that_failed_is_a_span_of_its_own_with_its_error(pytester, monkeypatch):
    """The first call of the run is refused (429) and not retried: its case is an error row, and its trace shows the
    failed call itself - its role, its turn, ERROR with the error's kind - beside the case's and the dialogue's."""
    rows, receiver, _ = _run(pytester, monkeypatch, "--retries", "0",
                             script=Script(terminate_after=2, vary_assistant_text=True, fail_first=1))
    [failed_row] = [r for r in rows if r["error"]]
    root = next(s for s in receiver.spans if not s["parent_id"]
                and s["attributes"]["personalens.case.id"] == failed_row["scenario_id"])
    mine = [s for s in receiver.spans if s["trace_id"] == root["trace_id"]]
    [call] = [s for s in mine if s["kind"] == 3 and s["status"] == 2]
    assert call["attributes"]["personalens.role"] == "user_agent" and call["attributes"]["personalens.call.turn"] == 0
    assert call["attributes"]["error.type"] and call["attributes"]["error.type"] in call["status_message"]
    by_id = {s["span_id"]: s for s in mine}
    assert by_id[call["parent_id"]]["name"] == "turn 0" and root["status"] == 2
    assert len([s for s in mine if s["kind"] == 3]) == len(failed_row["calls"]) + 1  # the answered ones, and it
