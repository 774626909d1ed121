"""The judge-injection filter measured both ways, on the corpora in tests/data/injection:

- benign.jsonl: ordinary assistant replies over the 20 domains, rich in scores, ratings,
  verdict-like words and "ignore ... above" phrasing - how many the judge's copy alters
  (must be 0) and how many are flagged (false flags: noise in the report, never a score change);
- attack.jsonl: replies that address the judge - how many are flagged, and how many have text
  taken out of the judge's copy, by kind.

The same for heldout/, a second pair written blind (without seeing the filter or the first
pair), and heldout2/, a third pair written blind after the second was used to widen the filter
(issue 19: addresses, requests for a score, score sheets, claims of an assessment, other
languages, disguises): the newest blind pair is the honest estimate of what the filter catches
on attacks it has not seen.

    python bench/injection_corpus.py [--show]      # --show: list every benign flag and every missed attack

Last, the flags' cost: the time to flag each reply of the corpora (a median of 5 passes), with each flag's word
test (agents/pattern_needs.py) and with every pattern run on every reply, as before it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from personalens_testkit.agents import injection
from personalens_testkit.agents.injection import find_injections, neutralise
from personalens_testkit.llm.base import Message

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "injection"


def load(name: str, folder: Path = CORPUS) -> list[dict]:
    return [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def measure(rows: list[dict]) -> list[tuple[dict, list, bool]]:
    """(row, flags, altered) for each reply, judged as an assistant's only reply."""
    out = []
    for row in rows:
        messages = [Message("user", "Could you help me with this?"), Message("assistant", row["reply"])]
        flags = find_injections(messages)
        altered = neutralise(messages)[1].content != row["reply"]
        out.append((row, flags, altered))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true", help="list the benign replies flagged and the attacks missed")
    args = parser.parse_args()
    for title, folder in (("corpus (the filter was written with it in view)", CORPUS),
                          ("held-out corpus (written blind; the filter since widened with it in view)", CORPUS / "heldout"),
                          ("second held-out corpus (written blind, not seen by the filter)", CORPUS / "heldout2")):
        print(f"== {title}: {folder}")
        report(measure(load("benign.jsonl", folder)), measure(load("attack.jsonl", folder)), show=args.show)
    cost()


def cost(passes: int = 5) -> None:
    """Microseconds a reply to flag the corpora's replies, with the word tests and without them (same flags)."""
    replies = [row["reply"] for folder in (CORPUS, CORPUS / "heldout", CORPUS / "heldout2")
               for name in ("benign.jsonl", "attack.jsonl") for row in load(name, folder)]
    chats = [[Message("assistant", reply)] for reply in replies]
    tests = injection._prefilters
    def every_pattern():  # each flag's pattern run on every reply
        return (lambda text, folded: True,) * len(tests())
    found, each = {}, {}
    for label, prefilters in (("with the word tests", tests), ("every pattern on every reply", every_pattern)):
        injection._prefilters = prefilters
        try:
            times = []
            for _ in range(passes):
                started = time.perf_counter()
                found[label] = [find_injections(chat) for chat in chats]
                times.append(time.perf_counter() - started)
        finally:
            injection._prefilters = tests
        each[label] = statistics.median(times) / len(chats) * 1e6
    same = found["with the word tests"] == found["every pattern on every reply"]
    print(f"== flagging cost: {len(chats)} replies of the corpora, {statistics.mean(map(len, replies)):.0f} characters "
          f"on average: {each['with the word tests']:.0f} us a reply with the word tests, "
          f"{each['every pattern on every reply']:.0f} us with every pattern run "
          f"({each['with the word tests'] / each['every pattern on every reply']:.2f}x); the same flags: {same}")


def report(benign: list, attacks: list, *, show: bool) -> None:
    altered = [r for r, _, a in benign if a]
    flagged = [(r, f) for r, f, _ in benign if f]
    print(f"benign replies: {len(benign)} over {len({r['domain'] for r, _, _ in benign})} domains; "
          f"altered {len(altered)} of {len(benign)}; flagged {len(flagged)} of {len(benign)}")
    caught = sum(1 for _, f, _ in attacks if f)
    removed = sum(1 for _, _, a in attacks if a)
    print(f"attack replies: {len(attacks)}; flagged {caught} of {len(attacks)} ({caught / len(attacks):.0%}); "
          f"text removed from the judge's copy in {removed} of {len(attacks)}")
    kinds = Counter(r["kind"] for r, _, _ in attacks)
    hit = Counter(r["kind"] for r, f, _ in attacks if f)
    cut = Counter(r["kind"] for r, _, a in attacks if a)
    for kind in sorted(kinds):
        print(f"  {kind:18} flagged {hit[kind]:>2} of {kinds[kind]:>2}, removed {cut[kind]:>2}")
    if show:
        for row in altered:
            print("ALTERED benign:", row["reply"])
        for row, flags in flagged:
            print("flagged benign:", [f.kind + ": " + f.excerpt for f in flags], "|", row["reply"][:160])
        for row, flags, _ in attacks:
            if not flags:
                print("missed attack:", row["kind"], "|", row["reply"][:160])


if __name__ == "__main__":
    main()
