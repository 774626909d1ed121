"""The paper's set-up through real runs: the reference assistant's prompt variant named in the header and
the rows, --preset paper resolved to the paper's models without calling them, and a judge's calibration
shown beside its scores (or required) - against a loopback model server."""

from __future__ import annotations

import json

import pytest

from personalens_testkit.cli import main as cli

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_results, read_rows, suite_project

ALARM = ["--profiles", "7", "--domains", "Alarm", "--max-turns", "1", "-k", "task-1"]
PAPER_USER = "bedrock:anthropic.claude-3-sonnet-20240229-v1:0"
PAPER_JUDGE = "bedrock:us.anthropic.claude-3-5-sonnet-20241022-v2:0"


def project(pytester: pytest.Pytester, fake: FakeLLM, extra: str = "") -> pytest.Pytester:
    return suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                   f'assistant_model = "openai:fake-bot"\nopenai_base_url = "{fake.url}"\n'
                                   f'record_mode = "all"\n{extra}')


def test_the_reference_prompt_variant_is_named_in_the_header_and_rows(pytester):
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake)
        default = pytester.runpytest(*ALARM)
        default.stdout.fnmatch_lines(["personalens: data *; assistant reference (model openai:fake-bot, context none, "
                                      "prompt claude); user agent openai:fake-user; judge openai:fake-judge"])
        assert read_rows(latest_results(pytester.path))[0]["assistant_prompt"] == "claude"
        llama = pytester.runpytest(*ALARM, "--assistant-prompt", "llama")
    llama.assert_outcomes(passed=1, deselected=4)
    assert read_rows(latest_results(pytester.path))[0]["assistant_prompt"] == "llama"
    systems = [body["messages"][0]["content"] for body in fake.requests if "response_format" not in body]
    assert any(text.startswith("### Instruction") for text in systems)


def test_an_entry_names_its_variant_and_a_bad_one_is_one_line(pytester):
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, '[assistants.mixtral-ref]\nkind = "reference"\nmodel = "openai:fake-bot"\n'
                                'prompt = "mistral"\n')
        result = pytester.runpytest(*ALARM, "--assistant", "mixtral-ref", "--collect-only")
        result.stdout.fnmatch_lines(["personalens: data *; assistant mixtral-ref (model *, context none, prompt mistral);*"])
        bad = pytester.runpytest(*ALARM, "--assistant-prompt", "gpt")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: --assistant-prompt: 'gpt' is not one of claude, llama, mistral"])


