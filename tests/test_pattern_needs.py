"""The words a pattern needs (agents/pattern_needs.py) never skip a text the pattern matches in: the injection
flags find the same spans with the test in front of them as without it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personalens_testkit import textview
from personalens_testkit.agents import injection, pattern_needs
from personalens_testkit.agents.injection import FLAGS, SCORE_LABEL, VERDICT_LABEL
from personalens_testkit.agents.pattern_needs import OTHER_LETTER, fold, may_match, needs

CORPORA = Path(__file__).parent / "data" / "injection"
PATTERNS = [pattern for _, pattern in FLAGS] + [SCORE_LABEL, VERDICT_LABEL]


def _replies() -> list[str]:
    return [json.loads(line)["reply"] for path in sorted(CORPORA.rglob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _every_character_but(excluded: set[int]) -> str:
    return "".join(chr(c) for c in range(128, 0x110000) if not 0xD800 <= c <= 0xDFFF and c not in excluded)


def test_the_only_characters_outside_ascii_that_match_ascii_ignoring_case_are_folded():
    like_ascii = re.compile("[\x00-\x7f]", re.IGNORECASE)
    found = {char for char in like_ascii.findall(_every_character_but(set()))}
    assert found == set(pattern_needs._ASCII_LIKE)
    for char, letter in pattern_needs._ASCII_LIKE.items():
        assert re.fullmatch(letter, char, re.IGNORECASE)


def test_the_caseless_characters_match_only_themselves_ignoring_case():
    caseless = re.compile(f"[{pattern_needs._CASELESS}]", re.IGNORECASE)
    members = {ord(c) for c in _every_character_but(set()) if caseless.fullmatch(c)}
    assert len(members) > 100
    assert caseless.search(_every_character_but(members)) is None
    assert re.compile(f"[{pattern_needs._CASELESS}]").search("".join(map(chr, range(128)))) is None


def test_the_flags_need_words_and_a_reply_without_them_is_not_scanned():
    assert all(needs(pattern) for pattern in PATTERNS[:10])  # the language pattern too: its words, or a letter
    assert OTHER_LETTER in needs(FLAGS[10][1]) and "juez" in needs(FLAGS[10][1])
    plain = "Done - your table for two is booked at 7:30, by the window as you like."
    skipped = [kind for kind, pattern in FLAGS if not may_match(pattern, plain, fold(plain))]
    assert len(skipped) >= 12


def test_no_reply_of_the_corpora_that_a_flag_matches_is_skipped():
    matched = 0
    for text in _replies():
        view, _ = injection.seen_through(text)
        for variant in injection._variants(view, text):
            for pattern in PATTERNS:
                if pattern.search(variant):
                    matched += 1
                    assert may_match(pattern, variant, fold(variant)), (pattern.pattern[:60], variant[:80])
    assert matched > 300


def test_the_corpora_are_flagged_alike_with_and_without_the_words(monkeypatch):
    replies = _replies()
    with_words = [injection._flags(text, 1) for text in replies]
    monkeypatch.setattr(injection, "_prefilters", lambda: (lambda text, folded: True,) * len(FLAGS))
    assert [injection._flags(text, 1) for text in replies] == with_words
    assert sum(map(len, with_words)) > 100  # the attacks are flagged


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_a_text_a_flag_matches_in_is_never_skipped(data):
    pattern = data.draw(st.sampled_from(PATTERNS))
    found = data.draw(st.from_regex(pattern))
    assert pattern.search(found)
    assert may_match(pattern, found, fold(found))


CASES = st.sampled_from(["score", "SCORE", "\u017fcore", "judge", "JUDGE", "\u0130gnore", "\u0131gnore", "mar\u212a",
                         "Pr\u00fcfer", "PR\u00dcFER", "\u8bc4\u5ba1", "\u2019", "\u2014", "verdict: true",
                         "personalization score: 4", "dear grader,", " ", "\n", "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(CASES, max_size=12).map("".join))
def test_folded_spellings_and_other_scripts_are_not_skipped(text):
    for pattern in PATTERNS:
        if pattern.search(text):
            assert may_match(pattern, text, fold(text)), (pattern.pattern[:60], text)


def _seen_char_by_char(text: str) -> tuple[str, list[int] | None]:
    """seen_through as it was written first, a character at a time: the oracle of the one that copies ASCII whole."""
    if all(char.isascii() and char not in textview.LINE_BREAKS for char in text):
        return text, None
    out, origin = [], []
    for i, char in enumerate(text):
        for folded in (char if char.isascii() and char not in textview.LINE_BREAKS else textview.seen_char(char)):
            out.append(folded)
            origin.append(i)
    return "".join(out), origin


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("ab c.\n\r\x0b") + ["\u2028", "\u0663", "\u2019", "\u00e9", "\uff21", "\u200b", "\u0410", "\u0301", "\u00bd",
                                                  "\ufb01", "\u1e9b", "\u2014"]) | st.characters()))
def test_a_reply_is_seen_through_as_it_is_character_by_character(text):
    assert injection.seen_through(text) == _seen_char_by_char(text)


@pytest.mark.parametrize("pattern, text", [("x\u2014y", "x\u2014y"), ("\u2019s\u2019", "it\u2019s\u2019"),
                                           ("caf\u00e9", "CAF\u00c9"), ("\u00a0\u00a0", "a\u00a0\u00a0b")])
def test_a_pattern_that_needs_punctuation_or_a_letter_outside_ascii_is_run(pattern, text):
    compiled = re.compile(pattern, re.IGNORECASE)
    assert compiled.search(text) and may_match(compiled, text, fold(text))
    if re.search(pattern, text):
        assert may_match(re.compile(pattern), text, fold(text))
