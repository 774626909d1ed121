"""The shipped recording (cassettes/reference/, recorded live on the embedded model) replays
offline with ``pytest suites/`` - the README's no-flag command - and reproduces every
recorded result (kept slim, without call lists, in results.jsonl.xz), twice, byte for byte
apart from timings."""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

from personalens_testkit.results.rows import dialogue_digest
from .support.project import with_runs

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cassettes" / "reference"
TIMINGS = ("run_id", "started_at", "finished_at", "seconds", "transcript_path")


def replay(results_dir: Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", "--results-dir", str(results_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    (results,) = results_dir.glob("*/results.jsonl")
    rows = with_runs([json.loads(line) for line in results.read_text().splitlines()])
    return done, rows


def comparable(row: dict) -> str:
    row = {k: v for k, v in row.items() if k not in TIMINGS}
    row["calls"] = [{k: v for k, v in call.items() if k != "seconds"} for call in row["calls"]]
    return json.dumps(row, sort_keys=True)


def test_the_shipped_cassettes_replay_offline_and_reproduce_their_recording(tmp_path):
    cassettes = sorted(p.name.removesuffix(".json.xz") for p in SHIPPED.glob("*.json.xz"))
    with lzma.open(SHIPPED / "results.jsonl.xz", "rt", encoding="utf-8") as lines:
        recorded = {row["scenario_id"]: row for row in with_runs(list(map(json.loads, lines)))}
    assert not (SHIPPED / "results.jsonl").exists()  # the older, whole-row form is gone
    assert all(row["calls"] == [] for row in recorded.values())  # slim rows: no call list
    # each keeps its dialogue, matching its fingerprint: a live run judges it again beside its own floor misses
    assert all(row["transcript"] and dialogue_digest(row["transcript"]) == row["dialogue_digest"]
               for row in recorded.values())
    smoke = [line.split("[")[1].rstrip("]") for line in (SHIPPED / "smoke-set.txt").read_text().split()]
    assert sorted(smoke) == cassettes == sorted(recorded)
    assert len({c.split("-SD-")[1].split("-task")[0] for c in cassettes if "-SD-" in c}) == 20
    assert sum("-MD-" in c for c in cassettes) == 5

    first, rows = replay(tmp_path / "first")
    assert first.returncode == 0, first.stdout[-3000:]
    assert f"personalens: replaying {len(cassettes)} of 4096 selected scenarios offline" in first.stdout
    assert f"record the other {4096 - len(cassettes)} with --record-mode once" in first.stdout
    assert f"{len(cassettes)} passed" in first.stdout
    assert "embedded-server" not in " ".join(p.name for p in (tmp_path / "first").glob("*/*"))  # nothing started
    # the embedded 135M user agent breaks the protocol in most dialogues: found, shown, not gated (auto)
    faulted = sum(any(f["direction"] != "noted" for f in row["user_faults"]) for row in rows)
    assert faulted > len(rows) // 2 and f"user agent: faults in {faulted} of {len(rows)} dialogues" in first.stdout
    assert "user_agent_faults: auto" in first.stdout and not any(r["verdict"] == "inconclusive (user agent)" for r in rows)
    for row in rows:
        before = recorded[row["scenario_id"]]
        assert row["status"] == "passed"
        assert (row["scores"], row["turns"], row["termination"]) == (before["scores"], before["turns"], before["termination"])
        assert len(row["transcript"]) >= row["turns"] > 0  # the cassette holds the dialogue

    second, again = replay(tmp_path / "second")
    assert second.returncode == 0
    assert [comparable(r) for r in sorted(rows, key=lambda r: r["scenario_id"])] == \
        [comparable(r) for r in sorted(again, key=lambda r: r["scenario_id"])]


def test_a_replay_resumed_judges_its_kept_rows_by_reproduction_as_it_judges_its_own(tmp_path):
    """A whole-run replay judges a case by whether it reproduces its recording, whatever it scored (the shipped
    recording misses the floors): resumed, its kept rows are judged the same way - not by the floors, which would
    call them regressions - and a kept row whose scores were changed is one."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", "--results-dir",
                               str(tmp_path / "out"), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)

    first = run("-k", "user107-SD-Books-task-1 or user1111-MD-task-3")
    assert first.returncode == 0, first.stdout[-3000:]
    (results,) = (tmp_path / "out").glob("*/results.jsonl")
    resumed = run("--resume", str(results), "-k", "user107-SD-Books-task-1 or user1111-MD-task-3")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "0 regression(s)" in resumed.stdout and "deselected" in resumed.stdout
    rows = with_runs([json.loads(line) for line in results.read_text().splitlines()])
    rows[0]["scores"]["naturalness_user"] = rows[0]["scores"]["naturalness_user"] % 5 + 1  # another of 1..5
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(row) + "\n" for row in rows))
    changed = run("--resume", str(edited), "-k", "user107-SD-Books-task-1 or user1111-MD-task-3")
    assert changed.returncode == 1, changed.stdout[-3000:]
    assert f"FAILED 1 regression(s): {rows[0]['scenario_id']}" in changed.stdout
