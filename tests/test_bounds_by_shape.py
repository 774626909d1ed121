"""Bounds that hold for any shape (issue 43, item 3): an answer's head however large and in however many parts,
its content codings as HTTP reads them, a JSON text's values however small, an envelope's keys given twice.

Generated members: heads composed of fields x spellings x folding x split points (checked against h11, the
parser httpcore itself reads heads with), JSON texts of every shape under and over a value bound, envelopes with
a key given twice at any depth. End to end: a gzip bomb behind a head over 64 KiB sent in two parts, a gateway
that says ``Content-Encoding: identity``, a cassette of a million tiny interactions - with the two invariants
(rows written == cases run; no score from a refused answer) checked each time.
"""

from __future__ import annotations

import json
import lzma
from http.server import BaseHTTPRequestHandler

import h11
import httpcore
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import CassetteError, ModelError
from personalens_testkit.llm.deadlines import (MAX_HEAD_BYTES, EncodedAnswer, HeadTooLarge, BoundedBackend,
                                               content_codings)
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.replay.store import MAX_CASSETTE_VALUES, JsonBytesSerializer, XzPersister
from personalens_testkit.untrusted_json import UntrustedJsonError, loads, value_bound

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows, suite_project
from .test_bounded_reads import gzip_bomb, peak_rss_kib, serve
from .test_reliability import ALARM, LIVE, assert_rows_are_cases, project, run_rows

# -- a response head's content codings, as HTTP reads them -------------------------------------------------

NAMES = st.sampled_from(["Content-Encoding", "content-encoding", "CONTENT-ENCODING", "Content-Type", "X-Pad",
                         "Content-Encodings", "X-Content-Encoding"])
CODINGS = st.sampled_from(["identity", "Identity", "IDENTITY", "gzip", "br", "deflate", "zstd", "x-gzip", "", "chunked"])
SPACE = st.sampled_from(["", " ", "  ", "\t", " \t"])


@st.composite
def fields(draw):
    name = draw(NAMES)
    items = draw(st.lists(st.tuples(SPACE, CODINGS, SPACE), min_size=1, max_size=3))
    value = ",".join(f"{before}{coding}{after}" for before, coding, after in items).strip(" \t")
    fold = draw(st.booleans()) and "," in value
    if fold:  # obsolete line folding: the value goes on, after a line break and a space
        cut = value.index(",") + 1
        value = value[:cut] + "\r\n" + draw(st.sampled_from([" ", "\t", "  "])) + value[cut:].lstrip(" \t")
    return f"{name}:{draw(SPACE)}{value}"


def h11_codings(head: bytes) -> list[str] | None:
    """The codings other than identity that h11 (httpcore's parser) reads in the head; None if it refuses it."""
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    connection.receive_data(head + b"\r\n\r\n")
    try:
        event = connection.next_event()
    except h11.RemoteProtocolError:
        return None
    assert isinstance(event, h11.Response)
    found = [item.strip().lower().decode() for name, value in event.headers if name == b"content-encoding"
             for item in value.split(b",")]
    return [coding for coding in found if coding not in ("", "identity")]


@settings(max_examples=3000, deadline=None)
@given(st.lists(fields(), max_size=5))
def test_the_codings_of_a_head_are_read_as_h11_reads_them(lines):
    head = "\r\n".join(["HTTP/1.1 200 OK", *lines]).encode()
    expected = h11_codings(head)
    if expected is not None:  # a head h11 refuses never reaches a body: nothing to decode
        assert content_codings(head) == expected


def test_identity_in_any_spelling_is_no_coding_and_anything_else_is():
    for value in ["identity", " identity ", "Identity", "identity, identity", "\tIDENTITY"]:
        assert content_codings(f"HTTP/1.1 200 OK\r\nContent-Encoding: {value}".encode()) == []
    for value, found in [("gzip", ["gzip"]), ("identity, gzip", ["gzip"]), ("identity,\r\n gzip", ["gzip"]),
                         ("br;q=1", ["br;q=1"])]:
        assert content_codings(f"HTTP/1.1 200 OK\r\nContent-Encoding: {value}".encode()) == found
    two = b"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nX: y\r\ncontent-encoding: gzip"
    assert content_codings(two) == ["gzip"]


