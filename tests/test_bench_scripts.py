"""The bench/ scripts at a small size, so they never rot: each runs end to end and prints its
figures. (The figures themselves are measured by hand and kept in bench/README.md.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def bench(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_replay_bench_small():
    out = bench("bench/replay.py", "--synthesise", "8", "--repeat", "1")
    assert "bytes per scenario (xz): mean" in out and "median ratio replay / bare at workers 0:" in out
    assert re.search(r"user CPU replay / bare at workers 0: median \d+\.\d{2}; system CPU", out), out


def test_replay_memory_bench_small():
    out = bench("bench/replay.py", "--synthesise", "24", "--memory", "--workers", "2")
    assert re.search(r"controller \(peak RSS, -n 2\): -?[\d.]+ KB more a case; at 122,133 cases: -?\d+ MB", out), out
    assert re.search(r"controller \(heap when the cases are done, -n 2\): -?[\d.]+ KB more a case", out), out
    assert re.search(r"bare run of \d+ cases \(-n 2\): controller peak RSS \d+ MB", out), out
    assert re.search(r"controller \(bare pytest, peak RSS, -n 2\): -?[\d.]+ KB more a case; at 122,133 cases", out), out


def test_report_memory_bench_small():
    out = bench("bench/report_memory.py", "--cases", "40", "--turns", "2", "--whole")
    assert re.search(r"end of a run, 40 cases, digests, whole rows read again one at a time: peak RSS \d+ MB", out)
    assert "whole rows in memory (before): peak RSS" in out


def test_full_replay_bench_small(tmp_path):
    out = bench("bench/full_replay.py", "--profiles", "60", "--sample-scenarios", "8", "--dir", str(tmp_path))
    found = re.search(r"replay of the full-size dataset: exit status 0, ([\d,]+) passed, ([\d,]+) rows", out)
    assert found and found.group(1) == found.group(2) != "0", out[-2000:]
    assert "the command: 1 process, peak RSS" in out and "xdist worker: 2 processes" in out


def test_live_concurrency_bench_small():
    out = bench("bench/live_concurrency.py", "--scenarios", "4", "--workers", "2", "--delay", "0.01", "--bare-runs", "1")
    assert "efficiency" in out and "speed-up" in out and "peak RSS: the command: 1 process" in out
    assert re.search(r"phases: start-up [\d.]+ s, calls [\d.]+ s \(lanes \d+% full\), finish [\d.]+ s", out), out
    found = re.search(r"pytest's own share: the calls ([\d.]+) s \(efficiency [\d.]+ with no start-up or finish\) \+ a "
                      r"bare pytest process spread the same way, one empty test, ([\d.]+) s = efficiency ([\d.]+)", out)
    assert found and float(found.group(2)) > 0, out


def test_call_overhead_bench_small():
    out = bench("bench/call_overhead.py", "--calls", "8", "--turns", "4", "--repeat", "1")
    found = re.search(r"8 calls in 2 dialogues, 1 runs each, ours behind --max-concurrency 4: CPU per call \(median\) ours ([\d.]+) ms, bare ([\d.]+) ms", out)
    assert found and float(found.group(1)) > 0 and float(found.group(2)) > 0, out


def test_limits_bench_small():
    out = bench("bench/limits.py", "--calls", "200", "--repeat", "1", "--processes", "2", "--threads", "2",
                "--slots", "2", "--hold-ms", "5", "--seconds", "0.5")
    assert "us a call" in out and "most in flight" in out
    assert "most in flight 2 (limit 2)" in out or "most in flight 1 (limit 2)" in out


def test_live_concurrency_bench_reports_each_xdist_worker():
    out = bench("bench/live_concurrency.py", "--scenarios", "4", "--workers", "2", "--delay", "0.01", "--mode", "xdist",
                "--skip-sequential", "--bare-runs", "1")
    assert "xdist worker: 2 processes, peak RSS" in out and "efficiency" in out


def test_pytest_floor_bench_small():
    out = bench("bench/pytest_floor.py", "--cases", "40", "--workers", "2")
    assert re.search(r"bare pytest, 40 empty cases, -n 2: \d+ s", out), out
    assert "the command: 1 process, peak RSS" in out and "xdist worker: 2 processes" in out, out


def test_rss_bench_measures_a_command_and_its_children():
    grow = "import subprocess, sys; b = bytearray(60_000_000); subprocess.run([sys.executable, '-c', 'import time; time.sleep(1)'])"
    out = bench("bench/rss.py", "--", sys.executable, "-c", grow)
    peak = int(re.search(r"the command: 1 process, peak RSS (\d+) MB", out).group(1))
    assert peak >= 60 and "other: 1 process" in out


def test_rss_bench_names_a_child_by_what_it_became():
    """A child seen before it executes its own program (its command line still its parent's) is named by the
    command line it runs: an xdist worker is a worker, however early a sample saw it."""
    become = ("import os, sys, time; time.sleep(1); "
              "os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(1)', 'xd' + 'ist'])")
    start = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {become!r}])"
    out = bench("bench/rss.py", "--", sys.executable, "-c", start)
    assert "xdist worker: 1 process" in out and "other" not in out, out


def test_collection_bench_small(tmp_path):
    bench("bench/synth_data.py", str(tmp_path / "data"), "--profiles", "60")
    out = bench("bench/collection.py", "--repeat", "1", "--personalens-data", str(tmp_path / "data"))
    assert "bundled sample (--sample 50)" in out and "full data (--sample all)" in out


def test_startup_bench_small():
    out = bench("bench/startup.py", "--repeat", "1")
    assert re.search(r"before the first case \(CPU-s, median of 1\): ours \d+\.\d{3} .* bare \d+\.\d{3}", out), out
    assert re.search(r"--collect-only of one case \(CPU-s of the process\): ours .*: ratio \d+\.\d{2}x", out), out
    assert re.search(r"the stack's floor: .*: \d+\.\d{3} CPU-s, ratio \d+\.\d{2}x of bare", out), out


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py")))
def test_every_bench_script_has_usage(script):
    assert "usage" in bench(f"bench/{script}", "--help").lower()


def test_interval_coverage_bench_small():
    out = bench("bench/interval_coverage.py", "--trials", "40", "--sizes", "10")
    assert "agresti-coull          n=10   0.963 / 0.928" in out  # exact sums: the same figure at any size of run
    assert re.search(r"n=10   student-t 0\.\d{3} \(0\.\d{3}\)   percentile bootstrap", out)


def test_judge_answers_bench_reads_every_benign_answer_and_no_hostile_one():
    out = bench("bench/judge_answers.py", "--count", "2000")
    benign = re.search(r"read as their value (\d+) of (\d+); (\d+) marked lost by design .*, (\d+) lost unmarked", out)
    hostile = re.search(r"errors (\d+) of (\d+); read as a score (\d+)", out)
    real = re.search(r"real answers .*: read (\d+) of (\d+)", out)
    assert benign and int(benign.group(1)) + int(benign.group(3)) == int(benign.group(2)) and benign.group(4) == "0"
    assert re.search(r"generated hostile .*: 2,000; read as a score 0\n", out)
    lost = re.search(r"generated benign .*: 2,000; lost (\d+)", out)
    assert lost and int(lost.group(1)) <= 20  # at most 1 in 100
    assert "read as another value 0" in out
    assert hostile and hostile.group(1) == hostile.group(2) and hostile.group(3) == "0"
    assert real and real.group(1) == real.group(2) and int(real.group(2)) >= 100
    # against upstream's two regular expressions, on the paper's label-line form: benign answers read alike, a
    # reason ending with a number read by upstream only, a hedged second value read as a score by upstream only
    assert re.search(r"label-line answers, generated benign: 2,000; ours: its value 100\.0%.*upstream's: its value "
                     r"100\.0%", out)
    ending = re.search(r"generated reasons ending a statement with a number: 2,000; ours: its value ([\d.]+)%, "
                       r"unreadable ([\d.]+)%, another value 0\.0%; upstream's: its value 100\.0%", out)
    assert ending and 20 < float(ending.group(2)) < 80
    assert re.search(r"generated hostile .*: 2,000; read as a score: ours 0\.0% .*upstream's 100\.0%", out)


def test_gate_noise_bench_small():
    """Every cell of the table through the real verdict code, and each cell's figures the same whichever process
    ran it (its runs are seeded by the cell and the run's number)."""
    out = bench("bench/gate_noise.py", "--quick")
    rate = r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]"
    cells = re.findall(rf"^\| (25|100) \| ([13]) \| ([a-z0-9. -]+) \| 4 \| {rate} \| {rate} \| {rate} \|", out, re.M)
    assert len(cells) == 32 and "simulated runs in" in out
    # the targets, checked for every cell they apply to (met or MISSED: four runs decide nothing here)
    assert len(re.findall(r"^  n=(25|100) K=[13] [a-z0-9. -]+: (red|green) [<>]= \d+%", out, re.M)) == 20
    assert "recommended: " in out
    alone = bench("bench/gate_noise.py", "--sizes", "25", "--repeats", "3", "--cases", "drop 0.3", "--runs", "4",
                  "--jobs", "1")
    assert re.findall(r"^\| 25 \| 3 \| drop 0\.3 \| [^\n]*", alone, re.M)[0].rsplit("|", 2)[0] == \
        re.findall(r"^\| 25 \| 3 \| drop 0\.3 \| [^\n]*", out, re.M)[0].rsplit("|", 2)[0]


def test_early_stop_bench_small():
    """The stopping rule and the verdict through the controller's own EarlyStop and build_report."""
    out = bench("bench/early_stop.py", "--quick", "--margins", "0.2")
    rows = re.findall(r"^(paper-level bot, gates|unchanged, baseline|0\.3 worse, baseline) +(?:yaml|[\d.]+) +(\d\.\d{3}) ",
                      out, re.M)
    assert [name for name, _ in rows] == ["paper-level bot, gates", "unchanged, baseline", "0.3 worse, baseline"]
    assert all(0 < float(share) <= 1 for _, share in rows)


def test_cost_estimate_bench_small():
    out = bench("bench/cost_estimate.py", "--shard", "1/512", "--turns", "1")
    # measured from the recording, to a few tenths of a percent: the preflight's calls (billed, in the run's cost) are
    # the one part the estimate prices from their shape
    assert "estimate from the protocol's shape: $" in out
    assert re.search(r"measured estimate error [+-]0\.[0-4]%", out), out


def test_injection_corpus_bench_prints_the_flags_cost():
    out = bench("bench/injection_corpus.py")
    found = re.search(r"flagging cost: (\d+) replies of the corpora, \d+ characters on average: (\d+) us a reply with the "
                      r"word tests, (\d+) us with every pattern run \([\d.]+x\); the same flags: (\w+)", out)
    assert found, out[-1500:]
    assert int(found.group(1)) > 500 and found.group(4) == "True"


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the gate isolates the bot only as root (CI runs as root)")
def test_gate_isolation_bench_small():
    out = bench("bench/gate_isolation.py", "--repeat", "2", "--bot-processes", "2")
    assert "0 false alarms in 2 runs" in out and "36 tried, 0 succeeded" in out


def test_bounds_bench_small():
    out = bench("bench/bounds.py", "--scale", "0.05", "--bomb-mib", "64")
    assert re.search(r"cassette, 1,000,000 tiny interactions .*: refused: CassetteError: .*MAX_CASSETTE_VALUES.*peak RSS \d+ MB",
                     out), out
    assert re.search(r"within the value bound\) .*: read: [\d,]+ interactions; peak RSS \d+ MB", out), out
    assert re.search(r"answer, \"content\" given twice .*: refused: .*given twice", out), out
    assert re.search(r"gzip of 64 MiB: refused: HeadTooLarge", out), out


def test_secret_spellings_bench_small():
    out = bench("bench/secret_spellings.py", "--count", "200", "--secrets", "3")
    for name in ("redact", "scrub_text", "redact_json"):
        assert re.search(rf"generated spellings, {name}: [\d,]+ of 200 caught", out), out
    assert re.search(r"benign: [\d,]+ shipped texts \(\d+ MiB\) under 3 random secrets: \d+ touched", out), out
    assert re.search(r"cost: \d+ us a request body", out) and "quick look-up key" in out, out
    assert re.search(r"worst shapes: a run of 1,000,000 backslashes: [\d.]+ s", out), out


def test_live_floors_bench_small():
    """A floor missed live, confirmed or cleared through the real rule and the real verdict code, both rules."""
    out = bench("bench/live_floors.py", "--quick", "--jobs", "1")
    rate = r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]"
    cells = re.findall(rf"^\| 36 \| ([a-z ,]+) \| (confirm|report) \| 20 \| {rate} \| {rate} \| {rate} \| \d+\.\d\d \|$",
                       out, re.M)
    assert len(cells) == 6 and "R = judgements_for(n): 6 at n = 36" in out
    assert len(re.findall(r"^  n=36 (as good|broken on a tenth): red \d\.\d{3} - (met|MISSED)$", out, re.M)) == 2


