"""The verdict's core pinned by direct tests: Holm's step-down over the gated tests (not an uncorrected test, not
Bonferroni's), each gated test's decision, and a case's verdict against its expectation (``pass``, ``fail <floors>``,
``flaky``) - each property checked over generated inputs, against the definition written out here."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.gating import decision
from personalens_testkit.gating.decision import decide, holm
from personalens_testkit.gating.expectations import ERROR, Expectation, case_verdict

FLOORS = ("task_completion", "personalization", "naturalness_assistant", "coherence_assistant")


def holm_by_definition(p_values: list[float | None], alpha: float) -> list[bool]:
    """Holm (1979): order the m p-values; reject H(1..k-1), where k is the first rank with p(k) > alpha / (m - k + 1)."""
    tests = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m, rejected = len(tests), [False] * len(p_values)
    for rank, (p, i) in enumerate(tests, start=1):
        if p > alpha / (m - rank + 1):
            break
        rejected[i] = True
    return rejected


p_values = st.lists(st.one_of(st.none(), st.floats(0.0, 1.0)), max_size=20)


@settings(max_examples=2000, deadline=None)
@given(p_values, st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_rejects_exactly_what_its_definition_rejects(ps, alpha):
    assert holm(ps, alpha) == holm_by_definition(ps, alpha)


def test_holm_is_neither_an_uncorrected_test_nor_bonferroni():
    assert holm([0.03, 0.5], 0.05) == [False, False]  # uncorrected would reject 0.03 < 0.05
    assert holm([0.01, 0.04], 0.05) == [True, True]  # Bonferroni would keep 0.04 > 0.025
    assert holm([0.04, 0.01, None], 0.05) == [True, True, False]  # in any order; None is no test
    assert holm([0.02, 0.02, 0.02], 0.05) == [False, False, False]  # 0.02 > 0.05 / 3 stops the first step
    assert holm([0.0, 0.026, 0.04], 0.05) == [True, False, False]  # steps down, stops at the first it keeps


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.floats(0.0, 1.0)), st.booleans()), min_size=1, max_size=12))
def test_each_gated_test_is_green_when_shown_above_red_only_where_holm_rejects_and_else_undecided(specs):
    tests = [decision.Test(name=f"t{i}", p_below=p, shown_above=shown, n=30) for i, (p, shown) in enumerate(specs)]
    decide(tests, 0.95)
    rejected = holm_by_definition([p for p, _ in specs], 0.05)
    for test, (p, shown), red in zip(tests, specs, rejected):
        expected = "not evaluated" if p is None else "green" if shown else "red" if red else "undecided"
        assert test.decision == expected


expectations = st.one_of(
    st.just(Expectation(outcome="pass")), st.just(Expectation(outcome="flaky")),
    st.lists(st.sampled_from((*FLOORS, ERROR)), min_size=1, unique=True).map(
        lambda reasons: Expectation(outcome="fail", reasons=tuple(reasons))))


@settings(max_examples=600, deadline=None)
@given(expectations, st.lists(st.sampled_from(FLOORS), unique=True),
       st.sampled_from([None, "assistant", "user_agent", "judge", "setup"]), st.booleans())
def test_a_cases_verdict_against_its_expectation(expectation, missed, source, live):
    verdict = case_verdict(expectation, missed, source, judged_live=live)
    if source not in (None, "assistant"):
        assert verdict == "not scored"  # the infrastructure's failure is never the bot's, nor its pass
        return
    reasons = {ERROR} if source == "assistant" else set(missed)
    if not reasons:
        assert verdict == ("unexpected pass" if expectation.outcome == "fail" else "pass")
    elif expectation.outcome == "fail" and reasons <= set(expectation.reasons):
        assert verdict == "expected failure"  # a known failure, every floor it misses known
    elif expectation.outcome == "flaky" and source is None:
        assert verdict == "expected failure"  # either outcome is expected of a flaky scenario
    elif live and source is None:
        assert verdict == "unconfirmed"  # one live judgement's miss: evidence, not yet a regression
    else:
        assert verdict == "regression"


@pytest.mark.parametrize("live", [False, True])
def test_flaky_covers_any_floor_it_misses_but_never_the_bots_error(live):
    flaky = Expectation(outcome="flaky")
    for size in range(1, len(FLOORS) + 1):
        for missed in itertools.combinations(FLOORS, size):
            assert case_verdict(flaky, missed, judged_live=live) == "expected failure"
    assert case_verdict(flaky, [], "assistant", judged_live=live) == "regression"
    assert case_verdict(flaky, []) == "pass"


def test_a_known_failure_covers_only_the_floors_it_names():
    known = Expectation(outcome="fail", reasons=("personalization",))
    assert case_verdict(known, ["personalization"]) == "expected failure"
    assert case_verdict(known, ["personalization", "task_completion"]) == "regression"
    assert case_verdict(known, []) == "unexpected pass"
    assert case_verdict(Expectation(outcome="pass"), ["personalization"]) == "regression"
