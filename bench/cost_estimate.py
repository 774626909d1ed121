"""`personalens estimate` against what live runs spend: a loopback OpenAI-compatible server that reports token
counts (characters / 4 of each request's JSON body and answer), the roles named as priced models (so the
shipped price table prices them), and the same selection three times:

1. the estimate before anything is recorded (from the protocol's shape: point and range);
2. a live run (``--record-mode all``): its report's measured cost;
3. the estimate again, now from that run's recording (measured tokens per case);
4. a second live run: what the measured estimate is compared with.

Prints each figure and the estimate's error against the run it predicts ((estimate - measured) / measured), and
whether the measured cost lies in the shape estimate's range.

    python bench/cost_estimate.py                      # 2 shards of the sample, 3 follow-ups a dialogue
    python bench/cost_estimate.py --shard 1/16 --turns 6
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
sys.path.insert(0, str(ROOT))

from tests.support.fake_llm import FakeLLM, Script  # noqa: E402  (the tests' loopback server)

SPECS = ["--user-model", "openai:gpt-4o-mini", "--judge-model", "openai:gpt-4o", "--assistant-model",
         "openai:gpt-4.1-mini"]


def options(shard: str, tmp: Path) -> list[str]:
    return [*SPECS, "--shard", shard, "--record-mode", "all", "--cassette-dir", str(tmp / "cassettes"),
            "--results-dir", str(tmp / "results")]


def estimate(shard: str, tmp: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "personalens_testkit.cli", "estimate", *options(shard, tmp), "--json"],
                          cwd=ROOT, env={**ENV, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, capture_output=True,
                          text=True, timeout=600)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout)


def live(shard: str, tmp: Path, url: str) -> float:
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/", "-q", "-p", "no:cacheprovider",
                           *options(shard, tmp)], cwd=ROOT, env={**ENV, "OPENAI_BASE_URL": url},
                          capture_output=True, text=True, timeout=3600)
    reports = sorted((tmp / "results").glob("*/report.json"), key=lambda p: p.stat().st_mtime_ns)
    if not reports:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-2000:])
    return float(json.loads(reports[-1].read_text())["cost"]["total_spent"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard", default="1/32", help="the selection (default 1/32: 128 scenarios)")
    parser.add_argument("--turns", type=int, default=3, help="the user agent ends after this many follow-ups")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, FakeLLM(Script(terminate_after=args.turns)) as fake:
        tmp = Path(folder)
        shaped = estimate(args.shard, tmp)
        first = live(args.shard, tmp, fake.url)
        measured = estimate(args.shard, tmp)
        second = live(args.shard, tmp, fake.url)
    low, point, high = shaped["total_cost"]
    print(f"selection --shard {args.shard}: {shaped['cases']} cases; loopback dialogues of {args.turns} follow-ups")
    print(f"estimate from the protocol's shape: ${point:.4f} (range ${low:.4f} - ${high:.4f})")
    print(f"live run 1 spent ${first:.4f}: shape estimate error {(point - first) / first:+.1%}; "
          f"{'inside' if low <= first <= high else 'OUTSIDE'} its range")
    m_low, m_point, m_high = measured["total_cost"]
    print(f"estimate from run 1's recording ({measured['measured']} of {measured['cases']} cases measured): "
          f"${m_point:.4f}")
    print(f"live run 2 spent ${second:.4f}: measured estimate error {(m_point - second) / second:+.1%}")


if __name__ == "__main__":
    main()
