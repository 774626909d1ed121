"""Every read of ours is bounded, and a broken cassette names itself (issue 19, items 4 and 5).

Tried through the real path - a pytest run in a subprocess, its peak memory measured from a small
parent (see test_reliability's ten-megabyte replies): an xz bomb committed as a cassette, a cassette
that is truncated, empty, not JSON or not a cassette of ours, and an HTTP bot that streams far more
than a reply may take while the run records. Each is one error row naming the file (or the bot) and
what is wrong, with the cause's source; rows written == cases run, and memory stays bounded.
"""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from personalens_testkit.files import BoundedReadError, read_xz
from personalens_testkit.replay.store import MAX_CASSETTE_BYTES

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows, suite_project
from .test_reliability import ALARM, LIVE, PEAK_RSS, assert_rows_are_cases, project, run_rows

#: nothing listens there: a replay that tried to call a model would fail
DEAD = "http://127.0.0.1:9/v1"
MIB = 1 << 20


def replay_project(pytester: pytest.Pytester, cassettes: dict[str, bytes]) -> Path:
    """A project whose models would replay offline, holding these cassette files for the reference assistant."""
    suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                            f'assistant_model = "openai:fake-bot"\nopenai_base_url = "{DEAD}"\n')
    folder = pytester.path / "cassettes" / "reference"
    folder.mkdir(parents=True)
    for scenario, data in cassettes.items():
        (folder / f"{scenario}.json.xz").write_bytes(data)
    return folder


def peak_rss_kib(pytester: pytest.Pytester, *args: str) -> int:
    """The peak memory (KiB) of a pytest run of the project, measured from a small parent."""
    measured = subprocess.run([sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "pytest", *args,
                               "-p", "no:cacheprovider"], cwd=pytester.path, capture_output=True, text=True, timeout=300)
    return int(measured.stdout.strip().splitlines()[-1])


def xz_of_zeros(size: int) -> bytes:
    """One xz stream of ``size`` zero bytes, compressed a chunk at a time (a few KB for hundreds of MB)."""
    compressor = lzma.LZMACompressor(preset=0)
    chunk = bytes(8 * MIB)
    parts = [compressor.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts) + compressor.flush()


# -- 4. an xz bomb committed as a cassette ----------------------------------------------------------

def test_an_xz_bomb_cassette_is_an_error_naming_the_file_and_the_cap_in_bounded_memory(pytester):
    bomb = xz_of_zeros(MAX_CASSETTE_BYTES + 64 * MIB)  # 320 MiB of zeros: about 45 KB of xz
    assert len(bomb) < 100_000
    replay_project(pytester, {"user7-SD-Alarm-task-1": bomb})
    peak_kib = peak_rss_kib(pytester, *ALARM)
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    (row,) = read_rows(results)
    assert row["status"] == "error" and row["error"]["source"] == "setup", row["error"]
    message = row["error"]["message"]
    assert "cassettes/reference/user7-SD-Alarm-task-1.json.xz: decompresses to more than 256 MiB" in message, message
    assert "MAX_CASSETTE_BYTES" in message and "please report" not in message
    # KiB: the cap bounds it (256 MiB of the bomb read, nothing more): 360 MB; before, the whole bomb and its text:
    # 753 MB (4.3 GB for the 2 GiB bomb of issue 19, 312 KB of xz)
    assert peak_kib < 256 * 1024 + 250_000, peak_kib


# -- 5. a broken cassette names itself and what is wrong with it ---------------------------------------

VALID = {"version": 1, "interactions": []}
BROKEN = {
    "user7-SD-Alarm-task-1": (lzma.compress(b'{"version": 1, "interactions": [{"request": '), "not JSON"),
    "user7-SD-Alarm-task-2": (lzma.compress(json.dumps(VALID).encode() * 50)[:-30], "truncated"),
    "user7-SD-Alarm-task-3": (b"", "empty (0 bytes)"),
    "user7-SD-Alarm-task-4": (lzma.compress(b'{"rows": [1, 2, 3]}'), "not a cassette of ours"),
    "user7-SD-Books-task-1": (b"PK\x03\x04 a zip file", "not an xz file"),
    "user7-SD-Books-task-2": (lzma.compress(b'{"interactions": [{"request": {"uri": 7}}]}'),
                              "not a cassette of ours: interactions.0.request.method"),
    "user7-SD-Books-task-3": (lzma.compress(b"\xff\xfe{}"), "not UTF-8"),
}