# -- a head's size, however many parts it comes in ----------------------------------------------------------

def answer_through(parts: list[bytes]) -> bytes:
    """The body of an answer read over a bounded connection whose peer sends ``parts``."""
    pool = httpcore.ConnectionPool(network_backend=BoundedBackend(httpcore.MockBackend(parts)))
    return pool.request("GET", "http://model.test/").content


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:]) if b > a]


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2 * MAX_HEAD_BYTES), st.lists(st.integers(0, 1 << 20), max_size=6),
       st.sampled_from(["gzip", "identity", None]), st.booleans(), st.sampled_from(["\r\n", "\n"]),
       st.sampled_from(["\r\n", "\n"]))
def test_a_head_is_checked_whole_or_refused_however_it_is_split(padding, cuts, coding, coding_last, line, blank):
    """Its lines ended as h11 reads them too: CRLF, or a bare LF (h11 ends a head at LF, CR optional, LF)."""
    fields = [f"X-Pad: {'a' * padding}"] if padding else []
    if coding is not None:
        fields.insert(len(fields) if coding_last else 0, f"Content-Encoding: {coding}")
    body = line.join(["HTTP/1.1 200 OK", "Content-Length: 2", *fields]).encode()
    head = body + (line + blank).encode()
    parts = split(head + b"{}", cuts)
    if len(body) > MAX_HEAD_BYTES:
        with pytest.raises(HeadTooLarge):
            answer_through(parts)
    elif coding == "gzip":
        with pytest.raises(EncodedAnswer):
            answer_through(parts)
    else:
        assert answer_through(parts) == b"{}"


def test_a_head_after_an_interim_answer_is_checked_too():
    with pytest.raises(EncodedAnswer):
        answer_through([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
                        b"Content-Encoding: gzip\r\n\r\n{}"])


# -- JSON values, counted from above --------------------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner, max_size=5),
                    max_leaves=40)


def values_in(value) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + values_in(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(values_in(item) for item in value)
    return 1


@settings(max_examples=1500, deadline=None)
@given(JSON, st.sampled_from([(",", ":"), (", ", ": ")]))
def test_the_value_bound_never_undercounts_and_reads_what_json_reads(value, separators):
    text = json.dumps(value, separators=separators)
    assert value_bound(text) >= values_in(value)
    assert value_bound(text.encode()) == value_bound(text)
    assert loads(text, max_values=value_bound(text)) == json.loads(text)
    with pytest.raises(UntrustedJsonError, match="JSON values"):
        loads(text, max_values=value_bound(text) - 1)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="{}[],:\"a 1", max_size=40) | st.binary(max_size=40), st.integers(0, 60))
def test_a_text_is_refused_exactly_when_its_bound_passes_the_limit_short_or_long(text, limit):
    """The check skips counting a text shorter than its limit: it refuses exactly what the full count refuses."""
    from personalens_testkit.untrusted_json import check_values

    if value_bound(text) > limit:
        with pytest.raises(UntrustedJsonError, match="JSON values"):
            check_values(text, limit)
    else:
        check_values(text, limit)


@st.composite
def twice_somewhere(draw):
    """A JSON object with one key given twice, at any depth, the two values alike or not."""
    key = draw(st.text(max_size=6))
    first, second = draw(JSON), draw(JSON)
    inner = "{" + ",".join([f"{json.dumps(key)}:{json.dumps(first)}",
                            *(f"{json.dumps(k + '~')}:{json.dumps(v)}" for k, v in draw(st.dictionaries(
                                st.text(max_size=3), JSON, max_size=2)).items()),
                            f"{json.dumps(key)}:{json.dumps(second)}"]) + "}"
    for wrapper in draw(st.lists(st.sampled_from(["list", "object"]), max_size=4)):
        inner = f"[{inner}]" if wrapper == "list" else f'{{"w":{inner}}}'
    return inner


