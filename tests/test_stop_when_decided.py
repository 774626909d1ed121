"""--stop-when-decided: a stratified random order, and a run that stops starting cases once its verdict is
decided by confidence sequences (valid at every look) - checked against confseq, the reference implementation of
Howard et al. / Waudby-Smith and Ramdas, and end to end against a loopback judge: a bot clearly below a gate is
red early, a bot clearly above it green early, the cases not needed are reported as such and never as passed,
and the stop reaches every xdist worker."""

from __future__ import annotations

import os
import random
import sys
import tarfile
import types
import subprocess
from pathlib import Path

import numpy as np
import pytest

from personalens_testkit.data.loader import open_dataset
from personalens_testkit.data.selection import Selection, select_scenarios
from personalens_testkit.gating.sequential import ConfidenceSequence
from personalens_testkit.run.early_stop import stratified_order, stratum

from .support.fake_llm import FakeLLM, Script
from .support.project import latest_report, latest_results, read_rows, recording_project, run_against

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]
#: user 340's 82 single-domain scenarios
SELECTION = ["--profiles", "340", "--task-kind", "sd", "--max-turns", "2"]
GATE = ("version: 1\nscenario: {task_completion: null, personalization: null}\n"
        "aggregate: {min_n: 1, gates: [{metric: personalization, scope: overall, statistic: lower_bound, min: 1.7}]}\n")


#: fetch confseq 0.0.11's source distribution from the package index and check it against the index's sha256
FETCH = """
import hashlib, re, sys, urllib.request
from urllib.parse import urljoin
index, target = sys.argv[1].rstrip("/"), sys.argv[2]
page = urllib.request.urlopen(f"{index}/confseq/", timeout=60).read().decode()
url, digest = re.search(r'href="([^"#]*confseq-0\\.0\\.11\\.tar\\.gz)#sha256=([0-9a-f]{64})"', page).groups()
data = urllib.request.urlopen(urljoin(f"{index}/confseq/", url), timeout=120).read()
assert hashlib.sha256(data).hexdigest() == digest, "confseq-0.0.11.tar.gz: not the index's sha256"
open(target, "wb").write(data)
"""


@pytest.fixture(scope="module")
def confseq_predmix(tmp_path_factory):
    """confseq's pure-Python predictable-mixture module, from its source distribution on the package index (no wheel
    for this Python; its compiled parts need Boost; this module needs neither them nor scipy's solvers)."""
    folder = tmp_path_factory.mktemp("confseq")
    archive = folder / "confseq-0.0.11.tar.gz"
    # In a process of its own: a cassette left active by another test in this worker patches http.client here.
    subprocess.run([sys.executable, "-c", FETCH, os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple"), str(archive)],
                   check=True, timeout=300)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    with pytest.MonkeyPatch.context() as patch:  # undone once imported: other tests in this worker see the real ones
        for name in ("multiprocess", "scipy", "scipy.optimize", "scipy.stats", "scipy.special"):
            patch.setitem(sys.modules, name, types.ModuleType(name))  # imported at the top of modules we do not use
        patch.setattr(sys.modules["scipy.optimize"], "root", None, raising=False)
        patch.setattr(np, "float_", np.float64, raising=False)  # confseq 0.0.11 predates NumPy 2
        patch.syspath_prepend(str(next(folder.glob("confseq-*/src"))))
        from confseq import predmix

    return predmix


@pytest.mark.parametrize("kind", ["uniform", "ratings", "rare"])
def test_the_sequence_is_confseqs_own(confseq_predmix, kind):
    rng = np.random.default_rng({"uniform": 1, "ratings": 2, "rare": 3}[kind])
    x = {"uniform": rng.random(400), "ratings": rng.choice([0, 1 / 3, 2 / 3, 1], 400, p=[.2, .4, .3, .1]),
         "rare": (rng.random(400) < 0.05).astype(float)}[kind]
    for alpha in (0.05, 0.05 / 12):
        low, high = confseq_predmix.predmix_empbern_twosided_cs(x, alpha=alpha, running_intersection=True)
        sequence = ConfidenceSequence(alpha)
        ours = np.array([sequence.add(float(v)) for v in x])
        assert np.allclose(ours[:, 0], low, atol=1e-12) and np.allclose(ours[:, 1], high, atol=1e-12)


def test_it_covers_the_mean_at_every_look_at_once():
    """Over whole paths of 500 looks, the sequence misses the true mean at any look in at most alpha of paths (a
    fixed-n interval looked at 500 times misses far more often)."""
    rng = random.Random(4)
    levels, weights = [1, 2, 3, 4], [0.25, 0.4, 0.25, 0.1]
    truth = sum(l * w for l, w in zip(levels, weights))
    missed = 0
    for _ in range(400):
        sequence = ConfidenceSequence(0.05, 1, 4)
        for value in rng.choices(levels, weights, k=500):
            low, high = sequence.add(value)
            if not low <= truth <= high:
                missed += 1
                break
    assert missed / 400 <= 0.05


def test_the_order_is_stratified_seeded_and_keeps_tries_together():
    scenarios = select_scenarios(open_dataset(None), Selection())
    place = stratified_order(scenarios, 0)
    ordered = sorted(scenarios, key=lambda s: place[s.scenario_id])
    assert place == stratified_order(list(reversed(scenarios)), 0) and place != stratified_order(scenarios, 1)
    share = {name: sum(stratum(s) == name for s in scenarios) / len(scenarios) for name in {stratum(s) for s in scenarios}}
    first = ordered[: len(ordered) // 10]
    for name, whole in share.items():  # every tenth of the run covers the groups as the whole selection does
        assert abs(sum(stratum(s) == name for s in first) / len(first) - whole) < 0.01


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, GATE)


def run(project: pytest.Pytester, fake: FakeLLM, *args: str) -> pytest.RunResult:
    return run_against(project, fake.url, *SPECS, *SELECTION, "--stop-when-decided", *args)


def outcome(project: pytest.Pytester) -> tuple[dict, list[dict]]:
    return latest_report(project.path), read_rows(latest_results(project.path))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_bot_clearly_below_a_gate_is_red_early(project, workers):
    # a model that takes a moment, as every real one does: the stop must reach workers with cases still to start
    bad = Script(terminate_after=1, scores={**Script().scores, "personalization": 1}, delay_s=0.03 if workers else 0)
    with FakeLLM(bad) as fake:
        result = run(project, fake, *(["-n", str(workers)] if workers else []))
    report, rows = outcome(project)
    assert result.ret == 1 and report["verdict"]["outcome"] == "regressed"
    assert len(rows) < 82 and report["counts"]["not_needed"] == 82 - len(rows)
    assert report["counts"].get("passed", 0) + report["counts"].get("failed", 0) + report["counts"].get("error", 0) \
        == len(rows)
    out = result.stdout.str()
    assert "personalens: stopped when decided: decided red after" in out and "personalens: saved against the full" in out
    assert "order: stratified random by task kind and domain, seed 0" in out


def test_a_bot_clearly_above_a_gate_is_green_early_and_resume_is_not_needed(project):
    with FakeLLM(Script(terminate_after=1)) as fake:
        result = run(project, fake)
    report, rows = outcome(project)
    assert result.ret == 0 and report["verdict"]["outcome"] == "passed"
    assert 10 <= len(rows) < 60 and report["counts"]["not_needed"] == 82 - len(rows)
    assert "decided green after" in result.stdout.str() and "--resume" not in result.stdout.str()
