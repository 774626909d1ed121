"""Amazon Bedrock through boto3's real client, with botocore's Stubber in place of the network:
every request is validated against the Converse service model, and a whole dialogue (user
agent, assistant and judge on Bedrock) runs through the real dialogue loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.stub import ANY, Stubber

from personalens_testkit.agents.judge import Judge
from personalens_testkit.agents.user_agent import UserAgent
from personalens_testkit.assistants.chat_bot import ChatModelAssistant
from personalens_testkit.assistants.kinds.bedrock import BedrockEntry
from personalens_testkit.data import open_dataset
from personalens_testkit.errors import ModelError
from personalens_testkit.evaluation import Evaluator
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.bedrock import BedrockChat, default_json_mode, make_client
from personalens_testkit.llm.registry import ModelContext, create_model

CLAUDE_35 = "us.anthropic.claude-3-5-sonnet-20241022-v2:0"
CLAUDE_3 = "anthropic.claude-3-sonnet-20240229-v1:0"


pytestmark = pytest.mark.usefixtures("aws_env")


def stubbed(model_id: str) -> tuple[BedrockChat, Stubber]:
    client = make_client(None)
    return BedrockChat(spec=f"bedrock:{model_id}", model_id=model_id, client=client), Stubber(client)


def text_answer(text: str, tokens: tuple[int, int] = (100, 20)) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}}, "stopReason": "end_turn",
            "usage": {"inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)},
            "metrics": {"latencyMs": 120}}


def tool_answer(name: str, payload: dict) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "t1", "name": name, "input": payload}}]}},
            "stopReason": "tool_use", "usage": {"inputTokens": 900, "outputTokens": 40, "totalTokens": 940},
            "metrics": {"latencyMs": 300}}


def test_a_chat_request_becomes_a_valid_converse_call():
    chat, stub = stubbed(CLAUDE_3)
    request = ChatRequest(messages=(Message("system", "be the user"), Message("user", "hello")),
                          purpose="user_agent", temperature=0.5, max_tokens=800, stop=("\n[USER]:",))
    stub.add_response("converse", text_answer("Hi, set my alarm?"), expected_params={
        "modelId": CLAUDE_3, "system": [{"text": "be the user"}],
        "messages": [{"role": "user", "content": [{"text": "hello"}]}],
        "inferenceConfig": {"maxTokens": 800, "temperature": 0.5, "stopSequences": ["\n[USER]:"]},
    })
    with stub:
        response = chat.complete(request)
    stub.assert_no_pending_responses()
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ("Hi, set my alarm?", 100, 20)


def test_judge_schemas_are_enforced_with_a_forced_tool():
    chat, stub = stubbed(CLAUDE_35)
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    stub.add_response("converse", tool_answer("coherence_user", {"score": 4, "justification": "clear"}), expected_params={
        "modelId": CLAUDE_35, "messages": ANY, "inferenceConfig": ANY,
        "toolConfig": {"tools": [{"toolSpec": {"name": "coherence_user", "description": ANY, "inputSchema": {"json": schema}}}],
                       "toolChoice": {"tool": {"name": "coherence_user"}}},
    })
    with stub:
        response = chat.complete(ChatRequest(messages=(Message("user", "rate"),), purpose="judge",
                                             json_schema=schema, schema_name="coherence_user"))
    assert json.loads(response.text) == {"score": 4, "justification": "clear"}
    assert default_json_mode(CLAUDE_35) == "tool" and default_json_mode("meta.llama3-1-70b-instruct-v1:0") == "none"


@pytest.mark.parametrize("code, retryable", [("ThrottlingException", True), ("ModelTimeoutException", True),
                                             ("ValidationException", False), ("AccessDeniedException", False)])
def test_service_errors_become_model_errors(code, retryable):
    chat, stub = stubbed(CLAUDE_3)
    stub.add_client_error("converse", service_error_code=code, service_message="it went wrong", http_status_code=400)
    with stub, pytest.raises(ModelError) as err:
        chat.complete(ChatRequest(messages=(Message("user", "x"),), purpose="assistant"))
    assert str(err.value) == f"call to bedrock:{CLAUDE_3} failed: Bedrock {code}: it went wrong"
    assert err.value.retryable is retryable


def test_missing_region_and_credentials_are_clear(monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ModelError, match="no AWS region: set AWS_DEFAULT_REGION"):
        make_client(None)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    chat = create_model(f"bedrock:{CLAUDE_3}", ModelContext(local_url_for=lambda s, r: ""), "judge")
    with pytest.raises(ModelError, match=r"no AWS credentials found \(the standard chain"):
        chat.complete(ChatRequest(messages=(Message("user", "x"),), purpose="judge"))


JUDGE_ANSWERS = [
    ("task_completion", {"verdict": True, "explanation": "alarm set for 7:00 with birdsong"}),
    ("personalization", {"score": 3, "observations": ["used the usual sound"], "justification": "proactive",
                         "suggestions": ["mention weekdays"]}),
    ("naturalness_user", {"score": 4, "justification": "casual"}),
    ("naturalness_assistant", {"score": 5, "justification": "natural"}),
    ("coherence_user", {"score": 5, "justification": "on topic"}),
    ("coherence_assistant", {"score": 4, "justification": "clear"}),
]


def test_a_whole_dialogue_on_bedrock_through_the_real_loop():
    dataset = open_dataset()
    scenario = dataset.scenarios_for(7)[0]
    user, user_stub = stubbed(CLAUDE_3)
    bot_model, bot_stub = stubbed(CLAUDE_3)
    judge, judge_stub = stubbed(CLAUDE_35)
    entry = BedrockEntry(kind="bedrock", model=CLAUDE_3, context=["interactions"], temperature=0.0, max_tokens=300,
                         system_prompt="You are a helpful concierge.")
    assistant = ChatModelAssistant("bedrock-bot", entry, bot_model, reachable=lambda: None)

    user_stub.add_response("converse", text_answer("Could you set my alarm for tomorrow?"))
    user_stub.add_response("converse", text_answer("Perfect, thanks! TERMINATE"))
    bot_stub.add_response("converse", text_answer("Sure - 7:00 with birdsong, as usual?"), expected_params={
        "modelId": CLAUDE_3, "system": [{"text": ANY}],
        "messages": [{"role": "user", "content": [{"text": "Could you set my alarm for tomorrow?"}]}],
        "inferenceConfig": {"maxTokens": 300, "temperature": 0.0},
    })
    bot_stub.add_response("converse", text_answer("Done. Sleep well!"), expected_params={
        "modelId": CLAUDE_3, "system": ANY, "inferenceConfig": ANY,
        "messages": [{"role": "user", "content": [{"text": "Could you set my alarm for tomorrow?"}]},
                     {"role": "assistant", "content": [{"text": "Sure - 7:00 with birdsong, as usual?"}]},
                     {"role": "user", "content": [{"text": "Perfect, thanks!"}]}],
    })
    for name, payload in JUDGE_ANSWERS:
        judge_stub.add_response("converse", tool_answer(name, payload))

    evaluator = Evaluator(dataset=dataset, user_agent=UserAgent(user), assistant=assistant, judge=Judge(judge))
    with user_stub, bot_stub, judge_stub:
        evaluation = evaluator.evaluate(scenario)
    for stub in (user_stub, bot_stub, judge_stub):
        stub.assert_no_pending_responses()
    assert evaluation.error is None, evaluation.error
    assert [m.content for m in evaluation.dialogue.messages] == [
        "Could you set my alarm for tomorrow?", "Sure - 7:00 with birdsong, as usual?", "Perfect, thanks!",
        "Done. Sleep well!"]
    assert evaluation.verdict.scores.model_dump() == {
        "task_completion": True, "personalization": 3, "naturalness_user": 4, "naturalness_assistant": 5,
        "coherence_user": 5, "coherence_assistant": 4}
    assert evaluation.verdict.reasons["task_completion"] == "alarm set for 7:00 with birdsong"
    calls = evaluation.dialogue.log.records
    assert len(calls) == 10 and {c.prompt_tokens for c in calls if c.role == "judge"} == {900}


# -- judges of every family the paper used, checked against the Converse service model ------------------

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}, "justification": {"type": "string"}},
          "required": ["score", "justification"]}


@pytest.mark.parametrize("model_id, choice, system", [
    ("us.anthropic.claude-3-5-sonnet-20241022-v2:0", {"tool": {"name": "coherence_user"}}, True),
    ("amazon.nova-pro-v1:0", {"tool": {"name": "coherence_user"}}, True),
    ("mistral.mistral-large-2402-v1:0", {"any": {}}, True),       # tools, but no specific tool choice
    ("meta.llama3-1-70b-instruct-v1:0", None, True),              # no forced tool: the answer is parsed
    ("mistral.mixtral-8x7b-instruct-v0:1", None, False),          # no tool and no system prompt
])
def test_each_family_gets_a_request_it_accepts(model_id, choice, system):
    chat, stub = stubbed(model_id)
    payload = {"score": 4, "justification": "clear"}
    answer = tool_answer("coherence_user", payload) if choice else text_answer(json.dumps(payload))
    seen: dict = {}
    chat._client.meta.events.register("provide-client-params.bedrock-runtime.Converse",
                                      lambda params, **_: seen.update(params))
    stub.add_response("converse", answer)
    request = ChatRequest(messages=(Message("system", "You judge."), Message("user", "rate it")), purpose="judge",
                          json_schema=SCHEMA, schema_name="coherence_user")
    with stub:  # botocore validates every parameter against the service model before the stub answers
        response = chat.complete(request)
    assert json.loads(response.text) == payload
    assert seen.get("toolConfig", {}).get("toolChoice") == choice
    assert ("system" in seen) is system
    first = seen["messages"][0]["content"][0]["text"]
    assert first == ("rate it" if system else "You judge.\n\nrate it")


def test_one_retry_policy_and_one_count(monkeypatch):
    from personalens_testkit.agents.calls import CallLog
    from personalens_testkit.llm.retry import RetryPolicy

    chat, stub = stubbed(CLAUDE_3)
    sent = []
    chat._client.meta.events.register("before-send.bedrock-runtime.Converse", lambda **_: sent.append(1))
    for _ in range(4):
        stub.add_client_error("converse", service_error_code="ServiceUnavailableException", http_status_code=503)
    log = CallLog(retry=RetryPolicy(attempts=4, initial_s=0.001, max_s=0.002, jitter_s=0.0))
    request = ChatRequest(messages=(Message("user", "x"),), purpose="judge")
    with stub, pytest.raises(ModelError, match=r"Bedrock ServiceUnavailableException.*\(after 4 attempts\)"):
        log.chat(chat, request, role="judge", label="coherence_user", turn=0)
    stub.assert_no_pending_responses()  # four answers used by four attempts: botocore itself retried none


def test_the_read_timeout_is_the_entrys_and_aws_region_alone_is_enough(monkeypatch):
    from personalens_testkit.assistants.kinds.bedrock import build as _chat
    from personalens_testkit.assistants.build_context import BuildContext
    from personalens_testkit.llm.bedrock import aws_session

    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert aws_session(None).region_name == "eu-west-3"
    built = []
    context = BuildContext(root=Path("."), model=lambda spec, role: None,
                           entry_model=lambda entry, label: built.append(entry) or create_model(
                               f"bedrock:{entry.model}", ModelContext(local_url_for=lambda s, r: "", named={}), "assistant"))
    _chat("bot", BedrockEntry(kind="bedrock", model=CLAUDE_3, timeout_s=7), context)
    assert built[0].timeout_s == 7
    chat = BedrockChat(spec="bedrock:x", model_id=CLAUDE_3, read_timeout_s=7)
    assert chat._client.meta.config.read_timeout == 7 and chat._client.meta.region_name == "eu-west-3"


def test_credential_problems_are_one_line_with_what_to_do(monkeypatch, tmp_path):
    from personalens_testkit.llm.bedrock import check_aws

    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(ModelError, match=r"^AWS_PROFILE \(or the profile given\) names no profile in the AWS config"):
        make_client(None)
    config = tmp_path / "config"
    config.write_text("[profile sso]\nsso_start_url = https://example.awsapps.com/start\nsso_region = us-east-1\n"
                      "sso_account_id = 123456789012\nsso_role_name = Dev\nregion = us-east-1\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "sso")
    monkeypatch.setenv("HOME", str(tmp_path))  # no cached SSO token
    with pytest.raises(ModelError, match=r"^the AWS SSO session of this profile is missing: run `aws sso login`"):
        check_aws(None)


def test_a_replay_needs_no_aws_setup_at_all(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    client = make_client(None, replay_only=True)
    assert client.meta.region_name == "us-east-1" and client._request_signer._credentials.access_key == "replay"


def test_an_unknown_profile_fails_a_live_run_with_one_line(pytester, monkeypatch):
    from .support.project import suite_project

    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    suite_project(pytester)
    result = pytester.runpytest("--judge-model", "bedrock:anthropic.claude-3-haiku-20240307-v1:0", "--record-mode", "all",
                                "--profiles", "7", "--domains", "Alarm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --judge-model bedrock:anthropic.claude-3-haiku-20240307-v1:0: AWS_PROFILE (or the "
                                 "profile given) names no profile in the AWS config (The config profile "
                                 "(no-such-profile) could not be found)"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
