"""`personalens judge`: the benchmark's judge on a team's own conversations, with its own user context
schema, into the same rows, reports and verdict as a run - over real HTTP to a loopback judge."""

from __future__ import annotations

import json

import pytest

from personalens_testkit.cli import main as cli

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows

CONVERSATIONS = [
    {"id": "cust-4711", "messages": [{"role": "user", "content": "Book us a table for Friday, please."},
                                     {"role": "assistant", "content": "Booked Thai Orchid for 8pm Friday, as usual."}],
     "context": {"user_id": "cust-4711", "preferences": {"Restaurants": {"Cuisine": "Thai", "Budget": "$$"}},
                 "interactions": {"Restaurants": "Books Thai Orchid most Fridays."}, "goal": "A table is booked"}},
    {"id": "cust-0042", "messages": [{"role": "user", "content": "Any jazz on tonight?"},
                                     {"role": "assistant", "content": "The Blue Room has a trio at nine."}]},
]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_teams_conversations_are_judged_into_rows_and_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    conversations = write(tmp_path / "conversations.jsonl", CONVERSATIONS)
    (tmp_path / "contexts.json").write_text(json.dumps({"cust-0042": {"preferences": {"Genre": "jazz"},
                                                                      "situation": {"Location": "Leeds"}}}))
    with FakeLLM(Script()) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        code = cli(["judge", str(conversations), "--context", "contexts.json", "--judge-model", "openai:fake-judge"])
    out = capsys.readouterr().out
    assert code == 0, out
    (results,) = tmp_path.glob("personalens-results/judge-*/results.jsonl")
    rows = read_rows(results)
    assert [r["scenario_id"] for r in rows] == ["cust-4711", "cust-0042"]
    assert all(r["status"] == "passed" and r["scores"]["personalization"] == 3 for r in rows)
    assert rows[0]["domains"] == ["Restaurants"] and rows[1]["domains"] == ["General"]
    assert len(rows[0]["calls"]) == 6 and rows[0]["judge_model"] == "openai:fake-judge"
    prompts = [json.dumps(body) for body in fake.requests]
    assert any("A table is booked" in p for p in prompts)  # its own goal
    assert any("fully resolves what the user asks for" in p for p in prompts)  # the default goal, for the second
    assert any("- Location: Leeds" in p and "- Genre: jazz" in p for p in prompts)  # its context from --context
    assert "PersonaLens summary (assistant side; mean over scenarios [95% CI]; n: scored cases)" in out
    assert (results.parent / "report.html").is_file() and (results.parent / "junit.xml").is_file()
    assert "(2 cases: 0 regression(s)" in out and "personalens: verdict: REGRESSED" not in out


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}', "line 1: messages: expected turns of role user or "
                                                                       "assistant, with at least one assistant reply"),
    ('{"id": "a", "messages": [], "context": {"mood": "x"}}', "line 1: context.mood: Extra inputs are not permitted"),
    ("not json", "line 1: not JSON"),
])
def test_a_bad_conversations_file_is_one_line(tmp_path, capsys, line, message):
    path = tmp_path / "c.jsonl"
    path.write_text(line + "\n")
    assert cli(["judge", str(path), "--judge-model", "openai:x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"personalens: error: {path}: {message}") and err.count("\n") == 1


def test_an_interrupted_judging_keeps_the_rows_already_judged(tmp_path, monkeypatch):
    """Each row is written as its conversation is judged: Ctrl-C on the second loses none of the first."""
    from personalens_testkit.cli import judge as command

    monkeypatch.chdir(tmp_path)
    conversations = write(tmp_path / "conversations.jsonl", CONVERSATIONS)
    judged = command.judge_conversation

    def interrupted_on_the_second(judge, conversation, *args, **kwargs):
        if conversation.id == "cust-0042":
            raise KeyboardInterrupt
        return judged(judge, conversation, *args, **kwargs)

    monkeypatch.setattr(command, "judge_conversation", interrupted_on_the_second)
    with FakeLLM(Script()) as fake, pytest.raises(KeyboardInterrupt):
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        command._judge(command.argparse.Namespace(conversations=str(conversations), context=None, judge_model="openai:fake-judge",
                                                  thresholds=None, results_dir=None))
    (results,) = tmp_path.glob("personalens-results/judge-*/results.jsonl")
    assert [r["scenario_id"] for r in read_rows(results)] == ["cust-4711"]
