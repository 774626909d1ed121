"""The documentation shows only commands and options that exist, and its links lead somewhere.

Read: README.md, docs/*.md, cassettes/README.md and examples/**/README.md. Checked:

- every command line shown - in a fenced shell block (```bash, ```sh, ```console or a bare ```, with
  ``\\`` continuations joined) or in an inline code span - whose command is pytest (``pytest``,
  ``.venv/bin/pytest``, ``python -m pytest``, ``.venv/bin/python -m pytest``): each ``--long-option`` is
  one of the options of ``pytest --help`` in this repository (pytest's own, xdist's, the testkit
  plugin's);
- every ``personalens SUBCOMMAND ...``: the subcommand (and a nested one, ``data stats``) exists in the
  argparse parser of ``personalens_testkit.cli`` and each ``--long-option`` after it is one of its options;
- an inline code span that starts with a long option (the option tables: ``--profiles 7,53``) names
  an option of pytest or of some ``personalens`` subcommand;
- every relative markdown link points to a file or folder that exists, and every ``#anchor`` to a
  heading of the target page (GitHub's anchors: lowercase, spaces to ``-``, punctuation but ``-`` and
  ``_`` dropped, ``-1``, ``-2`` for repeated headings).

Other commands (pip, python3 -m venv, apt-get, git, curl, python scripts) are not checked. A failure
names the file, the line and the option, subcommand or link.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Long options that stand for "some option" in prose, not an option of ours: never looked up.
#: (Tokens like ``--<name>`` or ``--OPTION`` are not option names at all: only ``--[a-z0-9-]+`` is checked.)
PLACEHOLDER_OPTIONS = frozenset({"--option", "--options", "--flag"})

#: Fenced blocks whose lines are shell commands (or their output, for a bare fence).
SHELL_FENCES = frozenset({"", "bash", "sh", "shell", "console", "text"})

OPTION = re.compile(r"--[a-z0-9][a-z0-9-]*")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = frozenset({"&&", "||", ";", "|", "&", ";;", "|&"})


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "cassettes" / "README.md",
             *sorted((ROOT / "examples").rglob("README.md"))]
    return [f for f in files if f.is_file()]


# ---------------------------------------------------------------- reading markdown

@dataclass
class Markdown:
    """A page split into its fenced blocks and its prose (fences blanked, so line numbers hold)."""

    fences: list[tuple[str, int, list[str]]] = field(default_factory=list)   # (info, first line, lines)
    prose: str = ""


FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^`\s]*)")


def parse_markdown(text: str) -> Markdown:
    page = Markdown()
    prose: list[str] = []
    lines = text.split("\n")
    opened: tuple[str, str, int, list[str]] | None = None   # (marker, info, first content line, lines)
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line)
        if opened is None:
            if match:
                opened = (match.group(1), match.group(2).lower(), number + 1, [])
                prose.append("")
            else:
                prose.append(line)
        else:
            marker = opened[0]
            if match and line.strip().startswith(marker[0] * len(marker)) and not match.group(2):
                page.fences.append((opened[1], opened[2], opened[3]))
                opened = None
            else:
                opened[3].append(line)
            prose.append("")
    if opened is not None:
        page.fences.append((opened[1], opened[2], opened[3]))
    page.prose = "\n".join(prose)
    return page


CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def code_spans(prose: str) -> list[tuple[int, str]]:
    """Inline code spans (a span may wrap onto the next line, never across a paragraph), with their line."""
    spans = []
    for match in CODE_SPAN.finditer(prose):
        content = match.group(2)
        if "\n\n" in content:
            continue
        spans.append((prose.count("\n", 0, match.start()) + 1, " ".join(content.split())))
    return spans


def shell_lines(page: Markdown) -> list[tuple[int, str]]:
    """The logical lines of the shell blocks: ``\\`` continuations joined, each with its first line's number."""
    out = []
    for info, first, lines in page.fences:
        if info not in SHELL_FENCES:
            continue
        prompted = info == "console" and any(line.lstrip().startswith(("$ ", "% ")) for line in lines)
        pending: tuple[int, str] | None = None
        for offset, line in enumerate(lines):
            number = first + offset
            if pending is not None:
                number, line = pending[0], pending[1] + " " + line.strip()
                pending = None
            if line.rstrip().endswith("\\"):
                pending = (number, line.rstrip()[:-1].rstrip())
                continue
            if prompted:
                stripped = line.lstrip()
                if not stripped.startswith(("$ ", "% ")):
                    continue   # a command's output
                line = stripped[2:]
            out.append((number, line))
        if pending is not None:
            out.append(pending)
    return out


