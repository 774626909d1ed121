"""Cost through a run: every output prices the live calls per role (and what the replayed ones would have cost),
`personalens estimate` says before a run what it will spend without calling a model, and --max-cost stops
starting cases before the spend would pass it - live against a loopback model that reports token counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personalens_testkit.cli import main as cli
from personalens_testkit.costs.prices import load_prices
from personalens_testkit.costs.spend import call_cost

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_report, latest_results, read_rows, recording_project, run_against

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
WIDE = ["--profiles", "7", "--domains", "Alarm,Books,Calendar", "--max-turns", "2", "--task-kind", "sd"]
GATES = "version: 1\nscenario: {task_completion: null, personalization: null}\naggregate: {min_n: 1, gates: []}\n"
PRICES = """
[prices."fake-user"]
input = 2.0
output = 8.0
[prices."fake-bot"]
input = 1.0
output = 4.0
[prices."fake-judge"]
input = 3.0
output = 15.0
cached_input = 0.3
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, GATES, PRICES)


def run(project: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    return run_against(project, url, *SPECS, *WIDE, *args)


def report(project: pytest.Pytester) -> dict:
    return latest_report(project.path)


TABLE = load_prices({"fake-user": {"input": 2.0, "output": 8.0}, "fake-bot": {"input": 1.0, "output": 4.0},
                     "fake-judge": {"input": 3.0, "output": 15.0, "cached_input": 0.3}})


def priced(rows: list[dict], *, replayed: bool) -> dict[str, float]:
    """Each role's cost, worked out here from the rows' calls and the config's prices."""
    table = TABLE
    spec = {"user_agent": "openai:fake-user", "assistant": "openai:fake-bot", "judge": "openai:fake-judge"}
    found = dict.fromkeys(spec, 0.0)
    for row in rows:
        for call in row["calls"]:
            if call["replayed"] == replayed:
                found[call["role"]] += call_cost(table.lookup(spec[call["role"]]), spec[call["role"]],
                                                 prompt_tokens=call["prompt_tokens"],
                                                 completion_tokens=call["completion_tokens"])
    return found


ROLE_OF = {"fake-user": "user_agent", "fake-bot": "assistant", "fake-judge": "judge"}


def billed(fake: FakeLLM) -> dict[str, float]:
    """What the server billed, per role: every answer's reported tokens, priced (the preflight's calls included)."""
    found = dict.fromkeys(ROLE_OF.values(), 0.0)
    for model, usage in fake.usage:
        found[ROLE_OF[model]] += call_cost(TABLE.lookup(f"openai:{model}"), f"openai:{model}",
                                           prompt_tokens=usage["prompt_tokens"],
                                           completion_tokens=usage["completion_tokens"])
    return found


def test_every_output_prices_the_live_calls_and_a_replay_spends_nothing(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        live = run(project, fake.url)
        server = billed(fake)
    live.assert_outcomes(passed=13)
    data = report(project)
    in_rows = priced(data["rows"], replayed=False)
    cost = data["cost"]
    for role, value in server.items():  # what the server billed, the preflight's one call per model included
        assert 0 < in_rows[role] < value and cost["roles"][role]["spent"] == pytest.approx(value, rel=1e-9)
    assert cost["total_spent"] == pytest.approx(sum(server.values()), rel=1e-9)
    out = live.stdout.str()
    assert "cost: $" in out and "user agent $" in out and "judge $" in out
    folder = latest_results(project.path).parent
    assert "cost (live calls)" in (folder / "report.html").read_text()
    assert "cost: $" in (folder / "summary.md").read_text()
    # the same cases replayed: nothing spent now, and what replaying saved is what the recording cost
    replay = run(project, "http://127.0.0.1:9/v1", "--record-mode", "none")
    replay.assert_outcomes(passed=13)
    again = report(project)["cost"]
    assert again["total_spent"] == 0
    assert again["total_replayed_value"] == pytest.approx(sum(in_rows.values()))  # the cases' calls: no preflight now
    assert "replaying saved $" in replay.stdout.str()


def test_estimate_before_a_run_measures_a_recording_and_calls_no_model(project, capsys, monkeypatch):
    monkeypatch.chdir(project.path)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing answers there: no call may be made
    assert cli(["estimate", *SPECS, *WIDE, "--record-mode", "all", "--json"]) == 0
    shaped = json.loads(capsys.readouterr().out)
    assert shaped["cases"] == 13 and shaped["measured"] == 0 and shaped["total_cost"] is not None
    low, point, high = shaped["total_cost"]
    assert 0 < low <= point <= high
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake.url).assert_outcomes(passed=13)
    spent = report(project)["cost"]["total_spent"]
    capsys.readouterr()
    assert cli(["estimate", *SPECS, *WIDE, "--record-mode", "all", "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["measured"] == 13 and measured["total_cost"][1] == pytest.approx(spent, rel=0.25)
    # a replay spends nothing; an unpriced judge is "cost unknown", never a number
    assert cli(["estimate", *SPECS, *WIDE]) == 0
    assert "total       $0" in capsys.readouterr().out
    assert cli(["estimate", *SPECS, *WIDE, "--record-mode", "all", "--judge-model", "openai:unpriced-judge"]) == 0
    out = capsys.readouterr().out
    assert 'cost unknown: no price for openai:unpriced-judge (add [tool.personalens.prices."unpriced-judge"])' in out
    assert "total       cost unknown (known part: $" in out


def test_a_live_run_prints_its_estimate_in_its_header(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake.url)
    out = result.stdout.str()
    assert "personalens: estimate: 13 case(s)" in out and "personalens:   total       $" in out
    assert "the estimate again" not in out  # pytest collected every case the settings select


@pytest.mark.parametrize("narrowing", [["-k", "task-1"], ["-k", "task-1", "-n", "2"]], ids=["in-process", "xdist"])
def test_a_narrower_pytest_selection_gets_its_own_estimate(project, narrowing):
    """-k (or -m, node ids) runs fewer cases than the settings select: the header's estimate is for those, and
    once the cases are collected the run prints the estimate of the ones it will run."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake.url, *narrowing)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "personalens: estimate: 13 case(s)*",
        "personalens: the estimate again, for the 3 case(s) pytest collected of the 13 the settings select*",
        "personalens: estimate: 3 case(s)*",
        "personalens:   total       $*",
    ])


def test_no_estimate_again_when_no_case_is_collected(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake.url, "-k", "no-such-case")
    assert "the estimate again" not in result.stdout.str()


def test_a_budget_stops_starting_cases_keeps_every_row_and_resume_finishes(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake.url, "-k", "Alarm-task-1").assert_outcomes(passed=1)
    one_case = report(project)["cost"]["total_spent"]
    budget = one_case * 3.5
    with FakeLLM(Script(terminate_after=1)) as fake:  # one endpoint: a resume adopts only its own endpoint's rows
        stopped = run(project, fake.url, "--max-cost", f"{budget:.8f}")
        out = stopped.stdout.str()
        assert stopped.ret != 0 and "STOPPED early: the budget: spent $" in out
        data = report(project)
        rows = read_rows(latest_results(project.path))
        assert len(rows) == len(data["rows"]) < 13 and data["counts"]["not_run"] == 13 - len(rows)
        assert data["cost"]["total_spent"] <= budget
        assert data["verdict"]["outcome"] == "inconclusive" and "not run" in data["verdict"]["headline"]
        results = latest_results(project.path)
        resumed = run(project, fake.url, "--resume", str(results))
    assert resumed.ret == 0, resumed.stdout.str()[-2000:]
    assert len(read_rows(latest_results(project.path))) == 13


def test_a_budget_with_an_unpriced_role_is_refused(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake.url, "--max-cost", "1", "--judge-model", "openai:unpriced-judge")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--max-cost: the judge's cost is unknown (no price for openai:unpriced-judge (add "
            '[tool.personalens.prices."unpriced-judge"])): a budget needs every spending role priced') in result.stderr.str()
    assert not list(Path(project.path).glob("personalens-results/*/results.jsonl"))


@pytest.mark.parametrize("spread", [["--concurrency", "4"], ["-n", "2", "--concurrency", "2"]], ids=["threads", "xdist"])
def test_a_budget_stop_keeps_the_row_of_every_case_started_ahead(project, spread):
    """With --concurrency, cases are evaluated ahead of their pytest cases: spent, their cassettes written, their
    rows still to come. A stop keeps every one of those rows (before, pytest's loop ended at once: 6 cassettes, 1
    row), and the report's cost is the rows' - what the model server answered."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        run(project, fake.url, "-k", "Alarm-task-1").assert_outcomes(passed=1)
    one_case = report(project)["cost"]["total_spent"]
    cassettes = project.path / "cassettes" / "reference"
    for path in cassettes.glob("*.json.xz"):
        path.unlink()
    with FakeLLM(Script(terminate_after=1, delay_s=0.05)) as fake:
        stopped = run(project, fake.url, "--max-cost", f"{one_case * 2.5:.8f}", *spread)
        served = len(fake.requests)
    assert "STOPPED early: the budget" in stopped.stdout.str(), stopped.stdout.str()[-3000:]
    rows = read_rows(latest_results(project.path))
    recorded = sorted(path.name.removesuffix(".json.xz") for path in cassettes.glob("*.json.xz"))
    assert sorted(row["scenario_id"] for row in rows) == recorded  # every case that ran has its row
    data = report(project)
    assert data["counts"]["not_run"] == 13 - len(rows)
    calls = sum(1 for row in rows for call in row["calls"] if not call.get("replayed"))
    assert calls == served  # every call the server answered is in a row, and so in the cost
    # what the server billed, priced: report.json's cost to the last cent, and within the budget (each case reserved
    # its expected spend before it started, in whichever thread or worker started it)
    server = sum(billed(fake).values())
    assert data["cost"]["total_spent"] == pytest.approx(server, rel=1e-9)
    assert server <= one_case * 2.5 * (1 + 1e-9)


@pytest.mark.parametrize("models, note", [
    (SPECS, "prompt caching, where a provider applies it, lowers the live cost"),
    (["--user-model", "local", "--judge-model", "local", "--assistant-model", "local"],
     "every live model is priced at $0 (the embedded model runs on this machine: it costs time, not money)"),
])
def test_the_estimate_speaks_of_caching_only_where_a_call_is_charged(project, capsys, monkeypatch, models, note):
    monkeypatch.chdir(project.path)
    assert cli(["estimate", *models, *WIDE, "--record-mode", "all"]) == 0
    out = capsys.readouterr().out
    assert f"estimate: {note}" in out
    other = {"prompt caching", "priced at $0"} - {word for word in ("prompt caching", "priced at $0") if word in note}
    assert not any(word in out for word in other)


def test_an_offline_estimate_says_what_recording_would_cost(project, capsys, monkeypatch):
    monkeypatch.chdir(project.path)
    assert cli(["estimate", *SPECS, *WIDE, "--record-mode", "none"]) == 0  # replay offline: no cassette yet
    out = capsys.readouterr().out
    assert "total       $0" in out
    line = next(line for line in out.splitlines() if line.startswith("recording them"))
    assert line.startswith("recording them (--record-mode once, 13 case(s) without a cassette): $")
    assert cli(["estimate", *SPECS, *WIDE, "--record-mode", "once"]) == 0
    once = capsys.readouterr().out
    assert line.split(": ", 1)[1] == next(l for l in once.splitlines() if l.startswith("  total")).split(None, 1)[1]