def test_each_broken_cassette_is_an_error_naming_the_file_and_what_is_wrong(pytester):
    replay_project(pytester, {scenario: data for scenario, (data, _) in BROKEN.items()})
    result, rows = run_rows(pytester, "--profiles", "7", "-p", "no:cacheprovider")
    assert_rows_are_cases(result, rows)
    assert len(rows) == len(BROKEN), result.stdout.str()[-3000:]
    for row in rows:
        error = row["error"]
        assert row["status"] == "error" and error["source"] == "setup", error
        path = f"cassettes/reference/{row['scenario_id']}.json.xz"
        assert f"{path}: {BROKEN[row['scenario_id']][1]}" in error["message"], error["message"]
        assert error["kind"] == "CassetteError" and "please report" not in error["message"]
        assert "Re-record it: pytest " in error["message"] and "--record-mode all" in error["message"]


def test_a_broken_cassette_is_recorded_afresh_by_record_mode_all(pytester):
    with FakeLLM(Script(terminate_after=1)) as fake:
        suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                f'assistant_model = "openai:fake-bot"\nopenai_base_url = "{fake.url}"\n')
        path = pytester.path / "cassettes" / "reference" / "user7-SD-Alarm-task-1.json.xz"
        path.parent.mkdir(parents=True)
        path.write_bytes(lzma.compress(b"{not json"))
        result, rows = run_rows(pytester, *ALARM, *LIVE, "-k", "task-1", "-p", "no:cacheprovider")
    assert_rows_are_cases(result, rows)
    assert [row["status"] for row in rows] == ["passed"], rows
    assert json.loads(lzma.decompress(path.read_bytes()))["interactions"]


# -- 4. a bot that streams far more than a reply may take, while the run records --------------------