# ---------------------------------------------------------------- commands in a line

def strip_comment(line: str) -> str:
    """Drop a shell comment: a ``#`` at the start of a word, outside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def tokens(line: str) -> list[str]:
    line = strip_comment(line)
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:   # an unbalanced quote in prose-like output: words are enough
        return line.split()


@dataclass(frozen=True)
class Command:
    program: str          # "pytest" or "personalens"
    args: tuple[str, ...]


def _program(words: list[str], i: int) -> tuple[str, int] | None:
    """The program starting at words[i] and the index of its first argument, if it is one we check."""
    name = os.path.basename(words[i])
    if name == "pytest":
        return "pytest", i + 1
    if name == "personalens":
        return "personalens", i + 1
    if re.fullmatch(r"python[0-9.]*", name) and words[i + 1:i + 3] == ["-m", "pytest"]:
        return "pytest", i + 3
    return None


def commands(line: str) -> list[Command]:
    """The pytest and personalens commands of one line: each segment between ``&&``, ``|``, ``;``...
    is scanned for the program's name (also after a prefix such as ``VAR=x``, ``time`` or the text of
    an output line: ``Re-record it: pytest ...``)."""
    found = []
    segment: list[str] = []
    for word in tokens(line) + [";"]:
        if word not in SEPARATORS:
            segment.append(word)
            continue
        for i, candidate in enumerate(segment):
            if ASSIGNMENT.match(candidate):
                continue
            program = _program(segment, i)
            if program:
                found.append(Command(program[0], tuple(segment[program[1]:])))
                break
        segment = []
    return found


def long_options(args: tuple[str, ...] | list[str]) -> list[str]:
    """The ``--long-options`` among arguments, unwrapped from usage brackets (``[--html P]``)."""
    names = []
    for arg in args:
        if arg == "--":
            break   # what follows is not an option
        arg = arg.lstrip("[(").split("=", 1)[0].rstrip("]),.;:")
        if arg.startswith("--") and OPTION.fullmatch(arg) and arg not in PLACEHOLDER_OPTIONS:
            names.append(arg)
    return names


# ---------------------------------------------------------------- what exists

@dataclass
class Cli:
    """One level of the ``personalens`` parser: its options and its subcommands."""

    options: set[str]
    commands: dict[str, "Cli"]

    def all_options(self) -> set[str]:
        out = set(self.options)
        for sub in self.commands.values():
            out |= sub.all_options()
        return out


def cli_tree(parser: argparse.ArgumentParser) -> Cli:
    options: set[str] = set()
    commands_: dict[str, Cli] = {}
    for action in parser._actions:   # argparse has no public way to list them
        options.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            commands_.update((name, cli_tree(sub)) for name, sub in action.choices.items())
    return Cli(options, commands_)


@dataclass
class Known:
    pytest_options: set[str]
    cli: Cli


def check_command(command: Command, known: Known) -> list[str]:
    """What in one command does not exist: ``unknown option --x`` or ``unknown subcommand y``."""
    if command.program == "pytest":
        return [f"pytest: unknown option {o}" for o in long_options(command.args) if o not in known.pytest_options]
    node, path, args = known.cli, ["personalens"], list(command.args)
    while node.commands and args:
        word = args[0]
        if word.startswith("-") or not re.fullmatch(r"[a-z][a-z0-9-]*", word):
            break   # an option before the subcommand, or a placeholder such as SUBCOMMAND / <cmd>
        if word not in node.commands:
            return [f"{' '.join(path)}: unknown subcommand {word}"]
        node, path, args = node.commands[word], path + [word], args[1:]
    return [f"{' '.join(path)}: unknown option {o}" for o in long_options(args) if o not in node.options]


def check_page(text: str, name: str, known: Known) -> tuple[list[str], int]:
    """The problems of one page's commands (``file:line: ...``) and how many commands were checked."""
    page = parse_markdown(text)
    problems, checked = [], 0
    everything = known.pytest_options | known.cli.all_options()
    for number, line in shell_lines(page) + code_spans(page.prose):
        found = commands(line)
        for command in found:
            checked += 1
            problems += [f"{name}:{number}: {p} (in: {line.strip()})" for p in check_command(command, known)]
        if not found and line.startswith("--"):   # an option on its own, as in the option tables
            checked += 1
            problems += [f"{name}:{number}: unknown option {o} (in: {line.strip()}): not an option of pytest or "
                         f"of any personalens command" for o in long_options(line.split()) if o not in everything]
    return problems, checked


