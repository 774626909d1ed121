"""The OpenAI-compatible backend: wire format per dialect, caps, and errors translated at the boundary."""

from __future__ import annotations

import httpx
import pytest

from personalens_testkit.errors import ModelError
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.llm.registry import ModelContext, check_spec, create_model

from .support.fake_llm import FakeLLM, Script

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"], "additionalProperties": False}


def request(**kw) -> ChatRequest:
    base = dict(messages=(Message("system", "s"), Message("user", "u")), purpose="judge", temperature=0.0, max_tokens=500)
    base.update(kw)
    return ChatRequest(**base)


def test_openai_dialect_over_real_http(fake_llm):
    chat = OpenAICompatibleChat(spec="openai:m", base_url=fake_llm.url, model="m", api_key="sk-test-123")
    response = chat.complete(request(json_schema=SCHEMA, schema_name="coherence_user", stop=("\nUser:",)))
    body = fake_llm.requests[-1]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "coherence_user", "schema": SCHEMA, "strict": True}}
    assert body["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0.0, 500, ["\nUser:"])
    assert response.text.startswith("{") and response.prompt_tokens and response.finish_reason == "stop"
    assert "sk-test-123" not in repr(chat)


def test_llama_cpp_dialect_and_caps_per_purpose(fake_llm):
    chat = OpenAICompatibleChat(spec="local", base_url=fake_llm.url, model="m", json_dialect="llama_cpp",
                                max_tokens_cap={"judge": 320})
    chat.complete(request(json_schema=SCHEMA))
    assert fake_llm.requests[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert fake_llm.requests[-1]["max_tokens"] == 320
    bounded = OpenAICompatibleChat(spec="local", base_url=fake_llm.url, model="m", json_dialect="llama_cpp",
                                   max_string_chars=50)
    notes = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "string"}},
                                              "c": {"type": "string", "maxLength": 9}, "d": {"type": "integer"}}}
    bounded.complete(request(json_schema=notes))
    sent = fake_llm.requests[-1]["response_format"]["schema"]["properties"]
    assert sent["a"]["maxLength"] == 50 and sent["b"]["items"]["maxLength"] == 50
    assert sent["c"]["maxLength"] == 9 and "maxLength" not in sent["d"]
    chat.complete(request(purpose="user_agent", max_tokens=50))
    assert fake_llm.requests[-1]["max_tokens"] == 50 and "response_format" not in fake_llm.requests[-1]


def test_no_dialect_sends_no_response_format(fake_llm):
    chat = OpenAICompatibleChat(spec="x", base_url=fake_llm.url, model="m", json_dialect="none")
    chat.complete(request(json_schema=SCHEMA))
    assert "response_format" not in fake_llm.requests[-1] and not chat.supports_json_schema


@pytest.mark.parametrize("status, retryable", [(429, True), (500, True), (503, True), (400, False), (401, False)])
def test_http_errors_become_model_errors(status, retryable):
    with FakeLLM(Script(status=status)) as fake:
        chat = OpenAICompatibleChat(spec="openai:m", base_url=fake.url, model="m", api_key="sk-secret-xyz")
        with pytest.raises(ModelError) as err:
            chat.complete(request())
    assert err.value.retryable is retryable
    assert str(err.value) == f"call to openai:m failed: HTTP {status} from {fake.url}: scripted failure"
    assert "sk-secret-xyz" not in str(err.value)


def test_unreachable_server_is_a_retryable_model_error():
    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ModelError, match=r"cannot reach http://127.0.0.1:9/v1 \(ConnectError") as err:
        chat.complete(request())
    assert err.value.retryable


@pytest.mark.parametrize("payload", [b"not json", b'{"choices": []}', b'{"nothing": 1}', b'[1, 2]'])
def test_malformed_answers_are_model_errors(payload):
    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=payload))
    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://test/v1", model="m", transport=transport)
    with pytest.raises(ModelError, match="malformed answer"):
        chat.complete(request())


def test_timeouts_are_retryable_model_errors():
    def slow(req):
        raise httpx.ReadTimeout("timed out", request=req)

    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://test/v1", model="m", transport=httpx.MockTransport(slow))
    with pytest.raises(ModelError, match="no answer within the time limit") as err:
        chat.complete(request())
    assert err.value.retryable


@pytest.mark.parametrize("spec, message", [
    ("claude", "unknown backend 'claude'"), ("openai", "name the model"), ("openai:", "nothing after 'openai:'"),
    ("local:", "nothing after 'local:'"),
])
def test_bad_specs(spec, message):
    with pytest.raises(Exception, match=message):
        check_spec(spec)


def test_openai_spec_takes_base_url_and_key_from_settings(fake_llm, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    ctx = ModelContext(local_url_for=lambda s, r: "unused", openai_base_url=fake_llm.url, openai_api_key_env="MY_KEY")
    model = create_model("openai:gpt-test", ctx, "judge")
    model.complete(request())
    assert fake_llm.requests[-1]["model"] == "gpt-test"
