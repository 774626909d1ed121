"""Bedrock prompt caching: each prompt's fixed part (system prompt, the user agent's profile
block, the judge's conversation) ends with a Converse cachePoint on model families that support
it and on none other; cache reads and writes reach the ledger; a recorded cassette shows the
cache point on the wire."""

from __future__ import annotations

import json
import lzma

import pytest
from botocore.stub import Stubber

from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.bedrock import BedrockChat, make_client, supports_prompt_cache

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project

SONNET_37 = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
SONNET_3 = "anthropic.claude-3-sonnet-20240229-v1:0"


pytestmark = pytest.mark.usefixtures("aws_env")


def request() -> ChatRequest:
    fixed = "PROFILE: likes 7:30 alarms with birdsong.\n"
    return ChatRequest(messages=(Message("system", "You play the user."),
                                 Message("user", fixed + "Conversation so far: ...", cache_prefix=len(fixed))),
                       purpose="user_agent", max_tokens=50)


def test_cache_points_follow_the_fixed_parts_on_models_that_cache():
    assert supports_prompt_cache(SONNET_37) and not supports_prompt_cache(SONNET_3)
    model = BedrockChat(spec="bedrock:x", model_id=SONNET_37, client=make_client(None))
    args = model.converse_args(request())
    assert args["system"] == [{"text": "You play the user."}, {"cachePoint": {"type": "default"}}]
    assert args["messages"][0]["content"] == [
        {"text": "PROFILE: likes 7:30 alarms with birdsong.\n"}, {"cachePoint": {"type": "default"}},
        {"text": "Conversation so far: ..."}]
    stubber = Stubber(model._client)  # the service model accepts the request as built
    stubber.add_response("converse", {
        "output": {"message": {"role": "assistant", "content": [{"text": "Hi"}]}}, "stopReason": "end_turn",
        "usage": {"inputTokens": 40, "outputTokens": 2, "totalTokens": 42, "cacheReadInputTokens": 1200,
                  "cacheWriteInputTokens": 0},
        "metrics": {"latencyMs": 5}}, args)
    with stubber:
        answer = model.complete(request())
    assert (answer.cache_read_tokens, answer.cache_write_tokens) == (1200, 0)


def test_no_cache_points_on_models_without_prompt_caching():
    model = BedrockChat(spec="bedrock:x", model_id=SONNET_3, client=make_client(None))
    assert "cachePoint" not in json.dumps(model.converse_args(request()))
    forced = BedrockChat(spec="bedrock:x", model_id=SONNET_3, client=make_client(None), prompt_cache=True)
    assert "cachePoint" in json.dumps(forced.converse_args(request()))


def test_a_recorded_converse_cassette_carries_the_cache_points_and_the_ledger_counts_cache_tokens(pytester):
    with FakeLLM(Script(terminate_after=1)) as fake:
        suite_project(pytester, f'''
user_model = "claude"
judge_model = "claude"
assistant_model = "openai:fake-bot"
openai_base_url = "{fake.url}"
[models.claude]
kind = "bedrock"
model = "{SONNET_37}"
endpoint_url = "{fake.url.removesuffix('/v1')}"
''')
        result = pytester.runpytest("--profiles", "7", "--domains", "Alarm", "-k", "task-1", "--max-turns", "2",
                                    "--record-mode", "once")
    result.assert_outcomes(passed=1, deselected=4)
    (cassette,) = (pytester.path / "cassettes" / "reference").glob("*.json.xz")
    stored = json.loads(lzma.decompress(cassette.read_bytes()))
    converse = [json.loads(i["request"]["body"]) for i in stored["interactions"] if i["request"]["uri"].endswith("/converse")]
    assert converse and all(body["system"][-1] == {"cachePoint": {"type": "default"}} for body in converse)
    assert all({"cachePoint": {"type": "default"}} in body["messages"][0]["content"] for body in converse)
    (results,) = pytester.path.glob("personalens-results/*/report.json")
    ledger = json.loads(results.read_text())["ledger"]["total"]
    assert ledger["judge"]["cache_write_tokens"] == 500 and ledger["judge"]["cache_read_tokens"] == 5 * 500
    assert ledger["user_agent"]["cache_read_tokens"] > 0
    result.stdout.fnmatch_lines(["*judge 6 calls, * (cache: 2,500 read, 500 written)*"])