def test_user_faults_bench_prints_each_kinds_rate_both_ways_and_the_recordings_share():
    out = bench("bench/user_faults.py", "--tries", "16")
    assert all(re.search(rf"{rule}\s+found 16/16", out) for rule in ("pasted_profile", "repeated_turn", "other_language"))
    assert "clean dialogues flagged: labelled set 0/5; built from phrases 0/16 (0.0%)" in out
    assert re.search(r"repeated_turn\s+\d+ \(\d+%\)", out) and re.search(r"the dialogue as a whole: \w+ \d+", out)


def test_user_review_bench_counts_a_kind_named_when_the_review_names_its_rule(monkeypatch):
    """Through the real review path (its prompt, the reviewer's role, its answer grammar) on a scripted reviewer that
    names one turn off task in every dialogue: off task is named in each, every other kind only flagged."""
    from .support.fake_llm import FakeLLM, Script

    fault = {"turn": 0, "rule": "off_task", "direction": "hindered"}
    with FakeLLM(Script(review_faults=[fault], review_first_error="user")) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        out = bench("bench/user_review.py", "--model", "openai:fake-reviewer", "--tries", "2")
        reviews = [r for r in fake.requests if "faults" in str(r.get("response_format"))]
    assert re.search(r"off_task\s+named 2/2, any fault 2/2, review failed 0", out), out
    assert re.search(r"repeated_turn\s+named 0/2, any fault 2/2, review failed 0", out), out
    assert "clean dialogues flagged 5/5, review failed 0" in out
    assert len(reviews) == 11 * 2 + 5 and {r["model"] for r in reviews} == {"fake-reviewer"}


def test_batch_judging_bench_prints_the_sample_each_way_and_times_both_flows():
    out = bench("bench/batch_judging.py", "--repeat", "1")
    online = re.search(r"judge online\s+([\d,]+) calls, \$([\d.]+)", out)
    batch = re.search(r"judge on the batch engine\s+([\d,]+) calls, \$([\d.]+)", out)
    assert online and batch and online.group(1) == batch.group(1)
    assert float(batch.group(2)) == pytest.approx(float(online.group(2)) / 2, abs=0.011)
    assert re.search(r"150 judge calls online, 150 records in the batch job; 25 cases scored from the batch", out), out
    assert re.search(r"150 Converse calls online, 1 batch inference job\(s\) through S3; 25 cases scored from the "
                     r"batch", out), out


def test_traces_bench_receives_a_trace_a_case_and_says_a_dead_collector_in_one_line():
    out = bench("bench/traces.py", "--repeat", "1")
    assert re.search(r"the live collector received 25 traces, \d+ spans, 150 evaluation events", out), out
    assert re.search(r"with the collector down, the run said: traces: \d+ span\(s\) and event\(s\) of 25 case\(s\) "
                     r"dropped", out), out
