"""Settings: one precedence order (option > environment > project config > default), one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from personalens_testkit.settings import load_project_config, resolve_settings
from personalens_testkit.errors import ConfigError, UsageError
from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds, shortfalls

ROOT = Path(__file__).resolve().parent.parent


def test_defaults(tmp_path):
    s = resolve_settings({}, tmp_path, {})
    assert (s.user_model, s.judge_model, s.assistant, s.assistant_model) == ("local", "local", "reference", "local")
    assert s.selection.sample == "50" and s.selection.task_kind == "both" and s.max_turns is None
    assert s.thresholds_path == default_thresholds_path()
    assert s.results_dir == tmp_path / "personalens-results"
    assert s.assistant_context.label == "none"


def test_precedence(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.personalens]\njudge_model = "openai:from-config"\nuser_model = "openai:cfg-user"\n'
        'openai_base_url = "http://config/v1"\n[tool.personalens.local]\nn_ctx = 4096\n'
    )
    s = resolve_settings({"judge_model": "openai:from-option"}, tmp_path, {"OPENAI_BASE_URL": "http://env/v1"})
    assert s.judge_model == "openai:from-option" and s.user_model == "openai:cfg-user"
    assert s.openai_base_url == "http://env/v1" and s.local.n_ctx == 4096
    assert resolve_settings({}, tmp_path, {}).openai_base_url == "http://config/v1"


def test_personalens_toml_overlays_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.personalens]\njudge_model = "openai:a"\nuser_model = "openai:u"\n'
        '[tool.personalens.assistants.bot-a]\nkind = "http"\nurl = "http://a/"\n'
        '[tool.personalens.assistants.bot-b]\nkind = "http"\nurl = "http://b-from-pyproject/"\n'
    )
    (tmp_path / "personalens.toml").write_text(
        'judge_model = "openai:b"\n[bot-b]\nkind = "http"\nurl = "http://b/"\n'
        '[assistants.bot-c]\nkind = "python"\ncallable = "m:f"\n'
    )
    config, sources = load_project_config(tmp_path)
    assert (config.judge_model, config.user_model) == ("openai:b", "openai:u")
    assert sorted(config.assistants) == ["bot-a", "bot-b", "bot-c"] and config.assistants["bot-b"].url == "http://b/"
    assert sources.assistants == {
        "bot-a": "[tool.personalens.assistants.bot-a] in pyproject.toml",
        "bot-b": "[bot-b] in personalens.toml", "bot-c": "[assistants.bot-c] in personalens.toml",
    }
    assert sources.files == (tmp_path / "pyproject.toml", tmp_path / "personalens.toml")


@pytest.mark.parametrize("text, message", [
    ('[tool.personalens]\njudge = "x"\n', r"pyproject.toml: tool.personalens.judge: unknown key"),
    ('[tool.personalens.local]\nn_ctx = 10\n', r"tool.personalens.local.n_ctx: Input should be greater than or equal to 512"),
    ('[tool.personalens\n', r"pyproject.toml: not valid TOML"),
    # a number is a number: a TOML true, a string or a fraction where an integer belongs is named, never read
    ('[tool.personalens]\nmax_cost = true\n', r"tool.personalens.max_cost: Input should be a valid number \(got True\)"),
    ('[tool.personalens]\njudge_retest = "0.5"\n', r"tool.personalens.judge_retest: Input should be a valid number"),
    ('[tool.personalens]\nmax_turns = 3.0\n', r"tool.personalens.max_turns: Input should be a valid integer"),
    ('[tool.personalens]\njudge_retest = nan\n', r"tool.personalens.judge_retest: "),
])
def test_config_errors_name_the_key(tmp_path, text, message):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        resolve_settings({}, tmp_path, {})


def test_project_thresholds_file_is_found(tmp_path):
    (tmp_path / "thresholds.yaml").write_text("version: 1\n")
    assert resolve_settings({}, tmp_path, {}).thresholds_path == tmp_path / "thresholds.yaml"


def test_shipped_thresholds_are_valid_and_identical_to_the_packaged_default():
    assert (ROOT / "thresholds.yaml").read_text() == default_thresholds_path().read_text()
    floors = load_thresholds(ROOT / "thresholds.yaml").scenario
    assert floors.task_completion is True and floors.personalization == 2
    assert floors.naturalness_assistant == 3 and floors.coherence_assistant == 3
    assert floors.naturalness_user is None and floors.coherence_user is None


SCORES = {"task_completion": True, "personalization": 2, "naturalness_user": 1, "naturalness_assistant": 3,
          "coherence_user": 1, "coherence_assistant": 3}


def test_shipped_floors_can_fail_and_can_pass():
    floors = load_thresholds(ROOT / "thresholds.yaml").scenario
    assert shortfalls(floors, SCORES) == []
    low = shortfalls(floors, {**SCORES, "personalization": 1, "task_completion": False, "coherence_assistant": 2})
    assert [(s.metric, s.value, s.floor) for s in low] == [
        ("task_completion", False, True), ("personalization", 1, 2), ("coherence_assistant", 2, 3)]
    assert low[1].describe() == "Personalization: 1 is below the floor of 2"


@pytest.mark.parametrize("text, message", [
    ("version: 2\n", "version: must be 1 (got 2)"),
    ("scenario:\n  personalization: 5\n", "scenario.personalization: must be a whole number from 1 to 4, or null (got 5)"),
    ("scenario:\n  personalization: 2.5\n", "scenario.personalization: must be a whole number from 1 to 4"),
    ("scenario:\n  coherence_user: '3'\n", "scenario.coherence_user: must be a whole number from 1 to 5, or null (got '3')"),
    ("scenario:\n  task_completion: 1\n", "scenario.task_completion: must be true, false or null (got 1)"),
    ("scenario:\n  personalisation: 2\n", "scenario.personalisation: unknown key"),
    ("scenario: [1, 2]\n", "scenario: "),
    ("- a\n- b\n", "expected a mapping of settings at the top, found list"),
    ("scenario:\n  personalization: [\n", "not valid YAML: "),
])
def test_threshold_errors_name_the_key(tmp_path, text, message):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_thresholds(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_missing_thresholds_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_thresholds(tmp_path / "none.yaml")


@pytest.mark.parametrize("options, message", [
    ({"task_kind": "all"}, "--task-kind: 'all' is not one of sd, md, both"),
    ({"sample": "40"}, "--sample: '40' is not a published sample"),
    ({"assistant_context": "X"}, "--assistant-context: 'x' is not a context part"),
    ({"user_model": "gpt"}, "--user-model: model spec 'gpt': unknown backend 'gpt'"),
])
def test_option_errors(tmp_path, options, message):
    with pytest.raises(UsageError) as err:
        resolve_settings(options, tmp_path, {})
    assert message in str(err.value)


def test_named_models_resolve_and_are_reported_with_their_spec(tmp_path):
    from personalens_testkit.llm.entries import BedrockModel, OpenAIModel
    from personalens_testkit.llm.registry import describe, resolve

    (tmp_path / "pyproject.toml").write_text(
        '[tool.personalens]\njudge_model = "judge-prod"\n'
        '[tool.personalens.models.judge-prod]\nkind = "bedrock"\nmodel = "us.anthropic.claude-3-5-sonnet-20241022-v2:0"\n'
        'region = "us-west-2"\n'
        '[tool.personalens.models.gw]\nkind = "openai"\nmodel = "gpt-4o"\nbase_url = "http://gw/v1"\napi_key_env = "GW_KEY"\n'
    )
    s = resolve_settings({"user_model": "gw"}, tmp_path, {})
    assert s.judge_model == "judge-prod" and isinstance(resolve(s.judge_model, s.models), BedrockModel)
    assert resolve("gw", s.models) == OpenAIModel(model="gpt-4o", base_url="http://gw/v1", api_key_env="GW_KEY")
    assert describe("judge-prod", s.models) == "judge-prod (bedrock:us.anthropic.claude-3-5-sonnet-20241022-v2:0)"
    assert describe("openai:x", s.models) == "openai:x"
    assert s.model_sources["judge-prod"] == "[tool.personalens.models.judge-prod] in pyproject.toml"


def test_unknown_model_name_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"--judge-model: model spec 'judge-prod': unknown backend 'judge-prod' "
                                         r"\(known: local, openai, bedrock, or the name of a \[tool.personalens.models\] entry\)"):
        resolve_settings({"judge_model": "judge-prod"}, tmp_path, {})


def test_bedrock_models_are_checked_before_any_case(tmp_path, monkeypatch):
    from personalens_testkit.run.state import Run as RunState

    for variable in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    (tmp_path / "pyproject.toml").write_text('[tool.personalens.models.judge-prod]\nkind = "bedrock"\nmodel = "m"\n')
    # an offline replay needs no credentials: nothing is checked
    RunState(resolve_settings({"judge_model": "judge-prod"}, tmp_path, {}), run_id="r", is_controller=True).preflight()
    live = {"record_mode": "once"}
    state = RunState(resolve_settings({"judge_model": "judge-prod", **live}, tmp_path, {}), run_id="r", is_controller=True)
    with pytest.raises(UsageError, match=r"^--judge-model judge-prod \(\[tool.personalens.models.judge-prod\] in "
                                         r"pyproject.toml\): no AWS region"):
        state.preflight()
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    state = RunState(resolve_settings({"user_model": "bedrock:m", **live}, tmp_path, {}), run_id="r", is_controller=True)
    with pytest.raises(UsageError, match=r"^--user-model bedrock:m: no AWS credentials"):
        state.preflight()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    state.preflight(reach=False)  # now resolved (tests/test_reliability.py makes the minimal call)


def test_header_secrets_are_read_from_the_environment_at_call_time(fake_llm, monkeypatch):
    from personalens_testkit.llm.base import ChatRequest, Message
    from personalens_testkit.llm.entries import OpenAIModel
    from personalens_testkit.llm.registry import ModelContext, create_entry_model

    monkeypatch.setenv("TEAM_TOKEN", "tok-123")
    entry = OpenAIModel(model="m", base_url=fake_llm.url, headers={"X-Token": "Bearer ${TEAM_TOKEN}"})
    model = create_entry_model(entry, "gw", ModelContext(local_url_for=lambda s, r: ""), "judge")
    assert "tok-123" not in repr(model)
    model.complete(ChatRequest(messages=(Message("user", "x"),), purpose="judge"))
    assert fake_llm.headers[-1]["X-Token"] == "Bearer tok-123"


def test_a_teams_selection_lives_in_its_config(tmp_path):
    (tmp_path / "personalens.toml").write_text(
        'assistant = "my-bot"\nprofiles = "7,53"\ndomains = "Alarm,Movies"\ntask_kind = "sd"\nmax_turns = 6\n'
        '[assistants.my-bot]\nkind = "http"\nurl = "http://127.0.0.1:9/reply"\n')
    s = resolve_settings({}, tmp_path, {})
    assert s.assistant == "my-bot" and s.max_turns == 6
    assert (s.selection.profiles, s.selection.domains, s.selection.task_kind) == ((7, 53), ("Alarm", "Movies"), "sd")
    s = resolve_settings({"task_kind": "md", "max_turns": 3}, tmp_path, {})  # an option wins over the key
    assert (s.selection.task_kind, s.max_turns, s.selection.profiles) == ("md", 3, (7, 53))
    (tmp_path / "personalens.toml").write_text('task_kind = "all"\n')
    with pytest.raises((UsageError, ConfigError), match="task_kind|--task-kind"):
        resolve_settings({}, tmp_path, {})
