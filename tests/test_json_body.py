"""A chat request's body (llm/json_body.py) is byte for byte what json.dumps(payload, ensure_ascii=False,
separators=(",", ":"), allow_nan=False) encodes, whatever its text and shape - and fails where that fails."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.llm.json_body import body, dumps, loads
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.llm.base import ChatRequest, Message


def plain(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


# every kind of character the two encodings treat apart: controls, DEL, backslashes before a "u", quotes,
# accents, characters beyond the first plane, and a literal "\u" written in the text
CHARS = st.characters(blacklist_categories=("Cs",))
TEXT = st.text(CHARS, max_size=30) | st.text(st.sampled_from(["\\", "u", "\"", "\x7f", "\x00", "\n", "é", "\U0001F600",
                                                                "a", "0"]), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=10)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": TEXT})
PAYLOAD = st.fixed_dictionaries(
    {"model": TEXT, "messages": st.lists(MESSAGE | JSON, max_size=4)},
    optional={"temperature": st.floats(0, 2), "max_tokens": st.integers(1, 9000), "response_format": JSON,
              "stop": st.lists(TEXT, max_size=2)},
)


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_any_value_is_encoded_as_json_dumps_encodes_it(value):
    assert dumps(value).encode("utf-8") == plain(value)


@settings(max_examples=300, deadline=None)
@given(PAYLOAD)
def test_a_payload_is_encoded_as_json_dumps_encodes_it(payload):
    assert body(payload) == plain(payload)


@pytest.mark.parametrize("payload", [
    {1: "a key that is a number", "messages": []},
    {"messages": [{"role": "user", "content": "\ud800 a lone surrogate"}]},
    {"model": "m", "temperature": math.nan},
    {"model": "m", "max_tokens": math.inf},
    {"model": "m", "messages": [object()]},
])
def test_what_json_dumps_refuses_or_coerces_is_refused_or_coerced_alike(payload):
    try:
        expected = plain(payload)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)):
            body(payload)
        return
    assert body(payload) == expected


def test_the_client_sends_the_body_json_dumps_would_make():
    sent = []
    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://127.0.0.1:9/v1", model="m",
                                answers=lambda method, uri, body, payload: sent.append((body, payload)) or {
                                    "status": {"code": 200},
                                    "body": {"string": '{"choices":[{"message":{"content":"ok"}}]}'}})
    for text in ["plain ASCII", "caf\u00e9 \u2014 \U0001F600", "a \\u0041 written out", "a\x7fb"]:
        chat.complete(ChatRequest(messages=(Message(role="system", content="rules"), Message(role="user", content=text)),
                                  temperature=0.0, max_tokens=50, purpose="judge"))
    assert len(sent) == 4
    assert all(body == plain(payload) for body, payload in sent)


def _read(read, data):
    try:
        return repr(read(data))  # repr: 1 is not 1.0 nor True, nan is nan
    except (ValueError, RecursionError) as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(JSON, st.integers(0, 2 ** 16), st.binary(max_size=3), st.sampled_from(["utf-8", "utf-16", "str"]))
def test_an_answer_reads_as_json_loads_reads_it_or_fails_alike(value, where, spliced, form):
    text = json.dumps(value, ensure_ascii=False)
    data = text if form == "str" else text.encode(form, "surrogatepass")
    assert _read(loads, data) == _read(json.loads, data)
    if form == "str":
        return
    damaged = bytearray(data)  # a few bytes changed anywhere
    at = where % (len(damaged) + 1)
    damaged[at:at + len(spliced)] = spliced
    assert _read(loads, bytes(damaged)) == _read(json.loads, bytes(damaged))


@pytest.mark.parametrize("data", [b'"\\ud800"', b'{"a": NaN, "b": -Infinity}', b"1" * 4301, b"1" * 4300, b"[" * 3000,
                                  b'\xef\xbb\xbf{}', b'{"a": "\x01"}', b'{"a": 1, "b": 2, "a": 3}', b"", b"1e999", b"-0",
                                  b"1.7976931348623159e308", b"2.4703282292062328e-324", b"9007199254740993.0",
                                  b"1.00000000000000011102230246251565404236316680908203125", b"1E+2"])
def test_an_answer_json_reads_apart_is_read_alike(data):
    assert _read(loads, data) == _read(json.loads, data)


def test_an_answer_given_as_text_holding_a_lone_surrogate_is_read_as_json_reads_it():
    text = '{"choices": [{"message": {"content": "ok"}}], "id": "\ud800"}'
    assert _read(loads, text) == _read(json.loads, text)
