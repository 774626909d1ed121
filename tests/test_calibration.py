"""``personalens calibrate``: the shipped set is well formed, and the command tells a judge that reads the
labels (passes) from a random one (fails) and a gullible one (caught by the injection figure), through the
real judge code over loopback HTTP; and the bars, on simulated judges through the report's own code, fail a
constant and a random judge and pass a 90 % accurate one sampled afresh on every call."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from personalens_testkit.calibration.agreement import kappa_interval, kappas, repeat_agreement
from personalens_testkit.calibration.bars import AGREEMENT, SPEARMAN, check_bars
from personalens_testkit.calibration.dataset import DIMENSIONS, load_set
from personalens_testkit.calibration.metrics import spearman
from personalens_testkit.calibration.report import load_calibration
from personalens_testkit.calibration.runner import APPEALS
from personalens_testkit.calibration.select import balanced_slice
from personalens_testkit.calibration.simulate import JUDGES, simulated_report
from personalens_testkit.cli import main as cli
from personalens_testkit.data.loader import open_dataset
from personalens_testkit.errors import DataError
from personalens_testkit.gating.stats import weighted_kappa
from personalens_testkit.gating.thresholds import CalibrationBars, default_thresholds_path, load_thresholds

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
    line = next(line for line in report["failures"] if line.startswith("personalization injection gain"))
    assert line.startswith(f"personalization injection gain {gain:+.3f} [")
    assert line.endswith("] > 0.25 at the interval's low end (judge-addressed text raises its scores)")


# -- the bars on simulated judges (calibration/simulate.py; pass rates: bench/calibration_bars.py) ----------

BARS = CalibrationBars()
JUDGE = {judge.name: judge for judge in JUDGES}


def _missed(report, bar: str) -> bool:
    return any(check.bar == bar and not check.passed for check in check_bars(report))


def test_the_shipped_bars_are_the_schemas_defaults():
    assert load_thresholds(default_thresholds_path()).calibration == BARS


def test_a_constant_judge_fails_the_completion_bar():
    report = simulated_report(JUDGE["constant"], DIALOGUES, BARS)
    tc = report.dimensions["task_completion"]
    assert tc.accuracy == pytest.approx(84 / 108)  # "always completed": the share of completed dialogues
    assert tc.kappa == 0 and (tc.agreement_low, tc.agreement_high) == (0, 0)  # no better than chance, shown so
    assert _missed(report, "task_completion_kappa")
    assert "task_completion kappa 0.000 [0.000, 0.000]: the interval's low end 0.000 < 0.35" in report.failures
    for bar in ("personalization_qwk", "naturalness_qwk", "coherence_qwk"):
        assert _missed(report, bar)  # always 2
    assert not report.passed


def test_a_random_judge_fails_every_agreement_bar():
    for seed in range(10):
        report = simulated_report(JUDGE["random"], DIALOGUES, BARS, seed=seed)
        for bar in ("task_completion_kappa", "personalization_qwk", "naturalness_qwk", "coherence_qwk",
                    "repeat_agreement"):
            assert _missed(report, bar), (seed, bar)


def test_a_90_percent_judge_passes_the_bars_and_the_self_consistency_bar():
    for repeats in (2, 3):
        reports = [simulated_report(JUDGE["90 %"], DIALOGUES, BARS, repeats=repeats, seed=seed) for seed in range(20)]
        assert all(not _missed(r, "repeat_agreement") for r in reports)
        assert all(0.72 < r.self_consistency < 0.9 for r in reports)  # about 0.81, at any --repeat
        # what the bar it replaces read - every repeat alike on 0.9 of the dialogues, least dimension - fails it
        assert all(min(d.consistency for d in r.dimensions.values()) < 0.9 for r in reports)
        assert sum(r.passed for r in reports) >= 19, [r.failures for r in reports if not r.passed]


def test_a_perfect_judge_passes_with_an_interval_of_one():
    report = simulated_report(JUDGE["perfect"], DIALOGUES, BARS)
    assert report.passed and report.self_consistency == 1
    for figures in report.dimensions.values():
        assert figures.agreement == pytest.approx(1) and (figures.agreement_low, figures.agreement_high) == (1, 1)


def _report_meeting(bars: CalibrationBars, shift: float):
    """A perfect judge's report with every figure a bar reads moved to the bar, plus ``shift``."""
    report = simulated_report(JUDGE["perfect"], DIALOGUES, bars)
    for bar, dimension, _ in AGREEMENT:
        report.dimensions[dimension].agreement_low = getattr(bars, bar) + shift
    for bar, dimension in SPEARMAN:
        report.dimensions[dimension].spearman = getattr(bars, bar) + shift
    report.self_consistency = bars.repeat_agreement + shift
    for gain in report.injection.values():
        gain.low = bars.max_injection_gain - shift
    return report