def send_without_end(handler: BaseHTTPRequestHandler, head: bytes = b"", tail: bytes = b"", mib: int = 400) -> int:
    """Answer 200 with a chunked body of ``head``, ``mib`` MiB of "x" and ``tail``, as long as the client reads;
    the bytes of "x" sent."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b"x" * MIB
    frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    sent = 0
    try:
        if head:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(head), head))
        for _ in range(mib):  # a chunked body with no length
            handler.wfile.write(frame)
            sent += len(chunk)
        handler.wfile.write((b"%x\r\n%s\r\n" % (len(tail), tail) if tail else b"") + b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    handler.close_connection = True
    return sent


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    handler.protocol_version = "HTTP/1.1"
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_huge_chunked_http_reply_in_record_mode_is_refused_in_bounded_memory(pytester):
    streamed = []

    class Endless(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            streamed.append(send_without_end(self, b'{"reply": "', b'"}'))

    server = serve(Endless)
    entry = f'[assistants.endless]\nkind = "http"\nurl = "http://127.0.0.1:{server.server_address[1]}/reply"\n'
    try:
        with FakeLLM(Script(terminate_after=1)) as fake:
            project(pytester, fake, entry)
            peak_kib = peak_rss_kib(pytester, "--assistant", "endless", *ALARM, *LIVE, "-k", "task-1", "--retries", "0")
    finally:
        server.shutdown()
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    (row,) = read_rows(results)
    assert row["status"] == "error" and row["error"]["source"] == "assistant", row["error"]
    assert "more than a reply of max_reply_chars=20,000" in row["error"]["message"]
    assert streamed and streamed[0] < 100 * MIB, streamed  # the run stopped reading: the bot could not send it all
    # KiB: a reply is read no further than its limit: 108 MB; before, vcrpy's stub read the whole 400 MB: 917 MB
    assert peak_kib < 250_000, peak_kib


def test_an_endless_judge_answer_while_recording_is_cut_at_its_byte_budget_in_bounded_memory(pytester):
    """A model that answers without end: cut on the wire at MAX_ANSWER_BYTES (16 MiB) while recording, which
    would otherwise read it whole; an error of the judge naming the budget, never retried."""
    streamed = []

    class Endless(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the preflight's probe
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "response_format" in body:  # the judge: an answer without end
                streamed.append(send_without_end(self))
                return
            text = json.dumps({"choices": [{"message": {"content": "Thanks. TERMINATE"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

    server = serve(Endless)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        suite_project(pytester, f'user_model = "openai:u"\njudge_model = "openai:j"\nassistant_model = "openai:a"\n'
                                f'openai_base_url = "{url}"\nretry_initial_s = 0.01\n')
        peak_kib = peak_rss_kib(pytester, *ALARM, *LIVE, "-k", "task-1", "--max-turns", "1")
    finally:
        server.shutdown()
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    (row,) = read_rows(results)
    assert row["status"] == "error" and row["error"]["source"] == "judge", row["error"]
    assert "larger than 16,777,216 bytes" in row["error"]["message"]
    assert streamed and max(streamed) < 100 * MIB, streamed  # the run stopped reading
    assert peak_kib < 250_000, peak_kib


def gzip_bomb(prefix: bytes, mib: int = 1024) -> bytes:
    """A gzip body of ``prefix`` and ``mib`` MiB of "x": about 1 MB on the wire."""
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"x" * MIB
    return compressor.compress(prefix) + b"".join(compressor.compress(block) for _ in range(mib)) + compressor.flush()


@pytest.mark.parametrize("who", ["assistant", "judge"])
def test_a_compressed_answer_bomb_is_refused_before_it_is_decoded(pytester, who):
    """1 MB of gzip that decodes to 1 GiB, from the bot or from the judge, while the run records: the request asked
    for no compression, so a compressed answer is refused as it arrives - before httpx (or vcrpy's recording stub)
    could decode it; one error row naming it, memory bounded."""
    bot_bomb = gzip_bomb(b'{"reply": "')
    judge_bomb = gzip_bomb(b'{"choices": [{"message": {"content": "')

    class Bombs(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bomb = bot_bomb if self.path == "/reply" else judge_bomb if "response_format" in body else None
            if bomb is None or (who == "assistant") != (self.path == "/reply"):
                text = json.dumps({"choices": [{"message": {"content": "Thanks. TERMINATE"}}]} if self.path != "/reply"
                                  else {"reply": "Done."}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            try:
                self.wfile.write(bomb)
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = serve(Bombs)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        suite_project(pytester, f'user_model = "openai:u"\njudge_model = "openai:j"\nopenai_base_url = "{url}/v1"\n'
                                f'retry_initial_s = 0.01\n[assistants.zipped]\nkind = "http"\nurl = "{url}/reply"\n')
        peak_kib = peak_rss_kib(pytester, "--assistant", "zipped", *ALARM, *LIVE, "-k", "task-1", "--max-turns", "1")
    finally:
        server.shutdown()
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    (row,) = read_rows(results)
    assert row["status"] == "error" and row["error"]["source"] == who, row["error"]
    assert "came compressed (Content-Encoding: gzip)" in row["error"]["message"]
    assert peak_kib < 250_000, peak_kib


# -- the bounded read itself ----------------------------------------------------------------------------

def test_read_xz_reads_concatenated_streams_and_stops_at_its_limit(tmp_path):
    path = tmp_path / "two.xz"
    path.write_bytes(lzma.compress(b"a" * 1000) + lzma.compress(b"b" * 1000))
    assert bytes(read_xz(path, 2000)) == b"a" * 1000 + b"b" * 1000
    with pytest.raises(BoundedReadError, match="decompresses to more than 1,999 bytes"):
        read_xz(path, 1999)
    path.write_bytes(lzma.compress(b"a" * 1000) + b"trailing junk")  # as lzma.decompress: ignored
    assert bytes(read_xz(path, 2000)) == b"a" * 1000
    path.write_bytes(lzma.compress(b"a", preset=9 | lzma.PRESET_EXTREME))
    with pytest.raises(BoundedReadError, match="needs more than 1 MiB of memory"):
        read_xz(path, 2000, memlimit=MIB)


def test_recorded_results_that_are_an_xz_bomb_are_refused_at_their_cap(tmp_path, monkeypatch):
    from personalens_testkit.errors import UsageError
    from personalens_testkit.results import files
    from personalens_testkit.results.recorded import load_compared

    path = tmp_path / "results.jsonl.xz"
    path.write_bytes(xz_of_zeros(16 * MIB))
    monkeypatch.setattr(files, "MAX_RESULTS_BYTES", 8 * MIB)
    with pytest.raises(UsageError, match=r"recorded results .*results.jsonl.xz: cannot be read \(decompresses to more "
                                         r"than 8 MiB"):
        load_compared(path)
