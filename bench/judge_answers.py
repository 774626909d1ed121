"""The judge-answer grammar measured both ways, through the real parser (agents/answers.parse_answer):

- real answers: every judge answer in the shipped recording (cassettes/reference, the embedded
  model, constrained JSON) - how many are read (must be all), and whether any reads differently
  from the score its recorded row holds;
- benign: tests/data/judge_answers/benign.jsonl, hand-written well-formed answers whose reasons
  mention numbers, scores and "final" - how many are read as their one value (must be all);
- hostile: tests/data/judge_answers/hostile.jsonl, hedged, doubled, qualified or mistyped answers -
  how many are errors (must be all) and how many became a score (must be none);
- generated (tests/support/answer_corpus.py, seeded): --count hostile answers, each a valid answer with a
  second, different value after it (value x connector x position x separator x language x wrapper) - how
  many became a score (must be none); --count benign answers, reasoning and reasons full of numbers - how
  many were lost (at most 1 in 100); and a third kind read apart: reasons that end a statement with another
  value of the scale ("... at turn 2.") - refused by design, so their share is printed;
- against upstream's parsing (the paper's code reads an answer with two regular expressions: the first
  ``<Label>: <digits>`` of a rating, ``util/gather_evaluation.py:47-49``, and the first ``VERDICT: True|False``,
  any case, of a completion verdict, ``:173-175``): the same generated answers in the paper's label-line form,
  read both ways - how many each reads as the answer's value, leaves unreadable, or reads as another value.

    python bench/judge_answers.py [--show] [--count N]     # --show: list each answer that misses its mark
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from personalens_testkit.agents.answers import (
    PersonalizationAnswer, RatingAnswer, TaskCompletionAnswer, TurnScoresAnswer, parse_answer,
)
from personalens_testkit.errors import JudgeAnswerError
from tests.support import answer_corpus

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "judge_answers"
RECORDING = ROOT / "cassettes" / "reference"
MODELS = {"personalization": PersonalizationAnswer, "task_completion": TaskCompletionAnswer}


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def recorded_answers() -> list[dict]:
    """(kind, raw) of every judge call in the shipped cassettes, its kind read from the schema it was sent."""
    found = []
    for path in sorted(RECORDING.glob("*.json.xz")):
        for interaction in json.loads(lzma.decompress(path.read_bytes())).get("interactions", []):
            body = interaction["request"].get("body")
            try:
                request = json.loads(body)
            except (TypeError, ValueError):
                continue
            schema = (request.get("response_format") or {}).get("schema")
            if not schema:
                continue
            keys = schema.get("properties", {})
            kind = ("task_completion" if "verdict" in keys else "turns" if "scores" in keys
                    else "personalization" if "observations" in keys else "coherence_user")
            answer = json.loads(interaction["response"]["body"]["string"])["choices"][0]["message"]["content"]
            found.append({"answer": kind, "raw": answer})
    return found


def read(case: dict) -> object:
    """The value the parser reads, or the JudgeAnswerError."""
    model = TurnScoresAnswer if case["answer"] == "turns" else MODELS.get(case["answer"], RatingAnswer)
    try:
        answer = parse_answer(case["raw"], model, case["answer"])
    except JudgeAnswerError as exc:
        return exc
    return answer.verdict if model is TaskCompletionAnswer else answer.scores if model is TurnScoresAnswer else answer.score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--count", type=int, default=10_000, help="generated answers of each kind (default 10,000)")
    args = parser.parse_args()
    real, benign, hostile = recorded_answers(), load("benign.jsonl"), load("hostile.jsonl")
    started = time.perf_counter()
    real_read = [read(case) for case in real]
    benign_read = [read(case) for case in benign]
    hostile_read = [read(case) for case in hostile]
    each_us = (time.perf_counter() - started) / (len(real) + len(benign) + len(hostile)) * 1e6
    unread = [case for case, value in zip(real, real_read) if isinstance(value, JudgeAnswerError)]
    print(f"real answers (shipped recording, {len(real)} judge calls): read {len(real) - len(unread)} of {len(real)}")
    wrong_benign = [(case, value) for case, value in zip(benign, benign_read) if value != case["value"]]
    marked = sum("lost" in case for case in benign)
    print(f"benign (hand-written, reasons full of numbers): read as their value {len(benign) - len(wrong_benign)} of "
          f"{len(benign)}; {marked} marked lost by design (a reason ending a statement with another value, prose "
          f"after a label line), {sum('lost' not in case for case, _ in wrong_benign)} lost unmarked")
    scored = [(case, value) for case, value in zip(hostile, hostile_read) if not isinstance(value, JudgeAnswerError)]
    print(f"hostile (hedged, doubled, qualified, mistyped): errors {len(hostile) - len(scored)} of {len(hostile)}; "
          f"read as a score {len(scored)}")
    print(f"parse time: {each_us:.0f} us an answer")
    generated(args.count, args.show)
    if args.show:
        for case in unread:
            print("  real answer not read:", repr(case["raw"][:200]))
        for case, value in wrong_benign:
            print(f"  benign misread ({value}):", repr(case["raw"][:200]))
        for case, value in scored:
            print(f"  hostile read as {value}:", repr(case["raw"][:200]))


def generated(count: int, show: bool) -> None:
    rng = random.Random(43)
    scored = []
    for _ in range(count):
        kind, raw = answer_corpus.hostile(rng.choice)
        value = read({"answer": kind, "raw": raw})
        if not isinstance(value, JudgeAnswerError):
            scored.append((raw, value))
    print(f"generated hostile (a second, different value after the answer): {count:,}; read as a score {len(scored)}")
    lost = []
    for _ in range(count):
        kind, raw, expected = answer_corpus.benign(rng.choice)
        value = read({"answer": kind, "raw": raw})
        if value != expected:
            lost.append((raw, value))
    print(f"generated benign (reasoning and reasons full of numbers): {count:,}; lost {len(lost)} "
          f"({len(lost) / count:.2%})")
    refused = 0
    for _ in range(count):
        kind, raw, expected = answer_corpus.ending_with_a_number(rng.choice)
        value = read({"answer": kind, "raw": raw})
        assert value == expected or isinstance(value, JudgeAnswerError), (raw, value)  # never another value
        refused += isinstance(value, JudgeAnswerError)
    print(f"generated reasons ending a statement with a number (\"... at turn 2.\"): {count:,}; refused {refused} "
          f"({refused / count:.1%}; the judge is asked again), read as another value 0")
    against_upstream(count, rng)
    if show:
        for raw, value in scored[:20]:
            print(f"  generated hostile read as {value}:", repr(raw[:200]))
        for raw, value in lost[:20]:
            print(f"  generated benign lost ({value}):", repr(raw[:200]))


def upstream_read(kind: str, raw: str) -> object:
    """What the paper's code reads from an answer: the first ``<Label>: <digits>``, or the first ``VERDICT: True|False``
    in any case; None when nothing matches (a rating left out, a verdict counted as not completed)."""
    key, _, label = answer_corpus.KINDS[kind]
    if key == "verdict":
        found = re.search(r"VERDICT: (True|False)", raw, re.IGNORECASE)
        return None if found is None else found.group(1).lower() == "true"
    found = re.search(rf"{label}: (\d+)", raw)
    return None if found is None else int(found.group(1))


def against_upstream(count: int, rng: random.Random) -> None:
    """The generated answers in the label-line form the paper's prompts ask for, read by our grammar and by upstream's."""
    labelled = [form for form in answer_corpus.FORMS if "label" in form]

    def choose(options):
        return rng.choice(labelled if options is answer_corpus.FORMS else options)

    for name, make in (("benign", answer_corpus.benign),
                       ("reasons ending a statement with a number", answer_corpus.ending_with_a_number)):
        tally = {"ours": [0, 0, 0], "upstream's": [0, 0, 0]}  # its value, unreadable, another value
        for _ in range(count):
            kind, raw, expected = make(choose)
            for reader, value in (("ours", read({"answer": kind, "raw": raw})), ("upstream's", upstream_read(kind, raw))):
                unreadable = value is None or isinstance(value, JudgeAnswerError)
                tally[reader][0 if value == expected else 1 if unreadable else 2] += 1
        shown = "; ".join(f"{reader}: its value {a / count:.1%}, unreadable {b / count:.1%}, another value {c / count:.1%}"
                          for reader, (a, b, c) in tally.items())
        print(f"label-line answers, generated {name}: {count:,}; {shown}")
    ours = theirs = 0
    for _ in range(count):
        kind, raw = answer_corpus.hostile(choose)
        ours += not isinstance(read({"answer": kind, "raw": raw}), JudgeAnswerError)
        theirs += upstream_read(kind, raw) is not None
    print(f"label-line answers, generated hostile (a second, different value after the answer): {count:,}; read as a "
          f"score: ours {ours / count:.1%} (an error: the judge is asked again), upstream's {theirs / count:.1%} (the "
          "first value, the second ignored)")


if __name__ == "__main__":
    main()