def test_a_bar_exactly_met_passes():
    assert [c for c in check_bars(_report_meeting(BARS, 0.0)) if not c.passed] == []
    # a figure one rounding below its bar (0.1 + 0.2 for 0.3) meets it too
    assert [c for c in check_bars(_report_meeting(BARS.model_copy(update={"personalization_qwk": 0.3}), -1e-12))
            if not c.passed] == []
    missed = {c.bar for c in check_bars(_report_meeting(BARS, -0.001)) if not c.passed}
    assert missed == {"task_completion_kappa", "personalization_qwk", "naturalness_qwk", "coherence_qwk",
                      "personalization_spearman", "naturalness_spearman", "coherence_spearman", "repeat_agreement",
                      "max_injection_gain"}


def test_intervals_are_deterministic_and_match_the_point_estimate():
    first = simulated_report(JUDGE["90 %"], DIALOGUES, BARS, seed=5)
    again = simulated_report(JUDGE["90 %"], DIALOGUES, BARS, seed=5)
    for name, figures in first.dimensions.items():
        assert figures == again.dimensions[name]
        assert figures.agreement_low < figures.agreement < figures.agreement_high
    labels, answers = [1, 2, 3, 4, 1, 2, 3, 4, 2, 3], [1, 2, 4, 4, 2, 2, 3, 3, 2, 1]
    assert kappa_interval(labels, answers, [1, 2, 3, 4], "quadratic") == kappa_interval(labels, answers, [1, 2, 3, 4],
                                                                                          "quadratic")
    # the resampling's kappa is the one the report shows: on the sample itself, the same number
    counts = np.zeros((1, 4, 4))
    for a, b in zip(labels, answers):
        counts[0, a - 1, b - 1] += 1
    assert kappas(counts, ((np.indices((4, 4))[0] - np.indices((4, 4))[1]) / 3) ** 2)[0] == pytest.approx(
        weighted_kappa(labels, answers, categories=[1, 2, 3, 4]), abs=1e-12)


def test_repeat_agreement_counts_pairs_of_repeats():
    assert repeat_agreement([[1, 1], [1, 2], [3, 3, 3], [None, 2]]) == pytest.approx(4 / 5)  # 1 + 0 + 3 pairs
    assert repeat_agreement([[1], [None, 2]]) is None


def test_older_thresholds_and_reports_still_load(tmp_path):
    old = tmp_path / "thresholds.yaml"
    old.write_text("version: 1\ncalibration:\n  task_completion_accuracy: 0.85\n  self_consistency: 0.9\n")
    assert load_thresholds(old).calibration.task_completion_kappa == BARS.task_completion_kappa
    report = load_calibration(Path(__file__).resolve().parent.parent / "bench" / "embedded-judge-calibration.json")
    assert report.version == 1 and not report.passed


def test_the_bench_runs_small():
    done = subprocess.run([sys.executable, "bench/calibration_bars.py", "--trials", "3"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, timeout=300)
    assert done.returncode == 0, done.stderr
    assert re.search(r"task_completion_kappa +0\.35 +1\.000 +[\d.]+ +[\d.]+ +0\.000 +0\.000", done.stdout)
