"""Statistics against known answers (fixed data, seeded bootstrap) and with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.gating.aggregate import evaluate_gates, group_rows, summarise
from personalens_testkit.gating.stats import (
    bootstrap_mean, cohen_kappa, krippendorff_alpha_ordinal, paired_difference, pass_hat_k, weighted_kappa,
)
from personalens_testkit.gating.thresholds import Gate
from personalens_testkit.results.rows import ResultRow


def test_bootstrap_known_answers():
    assert bootstrap_mean([]).mean is None
    one = bootstrap_mean([3])
    assert (one.n, one.mean, one.low, one.high) == (1, 3.0, None, None)
    constant = bootstrap_mean([2, 2, 2, 2])
    assert (constant.mean, constant.low, constant.high) == (2.0, 2.0, 2.0)
    e = bootstrap_mean([1, 2, 3, 4, 5], seed=7)
    assert e.mean == 3.0 and e.low == pytest.approx(1.8, abs=0.21) and e.high == pytest.approx(4.2, abs=0.21)
    assert bootstrap_mean([1, 2, 3, 4, 5], seed=7) == e  # seeded: the same rows give the same interval
    rate = bootstrap_mean([True] * 9 + [False])
    assert rate.mean == pytest.approx(0.9) and 0.6 <= rate.low <= 0.8 and rate.high == 1.0


def test_agreement_known_answers():
    # 2x2 table [[20, 5], [10, 15]]: p_o = 0.7, p_e = 0.5 -> kappa 0.4
    a = [True] * 25 + [False] * 25
    b = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert weighted_kappa([1, 2, 3, 4], [1, 2, 3, 4], categories=[1, 2, 3, 4]) == pytest.approx(1.0)
    assert weighted_kappa([1, 2, 3, 4], [4, 3, 2, 1], categories=[1, 2, 3, 4]) == pytest.approx(-1.0)
    # values from the reference implementation (the `krippendorff` package, ordinal level)
    assert krippendorff_alpha_ordinal([1, 2, 3, 3, 2, 1, 4, 1, 2, 4], [1, 2, 3, 3, 2, 2, 4, 1, 2, 3],
                                      categories=[1, 2, 3, 4]) == pytest.approx(0.9196747967479675)
    assert krippendorff_alpha_ordinal([1, 2, 3, 4, 5, 1, 2], [2, 2, 3, 4, 4, 1, 3],
                                      categories=[1, 2, 3, 4, 5]) == pytest.approx(0.8777631144836687)
    assert weighted_kappa([3, 3], [3, 3], categories=[1, 2, 3, 4]) is None  # one category: undefined, not 1


def test_pass_hat_k():
    assert pass_hat_k([[True, True, True], [True, False, True]], 1) == pytest.approx((1 + 2 / 3) / 2)
    assert pass_hat_k([[True, True, True], [True, False, True]], 3) == pytest.approx(0.5)
    assert pass_hat_k([[True, False]], 3) is None


scores = st.lists(st.integers(min_value=1, max_value=5), min_size=2, max_size=60)


@settings(max_examples=60, deadline=None)
@given(scores, st.integers(min_value=0, max_value=2**31))
def test_the_interval_contains_the_mean_and_is_ordered(values, seed):
    e = bootstrap_mean(values, seed=seed, resamples=300)
    assert e.low <= e.mean <= e.high
    assert min(values) <= e.low and e.high <= max(values)


@settings(max_examples=40, deadline=None)
@given(scores)
def test_a_run_compared_with_itself_differs_by_zero(values):
    d = paired_difference(values, values, resamples=200)
    assert (d.mean, d.low, d.high) == (0.0, 0.0, 0.0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), min_size=2, max_size=40))
def test_perfect_agreement_is_one_when_defined(values):
    qwk = weighted_kappa(values, values, categories=[1, 2, 3, 4])
    alpha = krippendorff_alpha_ordinal(values, values, categories=[1, 2, 3, 4])
    if len(set(values)) > 1:
        assert qwk == pytest.approx(1.0) and alpha == pytest.approx(1.0)


def _row(sid: str, kind: str, domain: str, p: int, tc: bool = True, status: str = "passed") -> ResultRow:
    return ResultRow.model_validate({
        "scenario_id": sid, "task_kind": kind, "domains": [domain], "status": status,
        "scores": None if status == "error" else {"task_completion": tc, "personalization": p, "naturalness_user": 4,
                                                  "naturalness_assistant": 4, "coherence_user": 4,
                                                  "coherence_assistant": 4}})


def test_groups_and_gates():
    rows = [_row("a", "sd", "Movies", 1), _row("b", "sd", "Movies", 2, tc=False), _row("c", "sd", "Music", 3),
            _row("d", "md", "Music", 4), _row("e", "sd", "Music", 0, status="error")]
    assert list(group_rows(rows)) == ["overall", "sd", "md", "domain:Movies", "domain:Music"]
    summaries = summarise(rows)
    assert summaries["overall"].scored == 4 and summaries["overall"].errors == 1
    assert summaries["sd"].estimates["personalization"].mean == 2.0
    assert summaries["domain:Movies"].estimates["task_completion"].mean == 0.5
    gates = [Gate(metric="personalization", scope="overall", statistic="mean", min=3.0),
             Gate(metric="task_completion", scope="each_domain", min=0.75),
             Gate(metric="personalization", scope="md", statistic="lower_bound", min=1)]
    results = evaluate_gates(gates, summaries)
    assert [(r.scope, r.passed) for r in results] == [
        ("overall", False), ("domain:Movies", False), ("domain:Music", True), ("md", None)]
    assert results[0].describe() == ("gate Personalization, all, mean: FAILED: 2.500 vs threshold 3 "
                                     f"(mean {summaries['overall'].estimates['personalization'].describe(3)}, n=4)")
    assert "not evaluated (n=1" in results[3].describe()
