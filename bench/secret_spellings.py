"""The redaction measured both ways, through the real redactors (secrets.redact, redact_json, scrub_text):

- caught: --count generated spellings (tests/support/secret_corpus.py, seeded: escapes character by character,
  zero-width and format characters, full-width and look-alike letters, whitespace and JSON's \\n cut in, base64 at
  any offset, wrapped, its slashes written \\/, JSON-escaped once or twice) inside a context; a spelling counts as
  caught by a redactor when the context is left as it was and nothing of the secret is left but base64
  characters that also hold the bits of the bytes around it;
- touched: the shipped data (every profile and task of the bundled sample) and every request of the shipped
  dialogues, under --secrets random secrets: how many texts any redactor changes (must be none);
- the cost: microseconds a request body (the shipped ones) takes to scrub, and seconds for shapes that cost a
  scan dearly (a long run of backslashes, many distinct characters, a megabyte of escapes): linear, not quadratic.

    python bench/secret_spellings.py [--count N] [--secrets N]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from personalens_testkit.secrets import scrub_text  # noqa: E402
from tests.support import secret_corpus  # noqa: E402
from tests.test_secret_spellings import leftover, redactors, shipped_texts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--secrets", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(43)
    missed = {"redact": 0, "scrub_text": 0, "redact_json": 0}
    for _ in range(args.count):
        value = secret_corpus.secret(rng)
        before = rng.choice(["Your key is ", "token=", '{"auth": "', ""])
        after = rng.choice([" - keep it.", '"}', "&x=1", ""])
        spelled = secret_corpus.spelling(rng, value)
        for name, out in redactors(before + spelled + after, [(value, "<K>")]).items():
            left = leftover(out, before, after)
            if left is None or len(re.sub(r"\s|\\", "", left)) > 10:
                missed[name] += 1
    for name, count in missed.items():
        print(f"generated spellings, {name}: {args.count - count:,} of {args.count:,} caught")
    texts = shipped_texts()
    secrets = [(secret_corpus.secret(rng), f"<S{i}>") for i in range(args.secrets)]
    touched = sum(1 for text in texts if any(out != text for out in redactors(text, secrets).values()))
    print(f"benign: {len(texts):,} shipped texts ({sum(map(len, texts)) >> 20} MiB) under {args.secrets} random "
          f"secrets: {touched} touched")
    bodies = [text.encode() for text in texts if text.startswith("{")]
    started = time.process_time()
    for body in bodies:
        scrub_text(body, secrets[:3])
    spent = time.process_time() - started
    print(f"cost: {spent / len(bodies) * 1e6:.0f} us a request body (mean {sum(map(len, bodies)) // len(bodies):,} "
          f"bytes; {len(bodies):,} bodies, 3 secrets)")
    started = time.process_time()
    for body in bodies:
        scrub_text(body, secrets[:3], spellings=False)
    quick = time.process_time() - started
    print(f"cost: {quick / len(bodies) * 1e6:.0f} us a request body for a replay's quick look-up key (plain forms "
          f"only; a body holding a spelled secret misses it and is looked up the full way)")
    worst = {"a run of 1,000,000 backslashes": "\\" * 1_000_000 + " 50% off",
             "20,000 distinct characters beyond ASCII": "".join(chr(0x4E00 + i) for i in range(20_000)),
             "1 MB of escapes": "\\u0041%41&#65;" * 70_000}
    for name, text in worst.items():
        started = time.process_time()
        scrub_text(text.encode(), secrets[:3])
        print(f"worst shapes: {name}: {time.process_time() - started:.2f} s")


if __name__ == "__main__":
    main()