# ---------------------------------------------------------------- links

def github_anchors(text: str) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in parse_markdown(text).prose.split("\n"):
        match = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1))   # a link: its text
        title = re.sub(r"<[^>]+>", "", title)
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)


def check_links(path: Path, text: str, name: str) -> list[str]:
    prose = CODE_SPAN.sub(lambda m: " " * len(m.group(0)) if "\n\n" not in m.group(2) else m.group(0),
                          parse_markdown(text).prose)
    problems = []
    targets = [(m.start(), m.group(1)) for m in LINK.finditer(prose)] + \
              [(m.start(), m.group(1)) for m in REFERENCE.finditer(prose)]
    for start, target in targets:
        line = prose.count("\n", 0, start) + 1
        if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        goal = (path.parent / file_part).resolve() if file_part else path
        if not goal.exists():
            problems.append(f"{name}:{line}: link to a missing file: {target}")
            continue
        if anchor and goal.is_file() and goal.suffix == ".md":
            if anchor not in github_anchors(goal.read_text(encoding="utf-8")):
                problems.append(f"{name}:{line}: link to a missing heading: {target} "
                                f"(no heading of {goal.relative_to(ROOT) if goal.is_relative_to(ROOT) else goal} "
                                f"has the anchor #{anchor})")
    return problems


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def known(tmp_path_factory) -> Known:
    """pytest's options as this repository's pytest parses them (one subprocess), and the CLI's parser."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    cache = tmp_path_factory.mktemp("pytest-cache")
    done = subprocess.run([sys.executable, "-m", "pytest", "--help", "-o", f"cache_dir={cache}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    options = set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", done.stdout))
    assert {"--record-mode", "--numprocesses", "--collect-only"} <= options, "pytest --help lacks the plugin or xdist"
    from personalens_testkit.cli import build_parser

    return Known(options, cli_tree(build_parser()))


DOCS = doc_files()


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ---------------------------------------------------------------- the docs themselves

@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_option_and_command_shown_exists(doc: Path, known: Known):
    problems, _ = check_page(doc.read_text(encoding="utf-8"), _name(doc), known)
    assert not problems, "the docs show options or commands that do not exist:\n" + "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_relative_link_resolves(doc: Path):
    problems = check_links(doc, doc.read_text(encoding="utf-8"), _name(doc))
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_docs_are_read_and_their_commands_found(known: Known):
    """The checks above look at something: the pages exist and hold the commands we know they show."""
    names = {_name(d) for d in DOCS}
    assert {"README.md", "docs/running.md", "docs/command-line.md", "cassettes/README.md",
            "examples/concierge_bot/README.md"} <= names
    programs = []
    for doc in DOCS:
        page = parse_markdown(doc.read_text(encoding="utf-8"))
        for _, line in shell_lines(page) + code_spans(page.prose):
            programs += [(c.program, c.args[:1]) for c in commands(line)]
    assert len(programs) > 50
    assert ("pytest", ("suites/",)) in programs and ("personalens", ("calibrate",)) in programs


# ---------------------------------------------------------------- the checker can fail

SAMPLE = """\
# Sample

Run `pytest suites/ --profiles 7 --no-such-option` or
`personalens merge RESULTS -o X [--htlm P]`; `--option` and `--<name>` are placeholders.

```bash
OPENAI_API_KEY=... \\
  .venv/bin/pytest suites/ --record-mode once --bogus-flag   # a comment with --ignored-too
pip install --no-such-pip-option personalens-testkit
python3 -m venv .venv && .venv/bin/python -m pytest tests/ --also-bogus
personalens data stats --sample 50 --nope
personalens frobnicate --x
```

```console
$ personalens compare A B --margin 0.1 --per-domain
--not-checked (output)
```

