"""The gate's one verdict (gate/verdict.py): the run's own wherever its report says one, never a pass beside a
pytest that did not pass, and "no verdict" - exit 2, said in the job summary too - where the run decided none."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from personalens_testkit.gate.verdict import EXIT, gate_verdict, say_undecided

OUTCOMES = ["passed", "regressed", "inconclusive", "interrupted"]
reports = st.one_of(
    st.sampled_from(OUTCOMES).map(lambda o: json.dumps({"verdict": {"outcome": o}})),
    st.sampled_from(["", "{", "[]", '{"verdict": null}', '{"verdict": {"outcome": "green"}}', '{"verdict": {}}',
                     json.dumps({"verdict": {"outcome": ["passed"]}})]),
    st.none(),  # no report at all
)


@settings(max_examples=400, deadline=None)
@given(text=reports, status=st.sampled_from([0, 1, 2, 3, 4, 5, -9, 137]))
def test_the_gate_says_the_runs_verdict_and_never_passes_what_pytest_did_not(tmp_path_factory, text, status):
    report = tmp_path_factory.mktemp("gate") / "report.json"
    if text is not None:
        report.write_text(text)
    verdict = gate_verdict(report, status)
    said = json.loads(text)["verdict"]["outcome"] if verdict.decided else None
    if verdict.decided:
        assert verdict.outcome == said in OUTCOMES
        assert verdict.status == EXIT.get(said, status)  # inconclusive: pytest's own 0 or 1
    else:
        assert verdict.outcome.startswith("no verdict (") and verdict.status == 2
    if verdict.status == 0:
        assert (verdict.outcome, status) in (("passed", 0), ("inconclusive", 0))
    if said == "regressed":
        assert verdict.status == 1


def test_a_run_that_decided_nothing_says_so_in_the_job_summary(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    say_undecided(gate_verdict(tmp_path / "report.json", 3))
    assert "personalens gate: no verdict (the run ended before its report (pytest status 3))" in summary.read_text()
    (tmp_path / "report.json").write_text(json.dumps({"verdict": {"outcome": "regressed"}}))
    before = summary.read_text()
    say_undecided(gate_verdict(tmp_path / "report.json", 2))  # decided: the run's own summary says it
    assert summary.read_text() == before
