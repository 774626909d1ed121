"""The user agent's checks measured both ways (issue 49): per kind, the share of faults found when one is put into
each clean dialogue of the labelled set (tests/data/user_faults, many ways a kind, seeded), the share of clean
dialogues flagged (the labelled set's, and clean ones built from varied phrases), and on a recording - the shipped
one on the embedded SmolLM2-135M model by default - the share of dialogues flagged, per kind.

    python bench/user_faults.py [--tries 200] [--recording cassettes/reference]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from personalens_testkit.agents.user_agent import UserAgent  # noqa: E402
from personalens_testkit.agents.user_faults import RULES, facts_of, find_user_faults  # noqa: E402
from tests.user_fault_kinds import INJECTORS, PHRASES, clean, facts, labelled  # noqa: E402



def faulted(found) -> bool:
    return any(fault.direction != "noted" for fault in found)


def injected(tries: int) -> None:
    dialogues = clean()
    print(f"faults put into the {len(dialogues)} clean dialogues of the labelled set, {tries} tries a kind:")
    for kind, inject in INJECTORS.items():
        caught = 0
        for n in range(tries):
            faulty, expected = inject(dialogues[n % len(dialogues)], random.Random(n))
            caught += expected in {(f.turn, f.rule) for f in find_user_faults(facts(faulty))}
        print(f"  {kind:22s} found {caught}/{tries} ({caught / tries:.1%})")
    natural = [d for d in labelled() if d["faults"]]
    found = sum(all(tuple(f) in {(x.turn, x.rule) for x in find_user_faults(facts(d))} for f in d["faults"])
                for d in natural)
    print(f"  natural faults of the labelled set: {found}/{len(natural)} dialogues read as labelled")


def clean_flags(tries: int) -> None:
    dialogues = clean()
    flagged = sum(faulted(find_user_faults(facts(d))) for d in dialogues)
    print(f"clean dialogues flagged: labelled set {flagged}/{len(dialogues)}", end="")
    rng, flagged = random.Random(1), 0
    for _ in range(tries):
        turns, seen = [], set()
        for _ in range(rng.randrange(1, 9)):
            text = " ".join(rng.choice(PHRASES) for _ in range(rng.randrange(3, 7))).capitalize() + "."
            if text.lower() not in seen:
                seen.add(text.lower())
                turns += [{"role": "user", "content": text}, {"role": "assistant", "content": "Done, booked."}]
        found = find_user_faults(facts_of(turns, "user_terminated", profile_texts=[dialogues[0]["profile"]],
                                          preferences=dialogues[0]["preferences"], intent=dialogues[0]["intent"]))
        flagged += faulted(found)
    print(f"; built from phrases {flagged}/{tries} ({flagged / tries:.1%})", end="")
    written = calibration_dialogues()
    flagged = sum(faulted(find_user_faults(facts_of(d["messages"], "user_terminated"))) for d in written)
    print(f"; the calibration set's dialogues (written as users who play their part) {flagged}/{len(written)}")


def calibration_dialogues() -> list[dict]:
    import json

    path = ROOT / "personalens_testkit" / "calibration" / "dialogues.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def recording(folder: Path) -> None:
    from personalens_testkit.data.context import build_context
    from personalens_testkit.data.loader import open_dataset
    from personalens_testkit.results.recorded import load_recorded

    rows = load_recorded(folder / "results.jsonl.xz")
    dataset = open_dataset(None)
    kinds, effects = Counter(), Counter()
    for row in rows.values():
        scenario = next(s for s in dataset.scenarios_for(int(row.user_id.removeprefix("user")))
                        if s.scenario_id == row.scenario_id)
        ctx = build_context(dataset, scenario)
        preferences = [v if isinstance(v, str) else ", ".join(v) for p in ctx.preferences.values() for v in p.values()]
        found = find_user_faults(facts_of(row.transcript, row.termination, profile_texts=[
            UserAgent(model=None).prompt_prefix(ctx)], preferences=preferences, intent=ctx.intent))
        kinds.update({fault.rule for fault in found})
        effects["hindered" if any(f.direction == "hindered" for f in found) else
                "helped" if any(f.direction == "helped" for f in found) else "clean or noted only"] += 1
    total = len(rows)
    print(f"recording {folder} ({total} dialogues, user agent {next(iter(rows.values())).user_model}):")
    for rule in RULES:
        print(f"  {rule.name:22s} {kinds[rule.name]:3d} ({kinds[rule.name] / total:.0%})")
    print("  the dialogue as a whole: " + ", ".join(f"{name} {count} ({count / total:.0%})"
                                                   for name, count in effects.most_common()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=200)
    parser.add_argument("--recording", default=str(ROOT / "cassettes" / "reference"))
    args = parser.parse_args()
    injected(args.tries)
    clean_flags(args.tries)
    recording(Path(args.recording))
    return 0


if __name__ == "__main__":
    sys.exit(main())
