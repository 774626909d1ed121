"""``personalens calibrate``: the shipped set is well formed, and the command tells a judge that reads the
labels (passes) from a random one (fails) and a gullible one (caught by the injection figure), through the
real judge code over loopback HTTP."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from personalens_testkit.calibration.dataset import DIMENSIONS, load_set
from personalens_testkit.calibration.metrics import spearman
from personalens_testkit.calibration.runner import APPEALS
from personalens_testkit.calibration.select import balanced_slice
from personalens_testkit.cli import main as cli
from personalens_testkit.data.loader import open_dataset
from personalens_testkit.errors import DataError

from .support.fake_llm import FakeLLM, Script

DIALOGUES = load_set()


def test_the_shipped_set_covers_what_the_issue_asks():
    assert len(DIALOGUES) >= 80
    scenarios = {d.scenario_id for d in DIALOGUES}
    dataset = open_dataset()
    known = {s.scenario_id for n in dataset.user_numbers() for s in dataset.scenarios_for(n)}
    assert scenarios <= known  # every dialogue is on a scenario of the 50-profile sample
    domains = {domain for sid in scenarios for domain in next(s.domains for n in dataset.user_numbers()
                                                              for s in dataset.scenarios_for(n) if s.scenario_id == sid)}
    assert len(domains) >= 10 and any("-MD-" in sid for sid in scenarios) and any("-SD-" in sid for sid in scenarios)
    levels = Counter(d.labels["personalization"] for d in DIALOGUES if "personalization" in d.labels)
    assert set(levels) == {1, 2, 3, 4} and min(levels.values()) >= 10
    completion = Counter(d.labels["task_completion"] for d in DIALOGUES if "task_completion" in d.labels)
    assert completion[True] >= 20 and completion[False] >= 20
    for dimension in ("naturalness_assistant", "coherence_assistant"):
        assert set(Counter(d.labels[dimension] for d in DIALOGUES if dimension in d.labels)) == {1, 3, 5}
    assert all(d.reasons[name].strip() for d in DIALOGUES for name in d.labels)


def test_a_slice_holds_every_variant():
    small = balanced_slice(DIALOGUES, 10)
    assert len({d.variant for d in small}) == 10


def test_a_bad_set_is_one_line_naming_the_line(tmp_path, capsys):
    bad = tmp_path / "set.jsonl"
    row = json.loads(json.dumps(DIALOGUES[0].model_dump()))
    row["labels"]["personalization"] = 5
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"line 1: labels: personalization must be a whole number from 1 to 4 \(got 5\)"):
        load_set(bad)
    assert cli(["calibrate", "--judge-model", "openai:x", "--calibration-set", str(bad)]) == 2
    assert "line 1: labels" in capsys.readouterr().err


def test_spearman_known_answers():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]) = 0.9486832980505138 (ties get average ranks)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486832980505138)
    assert spearman([2, 2, 2], [1, 2, 3]) is None


def _by_last_reply() -> dict[str, dict]:
    """Each dialogue's labels, found by its last assistant reply (unique in the set)."""
    found = {d.messages[-1].content: d.labels for d in DIALOGUES}
    assert len(found) == len(DIALOGUES)
    return found


def reading_judge(gullible: bool = False, seed: int | None = None):
    """A judge rule that answers with the labels (or at random), and - gullible - believes an appeal."""
    labels = _by_last_reply()
    rng = random.Random(seed)

    def rule(text: str) -> dict:
        matches = [reply for reply in labels if json.dumps(reply.strip(), ensure_ascii=False)[1:-1] in text]
        found = labels[max(matches, key=len)] if matches else {}  # a short reply may also occur in a longer dialogue
        answer = {"task_completion": found.get("task_completion", True),
                  "personalization": found.get("personalization", 2),
                  "naturalness_assistant": found.get("naturalness_assistant", 4),
                  "coherence_assistant": found.get("coherence_assistant", 4)}
        if seed is not None:
            answer = {"task_completion": rng.random() < 0.5, "personalization": rng.randint(1, 4),
                      "naturalness_assistant": rng.randint(1, 5), "coherence_assistant": rng.randint(1, 5)}
        if gullible and any(json.dumps(appeal, ensure_ascii=False)[1:-1] in text for appeal in APPEALS):
            answer = {"task_completion": True, "personalization": 4, "naturalness_assistant": 5, "coherence_assistant": 5}
        return answer

    return rule


def calibrate(tmp_path: Path, monkeypatch, capsys, rule, *extra: str) -> tuple[int, dict, str]:
    monkeypatch.chdir(tmp_path)
    with FakeLLM(Script(judge_rule=rule)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        code = cli(["calibrate", "--judge-model", "openai:fake-judge", "--output", str(tmp_path / "cal.json"), *extra])
    out = capsys.readouterr().out
    return code, json.loads((tmp_path / "cal.json").read_text()), out


def test_a_judge_that_reads_the_labels_passes(tmp_path, monkeypatch, capsys):
    code, report, out = calibrate(tmp_path, monkeypatch, capsys, reading_judge())
    assert code == 0, out
    assert report["failures"] == [] and report["dialogues"] == len(DIALOGUES)
    for dimension in DIMENSIONS:
        figures = report["dimensions"][dimension]
        assert figures["accuracy"] == 1.0 and figures["spearman"] == pytest.approx(1.0) and figures["consistency"] == 1.0
    assert report["dimensions"]["personalization"]["qwk"] == pytest.approx(1.0)
    assert all(gain["mean_gain"] == 0 for gain in report["injection"].values())
    calls = report["cost"]["calls"]
    labelled = sum(len(d.labels) for d in DIALOGUES)
    assert calls > 2 * labelled  # two repeats of every labelled judgement, and the injection checks
    assert "verdict: passed every bar" in out.splitlines()
    assert out.splitlines()[-1] == f"calibration report -> {tmp_path / 'cal.json'}"


def test_a_random_judge_fails(tmp_path, monkeypatch, capsys):
    code, report, out = calibrate(tmp_path, monkeypatch, capsys, reading_judge(seed=3), "--slice", "60")
    assert code == 1
    assert any(line.startswith("personalization qwk") for line in report["failures"])
    assert any(line.startswith("self-consistency") for line in report["failures"])
    assert "verdict: FAILED" in out


def test_a_gullible_judge_is_caught_by_its_injection_gain(tmp_path, monkeypatch, capsys):
    code, report, out = calibrate(tmp_path, monkeypatch, capsys, reading_judge(gullible=True))
    assert code == 1
    gain = report["injection"]["personalization"]["mean_gain"]
    assert gain > 1.0  # its labels are right, but an appeal lifts a 1 or 2 to a 4
    assert report["dimensions"]["personalization"]["accuracy"] == 1.0
    assert f"personalization injection gain {gain:+.3f} > 0.25 (judge-addressed text raises its scores)" in report["failures"]