| option | meaning |
|---|---|
| `--repeat K` | fine |
| `--max-turnz N` | a typo |
"""


def test_the_checker_names_file_line_and_option(known: Known):
    problems, checked = check_page(SAMPLE, "sample.md", known)
    assert checked == 11
    assert problems == [
        "sample.md:7: pytest: unknown option --bogus-flag (in: OPENAI_API_KEY=... .venv/bin/pytest suites/ "
        "--record-mode once --bogus-flag   # a comment with --ignored-too)",
        "sample.md:10: pytest: unknown option --also-bogus (in: python3 -m venv .venv && .venv/bin/python -m pytest "
        "tests/ --also-bogus)",
        "sample.md:11: personalens data stats: unknown option --nope (in: personalens data stats --sample 50 --nope)",
        "sample.md:12: personalens: unknown subcommand frobnicate (in: personalens frobnicate --x)",
        "sample.md:3: pytest: unknown option --no-such-option (in: pytest suites/ --profiles 7 --no-such-option)",
        "sample.md:4: personalens merge: unknown option --htlm (in: personalens merge RESULTS -o X [--htlm P])",
        "sample.md:23: unknown option --max-turnz (in: --max-turnz N): not an option of pytest or of any "
        "personalens command",
    ]


def test_the_link_checker_finds_missing_files_and_headings(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Cassettes: record and replay\n\n```bash\n"
                                                "# not a heading\n```\n## Twice\n## Twice\n")
    page = tmp_path / "README.md"
    text = ("# Top\n\n[ok](docs/other.md#cassettes-record-and-replay) [ok](docs/other.md#twice-1) [ok](#top)\n"
            "[web](https://example.com/x#y) `[in code](nowhere.md)`\n"
            "[gone](docs/missing.md) [no heading](docs/other.md#not-a-heading) [self](#nope)\n")
    page.write_text(text)
    assert check_links(page, text, "README.md") == [
        "README.md:5: link to a missing file: docs/missing.md",
        f"README.md:5: link to a missing heading: docs/other.md#not-a-heading (no heading of "
        f"{tmp_path / 'docs' / 'other.md'} has the anchor #not-a-heading)",
        f"README.md:5: link to a missing heading: #nope (no heading of {page} has the anchor #nope)",
    ]


@pytest.mark.parametrize("heading, anchor", [
    ("## Cassettes: record and replay", "cassettes-record-and-replay"),
    ("## Can I trust my judge?", "can-i-trust-my-judge"),
    ("### `--turn-level` and the_curve", "--turn-level-and-the_curve"),
    ("# Data and licence", "data-and-licence"),
])
def test_github_anchors(heading: str, anchor: str):
    assert anchor in github_anchors(heading + "\n")


CASE_ID = re.compile(r"\buser(\d+)-((?:SD-[A-Za-z]+|MD)-task-\d+)\b")


def scenario_ids_named(text: str) -> set[str]:
    return {f"user{user}-{task}" for user, task in CASE_ID.findall(text)}


@pytest.fixture(scope="module")
def bundled_ids() -> set[str]:
    from personalens_testkit.data.loader import open_dataset

    dataset = open_dataset()
    return {s.scenario_id for user in dataset.user_numbers() for s in dataset.scenarios_for(user)}


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_scenario_the_docs_name_is_a_case_of_the_bundled_sample(doc: Path, bundled_ids: set[str]):
    missing = scenario_ids_named(doc.read_text(encoding="utf-8")) - bundled_ids
    assert not missing, f"{_name(doc)} names scenarios the bundled sample does not have: {sorted(missing)}"


def test_the_scenario_check_reads_ids_and_refuses_one_that_is_not_there(bundled_ids: set[str]):
    named = scenario_ids_named("e.g. `user7-SD-Movies-task-3`, `user7-MD-task-12` and user1111-MD-task-3.")
    assert named == {"user7-SD-Movies-task-3", "user7-MD-task-12", "user1111-MD-task-3"}
    assert named - bundled_ids == {"user7-MD-task-12"}


def test_the_documented_summary_is_what_a_replay_of_the_shipped_recording_prints(tmp_path):
    """docs/gates-and-reports.md shows the terminal summary of `pytest suites/` (the shipped recording, replayed):
    every line it shows (but the elision) is a line that replay prints."""
    page = (ROOT / "docs" / "gates-and-reports.md").read_text(encoding="utf-8")
    block = "PersonaLens summary" + page.split("```\nPersonaLens summary", 1)[1].split("```", 1)[0]
    shown = [line for line in block.splitlines() if line.strip() and line.strip() != "..."]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider", "--results-dir",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-3000:]
    printed = {line.rstrip() for line in done.stdout.splitlines()}
    assert len(shown) >= 6 and [line for line in shown if line.rstrip() not in printed] == []