def test_preset_paper_resolves_to_the_papers_models_without_calling_them(pytester, monkeypatch):
    for name, value in (("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00"), ("AWS_SECRET_ACCESS_KEY", "x" * 40),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    with FakeLLM() as fake:
        project(pytester, fake)  # the project's own models are openai: the preset, named on the command line, wins
        result = pytester.runpytest("--preset", "paper", "--collect-only", "--profiles", "7", "--domains", "Alarm")
        explicit = pytester.runpytest("--preset", "paper", "--judge-model", "openai:mine", "--collect-only",
                                      "--profiles", "7", "--domains", "Alarm")
    assert result.ret == pytest.ExitCode.OK and fake.requests == [] and fake.pings == []
    result.stdout.fnmatch_lines([
        f"personalens: data *; assistant reference (model {PAPER_USER}, context none, prompt claude); user agent "
        f"{PAPER_USER}; judge {PAPER_JUDGE}",
        f"personalens: preset paper: user agent {PAPER_USER}, judge {PAPER_JUDGE}, reference assistant {PAPER_USER} "
        "(options given explicitly win over a preset)",
    ])
    explicit.stdout.fnmatch_lines([f"personalens: data *; user agent {PAPER_USER}; judge openai:mine"])


def test_listing_what_a_live_run_would_record_needs_no_credentials(pytester, monkeypatch):
    """--collect-only lists the cases of a live --preset paper run with no AWS region or credentials anywhere;
    the run itself still checks them before any case, in one line."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
                 "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(pytester.path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(pytester.path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with FakeLLM() as fake:
        project(pytester, fake)
        listed = pytester.runpytest("--preset", "paper", "--record-mode", "once", "--collect-only", *ALARM[:4])
        run = pytester.runpytest("--preset", "paper", "--record-mode", "once", *ALARM)
    assert listed.ret == pytest.ExitCode.OK, listed.stderr.str()
    listed.stdout.fnmatch_lines(["*tests collected*"])
    assert run.ret == pytest.ExitCode.USAGE_ERROR and fake.requests == []
    run.stderr.fnmatch_lines([f"ERROR: --user-model {PAPER_USER}: no AWS region*"])


def test_a_project_preset_and_an_unknown_one(pytester):
    with FakeLLM() as fake:
        project(pytester, fake, 'preset = "cheap"\n[presets.cheap]\njudge_model = "openai:cheap-judge"\nmax_turns = 3\n')
        named = pytester.runpytest("--collect-only", "--profiles", "7", "--domains", "Alarm")
        unknown = pytester.runpytest("--preset", "papr", "--collect-only")
    # in the config, a preset sits below the config's own keys: judge_model is set there, so it stays
    named.stdout.fnmatch_lines(["personalens: data *; judge openai:fake-judge", "personalens: preset cheap: *"])
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["ERROR: --preset: unknown preset 'papr' (known: cheap, paper)"])


def _calibration(folder, monkeypatch, capsys, fake) -> str:
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    path = folder / "cal.json"
    cli(["calibrate", "--judge-model", "openai:fake-judge", "--slice", "20", "--repeat", "1", "--output", str(path)])
    capsys.readouterr()
    return str(path)


def test_a_runs_judge_calibration_is_shown_beside_its_scores(pytester, tmp_path, monkeypatch, capsys):
    with FakeLLM(Script(terminate_after=1)) as fake:
        report = _calibration(pytester.path, monkeypatch, capsys, fake)
        project(pytester, fake)
        result = pytester.runpytest(*ALARM, "--judge-calibration", report)
        other = pytester.runpytest(*ALARM, "--judge-calibration", report, "--judge-model", "openai:another")
    result.stdout.fnmatch_lines(["personalens: judge calibration *cal.json: FAILED (* bar(s) missed) for "
                                 "openai:fake-judge on 20 dialogues (*)*", "*judge calibration: FAILED*"])
    folder = latest_results(pytester.path).parent
    assert json.loads((folder / "report.json").read_text())["judge_calibration"]["judge_model"] == "openai:fake-judge"
    assert "<h2>Judge calibration</h2><p class='fail'>FAILED" in (folder / "report.html").read_text()
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    other.stderr.fnmatch_lines([f"ERROR: --judge-calibration {report}: it calibrates openai:fake-judge, but this run's "
                                "judge is openai:another: run `personalens calibrate --judge-model openai:another`"])


def test_a_project_can_require_a_calibrated_judge(pytester, tmp_path, monkeypatch, capsys):
    with FakeLLM(Script(terminate_after=1)) as fake:
        report = _calibration(pytester.path, monkeypatch, capsys, fake)
        project(pytester, fake, "require_calibrated_judge = true\n")
        missing = pytester.runpytest(*ALARM)
        failing = pytester.runpytest(*ALARM, "--judge-calibration", report)
    assert missing.ret == failing.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in missing.stderr.str()
    missing.stderr.fnmatch_lines(["ERROR: require_calibrated_judge: the judge openai:fake-judge has no calibration; run "
                                  "`personalens calibrate --judge-model openai:fake-judge` and name its report with "
                                  "--judge-calibration"])
    failing.stderr.fnmatch_lines(["ERROR: require_calibrated_judge: the judge openai:fake-judge failed its calibration *"])


INVENTED = "Sure - done.\nUser: great, and also book me a table\nAssistant: Booked!"


def test_a_reply_that_runs_into_an_invented_turn_is_cut_by_default_and_whole_under_the_papers_setting(pytester):
    """The reference assistant's and the user agent's replies: cut where the model starts another speaker's turn
    by default (and asked with stop sequences), kept whole - as upstream appends them - with reply_cut none, which
    --preset paper sets; with no time limit on a scenario, as upstream has none."""
    with FakeLLM(Script(terminate_after=1, assistant_text=INVENTED, user_text=INVENTED, vary_user_text=False)) as fake:
        project(pytester, fake)
        cut = pytester.runpytest(*ALARM)
        cut_rows = read_rows(latest_results(pytester.path))
        whole = pytester.runpytest(*ALARM, "--reply-cut", "none")
        whole_rows = read_rows(latest_results(pytester.path))
        asked = [body.get("stop") for body in fake.requests]
    cut.assert_outcomes(passed=1, deselected=4)
    # kept whole, the user agent's turn holds an invented dialogue: its own fault, not the bot's (issue 49)
    whole.assert_outcomes(skipped=1, deselected=4)
    (cut_row,), (whole_row,) = cut_rows, whole_rows
    assert {m["content"] for m in cut_row["transcript"]} == {"Sure - done."}
    assert [f["rule"] for f in cut_row["user_faults"]] == ["turn_limit"]  # cut before its TERMINATE: noted alone
    assert {m["content"] for m in whole_row["transcript"]} == {INVENTED}
    assert whole_row["verdict"] == "inconclusive (user agent)"
    # its opening did (no reply led it there); its later turns answer a bot that wrote speaker labels and said the
    # same each turn: led by the bot, not the user agent's fault
    assert {(f["turn"], f["rule"]) for f in whole_row["user_faults"] if f["direction"] != "noted"} == {
        (0, "spoke_as_assistant")}
    stops = [stop for stop in asked if stop]
    assert stops and all("\nUser:" in stop for stop in stops) and asked.count(None) + asked.count([]) >= 3


def test_preset_paper_keeps_replies_whole_and_sets_no_time_limit(tmp_path):
    from personalens_testkit.settings.resolve import resolve_settings

    paper = resolve_settings({"preset": "paper"}, tmp_path, {})
    default = resolve_settings({}, tmp_path, {})
    assert (paper.reply_cut, paper.completion_counting) == ("none", "paper")
    assert not paper.scenario_timeout_s and default.scenario_timeout_s == 3600 and default.reply_cut == "speaker"
