"""A chat request's body (llm/json_body.py) is byte for byte what json.dumps(payload, ensure_ascii=False,
separators=(",", ":"), allow_nan=False) encodes, whatever its text and shape - and fails where that fails."""

from __future__ import annotations

import collections
import enum
import functools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.llm.json_body import _written_alike, body, dumps, loads
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


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_any_value_is_made_the_body_json_dumps_makes(value):
    assert body(value) == plain(value)


def test_every_character_is_written_as_json_writes_it_on_the_fast_path():
    text = "".join(chr(code) for code in range(0x110000) if not 0xD800 <= code < 0xE000)
    payload = {"model": "m", "messages": [{"role": "user", "content": text}], "stop": [text[:300]]}
    assert _written_alike(payload)  # pydantic-core writes it
    assert body(payload) == plain(payload)


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e-07, 1e-05, 1e16, 1e22, 5e-324, -0.0]))
def test_a_float_is_written_as_json_writes_it(number):
    assert body({"temperature": number, "messages": [number]}) == plain({"temperature": number, "messages": [number]})


class _Text(str):
    def __str__(self):
        return "not what json writes"


class _Level(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize("payload", [
    {"n": 2 ** 63 - 1, "m": -2 ** 63 + 1}, {"n": 2 ** 63}, {"n": -2 ** 64}, {"n": 10 ** 4299}, {"n": 10 ** 4300},
    {"text": _Text("mine")}, {"level": _Level.HIGH}, {"as": (1, "tuple")}, collections.OrderedDict(a=1),
    {None: 1}, {True: 1}, {1.5: 1}, {1e-07: 1}, {(1, 2): 1}, {_Level.HIGH: 1}, {b"key": 1},
    {"deep": functools.reduce(lambda inner, _: [inner], range(200), [])}, {"on": True, "off": False, "none": None},
    {"tab\t": "\u0041 \\u written", "ctrl": "\x00\x1f\x7f\u2028"},
])
def test_values_beside_plain_json_make_the_body_json_dumps_makes(payload):
    assert _made(body, payload) == _made(plain, payload)


def _made(encode, payload):
    try:
        return encode(payload)
    except (ValueError, TypeError) as exc:  # json refuses integers of more than 4,300 digits
        return type(exc)


def test_a_value_that_holds_itself_is_refused_as_json_refuses_it():
    payload = {"messages": []}
    payload["messages"].append(payload)
    with pytest.raises(ValueError, match="Circular reference"):
        body(payload)


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
