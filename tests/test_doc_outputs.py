"""Every example output the docs show is produced by a test, so it cannot drift from what the code prints.

Each fenced block without a language, or marked ``text``, of the pages tests/test_docs.py reads (README.md, docs/,
cassettes/README.md, examples/) is preceded by a comment that says what it is:

- ``<!-- output of: tests/test_x.py::test_a tests/test_y.py::test_b -->``: every line it shows (but ``...``) is
  one that those tests assert the real output has - a string the tests hold (or a line of one) equals it, or
  matches it as the fnmatch pattern the tests give ``fnmatch_lines`` (an f-string's fields match anything);
- ``<!-- checked by: tests/test_x.py::test_a -->``: the test itself reads the block from the page and compares it
  with what a real run prints;
- ``<!-- measured by: COMMAND -->``: figures a measurement printed (a bench script, a calibration run); the
  script it names exists;
- ``<!-- not output: WHAT -->``: a layout or a diagram.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .test_docs import ROOT, doc_files, parse_markdown

MARKER = re.compile(r"<!--\s*(output of|checked by|measured by|not output):\s*(.*?)\s*-->")
OUTPUT_FENCES = frozenset({"", "text"})
ELISION = "..."


def output_blocks(page: Path) -> list[tuple[int, str, str, list[str]]]:
    """Each output block of a page: (its fence's line, the marker's kind - "" for none -, what it names, lines)."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found = []
    for info, first, body in parse_markdown("\n".join(lines)).fences:
        if info not in OUTPUT_FENCES:
            continue
        before = [line for line in lines[:first - 2] if line.strip()]
        marker = MARKER.search(before[-1]) if before else None
        found.append((first - 1, marker.group(1) if marker else "", marker.group(2) if marker else "", body))
    return found


def pattern_of(node: ast.AST) -> str | None:
    """A string a test holds, as a pattern: an f-string's fields become ``*``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "*" for part in node.values)
    return None


@lru_cache(maxsize=None)
def strings_of(reference: str) -> tuple[str, ...]:
    """The strings a test function holds (``tests/test_x.py::test_a``), each whole and line by line, stripped."""
    path, _, name = reference.partition("::")
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name]
    assert functions, f"{reference}: no such test"
    found: list[str] = []
    for node in ast.walk(functions[0]):
        text = pattern_of(node)
        if text is not None:
            found += [text.strip(), *(line.strip() for line in text.splitlines())]
    return tuple(dict.fromkeys(line for line in found if line))


def asserted(line: str, strings: tuple[str, ...]) -> bool:
    shown = line.strip()
    return any(shown == held or (any(c in held for c in "*?[") and fnmatch.fnmatchcase(shown, held))
               for held in strings)


def unasserted(references: str, lines: list[str]) -> list[str]:
    strings = tuple(s for reference in references.split() for s in strings_of(reference))
    return [line for line in lines if line.strip() and line.strip() != ELISION and not asserted(line, strings)]


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: p.name)
def test_every_output_block_says_what_produced_it_and_each_line_is_asserted_by_a_test(page: Path):
    problems = []
    for line, kind, named, body in output_blocks(page):
        where = f"{page.relative_to(ROOT)}:{line}"
        if not kind:
            problems.append(f"{where}: an output block with no <!-- output of: ... --> (or measured by, not output)")
        elif kind == "output of":
            problems += [f"{where}: no test named asserts {shown!r}" for shown in unasserted(named, body)]
        elif kind == "checked by":
            path, _, name = named.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8")
            if f"def {name}(" not in source or page.name not in source:
                problems.append(f"{where}: {named} does not read {page.name}")
        elif kind == "measured by":
            script = next((word for word in named.split() if word.startswith(("bench/", "tests/"))), None)
            if script is not None and not (ROOT / script).is_file():
                problems.append(f"{where}: {script} does not exist")
    assert problems == []


def test_the_blocks_are_found_and_most_are_outputs_of_tests():
    kinds = [kind for page in doc_files() for _, kind, _, _ in output_blocks(page)]
    assert kinds.count("output of") >= 8 and "" not in kinds


#: a documented line, the string a test holds for it, and where that string's ``*`` stands in the line
SAMPLES = (
    ("personalens gate: adds conftest.py: not used by this gate; takes effect once merged",
     "personalens gate: adds conftest.py: not used by this gate; takes effect once merged", (0, 0)),
    ("personalens: verdict: passed (17 cases: 0 regression(s), 0 expected failure(s), 4 unexpected pass(es), 0 not "
     "scored)", "personalens: verdict: * (17 cases: 0 regression(s), 0 expected failure(s), 4 unexpected pass(es), "
     "0 not scored)", (22, 28)),
)


@settings(max_examples=400, deadline=None)
@given(sample=st.sampled_from(SAMPLES), at=st.integers(min_value=0), char=st.characters(codec="ascii"))
def test_a_documented_line_that_drifts_from_what_the_test_asserts_is_caught(sample, at: int, char: str):
    line, held, (wild_from, wild_to) = sample
    assert asserted(line, (held,))
    at %= len(line) + 1
    edited = line[:at] + char + line[at:]
    if edited.strip() != line.strip() and not wild_from <= at <= wild_to:
        assert not asserted(edited, (held,))
