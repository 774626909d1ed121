"""The concierge bot as a subprocess speaking JSON lines (kind = "command"): one request per
line on stdin, one response per line on stdout; logs go to stderr. It exits when stdin closes."""

from __future__ import annotations

import json
import sys

from concierge import reply


def main() -> None:
    print("concierge (JSON lines) ready", file=sys.stderr, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = reply(json.loads(line))
        except Exception as exc:  # a real bot would answer its own error in its own way
            print(f"cannot answer: {exc}", file=sys.stderr, flush=True)
            answer = {"error": str(exc)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
