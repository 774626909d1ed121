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

from personalens_testkit.llm.json_body import _written_alike, body, dumps
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
                                answers=lambda method, uri, body, payload, send: sent.append((body, payload)) or {
                                    "status": {"code": 200},
                                    "body": {"string": '{"choices":[{"message":{"content":"ok"}}]}'}})
    for text in ["plain ASCII", "caf\u00e9 \u2014 \U0001F600", "a \\u0041 written out", "a\x7fb"]:
        chat.complete(ChatRequest(messages=(Message(role="system", content="rules"), Message(role="user", content=text)),
                                  temperature=0.0, max_tokens=50, purpose="judge"))
    assert len(sent) == 4
    assert all(body == plain(payload) for body, payload in sent)
