"""What isolating the bot costs a gate run (issue 42): the pieces the gate adds around the bot, timed as the
gate runs them, and how many attack members the boundary refused.

    python bench/gate_isolation.py [--repeat 20] [--bot-processes 8]

- at the start: a user id picked, the bot's folder made, passage to the checkout and the interpreter, and the
  probe (one interpreter start as the bot, checking every protected path);
- at the end: every process of the bot ended (``end_all``) with ``--bot-processes`` of them running, detached
  (each in a session of its own, ignoring SIGTERM), and the bot's files removed;
- the attack members: every (target x way of writing) pair of tests/test_gate_sandbox.py's kinds, tried once
  each as the bot against a gate's folders made as the gate makes them, with how many succeeded (must be 0)
  and how many benign paths the probe flagged (must be 0).

Needs root (the gate's isolation does). Prints medians and ranges in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from personalens_testkit.assistants.boundary import probe, protected_paths  # noqa: E402
from personalens_testkit.assistants.bot_identity import open_sandbox  # noqa: E402
from tests.test_gate_sandbox import WRITES, gate_files  # noqa: E402


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--bot-processes", type=int, default=8)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/gate_isolation.py: needs root (the gate isolates the bot only as root or under sudo)")
        return 2
    start, probing, end = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        files = gate_files(root)
        reach = [root / "repo", Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix)]
        protected = protected_paths(files["scratch"], files["out"], files["summary"])
        flagged = 0
        for _ in range(args.repeat):
            began = time.perf_counter()
            box = open_sandbox(pass_env=(), wanted=True, reach=reach)
            made = time.perf_counter()
            flagged += len(probe(box, protected=protected, readable=[str(root / "repo")]))
            probed = time.perf_counter()
            start.append(probed - began)
            probing.append(probed - made)
            code = ("import os, signal, time\nfor _ in range(%d):\n    if os.fork() == 0:\n        os.setsid()\n"
                    "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        time.sleep(60)\n        os._exit(0)\n"
                    % args.bot_processes)
            box.popen([sys.executable, "-c", code], cwd=Path("/"), env=box.environment(),
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait()
            while len(box.processes()) < args.bot_processes:
                time.sleep(0.01)
            began = time.perf_counter()
            box.end_all()
            box.remove_files()
            end.append(time.perf_counter() - began)
        # the attack members, once each
        box = open_sandbox(pass_env=(), wanted=True, reach=reach)
        tried = succeeded = 0
        try:
            for name in ("conftest", "cassette", "report", "summary"):
                for way, statement in sorted(WRITES.items()):
                    fresh = gate_files(Path(tempfile.mkdtemp(dir=root)))
                    code = f"import os\np = {str(fresh[name])!r}\ntry:\n    {statement}\n    print('yes')\nexcept OSError:\n    print('no')"
                    out = box.popen([sys.executable, "-c", code], cwd=Path("/"), env=box.environment(),
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).communicate()[0]
                    tried += 1
                    succeeded += out.strip() == b"yes"
        finally:
            box.end_all()
            box.remove_files()
    print(f"isolation at the start (user id, bot folder, passage, probe): {_ms(start)}")
    print(f"  of which the probe (one interpreter start as the bot): {_ms(probing)}")
    print(f"isolation at the end ({args.bot_processes} detached processes ended, files removed): {_ms(end)}")
    print(f"probe on a sound set-up: {flagged} false alarms in {args.repeat} runs")
    print(f"attack members (target x way of writing): {tried} tried, {succeeded} succeeded")
    print(json.dumps({"start_ms": statistics.median(start) * 1000, "end_ms": statistics.median(end) * 1000,
                      "false_alarms": flagged, "attacks": tried, "attacks_succeeded": succeeded}))
    return 0 if succeeded == 0 and flagged == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