@settings(max_examples=1500, deadline=None)
@given(twice_somewhere())
def test_a_key_given_twice_anywhere_is_refused(text):
    with pytest.raises(UntrustedJsonError, match="given twice"):
        loads(text, max_values=1 << 20)


def chat_answering(body: str) -> OpenAICompatibleChat:
    return OpenAICompatibleChat(spec="openai:m", base_url="http://127.0.0.1:9/v1", model="m",
                                answers=lambda *args: {"status": {"code": 200}, "body": {"string": body}})


ASK = ChatRequest(messages=(Message(role="user", content="score it"),), temperature=0.0, max_tokens=50,
                  purpose="judge")


@pytest.mark.parametrize("body", [
    '{"choices":[{"message":{"content":"{\\"score\\": 4}","content":"{\\"score\\": 1}"}}]}',
    '{"choices":[{"message":{"content":"4"}}],"choices":[{"message":{"content":"1"}}]}',
    '{"choices":[{"message":{"content":"4"},"message":{"content":"1"}}]}',
    '{"choices":[{"message":{"content":"4"}},{"message":{"content":"1"}}]}',
])
def test_an_ambiguous_envelope_is_an_error_never_one_of_its_answers(body):
    with pytest.raises(ModelError, match="given twice|2 choices"):
        chat_answering(body).complete(ASK)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_an_answer_not_in_utf8_is_an_error_never_read(encoding):
    """JSON between systems is UTF-8; json.loads would read UTF-16 and 32 too, which no check of ours reads."""
    body = json.dumps({"choices": [{"message": {"content": "4"}}]}).encode(encoding)
    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://127.0.0.1:9/v1", model="m",
                                answers=lambda *args: {"status": {"code": 200}, "body": {"string": body}})
    with pytest.raises(ModelError, match="malformed answer"):
        chat.complete(ASK)


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_nested_past_reading_is_a_model_error(status):
    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://127.0.0.1:9/v1", model="m",
                                answers=lambda *args: {"status": {"code": status}, "body": {"string": "[" * 100_000}})
    with pytest.raises(ModelError):
        chat.complete(ASK)


def test_an_unambiguous_envelope_is_read():
    assert chat_answering('{"choices":[{"message":{"role":"assistant","content":"4"}}],"usage":{}}'
                          ).complete(ASK).text == "4"


# -- a cassette's values --------------------------------------------------------------------------------------

def tiny_interactions(count: int) -> bytes:
    one = {"request": {"method": "POST", "uri": "x", "body": None, "headers": {}},
           "response": {"status": {"code": 200}, "headers": {}, "body": {"string": ""}}}
    return json.dumps({"version": 1, "interactions": [one] * count}, separators=(",", ":")).encode()


def test_a_cassette_of_more_values_than_its_bound_is_refused_unread(tmp_path):
    path = tmp_path / "many.json.xz"
    data = tiny_interactions(MAX_CASSETTE_VALUES // 20)
    path.write_bytes(lzma.compress(data, preset=0))
    with pytest.raises(CassetteError, match="MAX_CASSETTE_VALUES") as refused:
        XzPersister.load_cassette(path, JsonBytesSerializer)
    assert str(path) in str(refused.value)
    path.write_bytes(lzma.compress(tiny_interactions(1000), preset=0))  # the same shape, fewer: read
    requests, responses = XzPersister.load_cassette(path, JsonBytesSerializer)
    assert len(requests) == len(responses) == 1000


# -- end to end -----------------------------------------------------------------------------------------------

def test_a_gateway_saying_identity_is_read_and_scored(pytester):
    with FakeLLM(Script(terminate_after=1, extra_headers=(("Content-Encoding", " identity"),))) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE, "-k", "task-1")
    assert_rows_are_cases(result, rows)
    assert [row["status"] for row in rows] == ["passed"], [row.get("error") for row in rows]


