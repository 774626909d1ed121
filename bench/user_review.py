"""The review of the user agent (``--review-user``) measured both ways (issue 49): per kind, the share of dialogues
in which a review names the fault put into a clean dialogue of the labelled set (tests/data/user_faults; the checks'
kinds a reader can see, and the review's own: off task, contradicting the profile, doing the assistant's work,
ending too early, breaking character), and the share of clean dialogues it flags. Each review is one call of the
reviewer's role through the testkit's own path (``Judge.review_user``: its prompt, its answer grammar).

    python bench/user_review.py [--model local] [--tries 5] [--json FILE]

``--model``: the reviewer (``local``: the embedded SmolLM2-135M; any model spec the run takes, with its credentials
in the environment). ``--tries``: dialogues a kind (each kind put into the clean dialogues in turn, seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from personalens_testkit.agents.calls import CallLog  # noqa: E402
from personalens_testkit.agents.judge import Judge  # noqa: E402
from personalens_testkit.data.context import ScenarioContext  # noqa: E402
from personalens_testkit.data.models import Scenario, Situation, Task  # noqa: E402
from personalens_testkit.errors import PersonalensError  # noqa: E402
from personalens_testkit.llm.base import Message  # noqa: E402
from personalens_testkit.run.models import ModelPool  # noqa: E402
from personalens_testkit.settings.resolve import resolve_settings  # noqa: E402
from tests.user_fault_kinds import INJECTORS, REVIEW_INJECTORS, clean  # noqa: E402

#: the checks' kinds a reader of the transcript can see (an opening's TERMINATE is removed before anyone reads it;
#: the turn limit is the run's to see), and the review rules that name each
VISIBLE = ("pasted_profile", "preference_in_opening", "spoke_as_assistant", "empty_turn", "repeated_turn",
           "other_language")
ALSO = {"preference_in_opening": {"states_preferences"}, "spoke_as_assistant": {"broke_character"},
        "broke_character": {"spoke_as_assistant"}}


def context(d: dict) -> ScenarioContext:
    """The labelled dialogue's profile as the reviewer reads a scenario's: demographics, preferences, past
    interactions, the task."""
    head, _, rest = d["profile"].partition("\n\nPreferences:\n")
    prefs_text, _, story = rest.partition("\n\n")
    pairs = lambda text: dict(re.findall(r"^- ([^:\n]+): (.+)$", text, flags=re.M))  # noqa: E731
    domain = d["id"].split("-")[0].capitalize()
    task = Task.model_validate({"task_id": f"SD-{domain}-task-1", "Task Description": d["intent"],
                                "User Intent": d["intent"], "Task Goal": d["intent"], "Relevant Affinity Types": [],
                                "Relevant Domains": [domain]})
    situation = Situation.model_validate({"Location": "home", "Device": "phone", "Time of Day": "evening",
                                          "Day of the Week": "weekday", "Environment": "quiet"})
    return ScenarioContext(scenario=Scenario(user_id="user0", task=task, situation=situation),
                           demographics=pairs(head), preferences={domain: pairs(prefs_text)},
                           interactions={domain: story.strip()})


def review(judge: Judge, d: dict) -> tuple[set[str], bool, str | None]:
    """(the rules the review named, whether it named any, why it failed)."""
    messages = [Message(m["role"], m["content"]) for m in d["messages"]]
    try:
        answer = judge.review_user(context(d), messages, CallLog())
    except PersonalensError as exc:
        return set(), False, type(exc).__name__
    return {fault.rule for fault in answer.faults}, bool(answer.faults), None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kinds = {**{k: INJECTORS[k] for k in VISIBLE}, **REVIEW_INJECTORS}
    dialogues = clean()
    with tempfile.TemporaryDirectory() as tmp:
        settings = resolve_settings({"judge_model": args.model, "review_user": True}, Path(tmp), dict(os.environ))
        pool = ModelPool(settings, Path(tmp), live_roles=frozenset({"reviewer"}), is_controller=True)
        try:
            judge = Judge(pool.chat(settings.review_user_model, "reviewer"))
            started = time.perf_counter()
            figures: dict[str, dict[str, int]] = {}
            print(f"the review on {args.model}: {args.tries} dialogue(s) a kind, {len(dialogues)} clean")
            for kind, inject in kinds.items():
                named = flagged = failed = 0
                for n in range(args.tries):
                    faulty, (_, rule) = inject(dialogues[n % len(dialogues)], random.Random(n))
                    rules, any_fault, why = review(judge, faulty)
                    named += bool(rules & ({rule} | ALSO.get(rule, set())))
                    flagged += any_fault
                    failed += why is not None
                figures[kind] = {"tries": args.tries, "named": named, "flagged": flagged, "failed": failed}
                print(f"  {kind:22s} named {named}/{args.tries}, any fault {flagged}/{args.tries}, "
                      f"review failed {failed}", flush=True)
            wrong = failed = 0
            for d in dialogues:
                _, any_fault, why = review(judge, d)
                wrong += any_fault
                failed += why is not None
            figures["clean"] = {"tries": len(dialogues), "flagged": wrong, "failed": failed}
            print(f"  clean dialogues flagged {wrong}/{len(dialogues)}, review failed {failed}")
            print(f"{time.perf_counter() - started:.0f} s")
        finally:
            pool.close()
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