def test_a_gateway_head_over_the_bound_fails_the_preflight_in_one_line_naming_it(pytester):
    with FakeLLM(Script(terminate_after=1, extra_headers=(("X-Pad", "a" * (MAX_HEAD_BYTES + 10)),))) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, *ALARM, *LIVE, "-k", "task-1", "--retries", "0")
    assert result.ret != 0 and rows == []
    (line,) = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert "user agent model" in line and "head is larger than 65,536 bytes (MAX_HEAD_BYTES)" in line, line


def test_a_judge_gzip_bomb_behind_a_head_over_64_kib_in_two_parts_is_refused_unread(pytester):
    """The judge's answer: a head of 64 KiB and more, sent in two parts, its Content-Encoding in the second, then
    1 MB of gzip that decodes to 1 GiB. Before, the check gave up on a head that large: the bomb was decoded whole
    (14.5 GB). Now the head is refused at its bound: an error row of the judge, no score, memory bounded."""
    bomb = gzip_bomb(b'{"choices": [{"message": {"content": "')

    class Bomb(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._plain(b"{}")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "response_format" not in body:
                self._plain(json.dumps({"choices": [{"message": {"content": "Thanks. TERMINATE"}}]}).encode())
                return
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: "
                                 + b"a" * (MAX_HEAD_BYTES + 100))
                self.wfile.flush()
                self.wfile.write(b"\r\nContent-Encoding: gzip\r\nContent-Length: " + str(len(bomb)).encode()
                                 + b"\r\n\r\n" + bomb)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _plain(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = serve(Bomb)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        suite_project(pytester, f'user_model = "openai:u"\njudge_model = "openai:j"\nassistant_model = "openai:a"\n'
                                f'openai_base_url = "{url}"\nretry_initial_s = 0.01\n')
        peak_kib = peak_rss_kib(pytester, *ALARM, *LIVE, "-k", "task-1", "--max-turns", "1", "--retries", "0")
    finally:
        server.shutdown()
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    (row,) = read_rows(results)
    assert row["status"] == "error" and row["error"]["source"] == "judge", row["error"]
    assert "head is larger than 65,536 bytes" in row["error"]["message"], row["error"]
    assert not row.get("scores")
    assert peak_kib < 250_000, peak_kib  # before: the bomb decoded whole, 14.5 GB


def converse_server(body: bytes):
    class Converse(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return serve(Converse)


@pytest.mark.parametrize("content, read", [
    ('[{"text": "4", "text": "1"}]', None),
    ('[{"toolUse": {"toolUseId": "a", "name": "s", "input": {"score": 4, "score": 1}}}]', None),
    ('[{"text": "4"}]', "4"),
])
def test_a_bedrock_answer_is_read_by_the_same_rule_through_botocore(content, read):
    """botocore parses a Converse answer with json (the last of a key given twice wins): the answer is read by our
    rule first (before-parse), over real HTTP - an error, never one of its readings."""
    from personalens_testkit.llm.bedrock import BedrockChat

    body = ('{"output": {"message": {"role": "assistant", "content": ' + content + '}}, "stopReason": "end_turn", '
            '"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 1}}').encode()
    server = converse_server(body)
    try:
        chat = BedrockChat(spec="bedrock:m", model_id="anthropic.claude-3-haiku-20240307-v1:0", region="us-east-1",
                           endpoint_url=f"http://127.0.0.1:{server.server_address[1]}", replay_only=True,
                           read_timeout_s=10)
        if read is None:
            with pytest.raises(ModelError, match="given twice"):
                chat.complete(ASK)
        else:
            assert chat.complete(ASK).text == read
    finally:
        server.shutdown()
