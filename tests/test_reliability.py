"""Never a wrong or a lost score, tried as a hostile user would: bots that print junk, answer in the
wrong encoding, answer too much, hang or lie about ids; disks that fill up; dead endpoints; secrets
in every encoding. Every run goes through the real path (a real subprocess, real loopback HTTP, a
real filesystem that fills up) and checks the two invariants: rows written == cases run (each a
true score, or an error naming its cause and source), and no score is ever another case's."""

from __future__ import annotations

import json
import lzma
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows, suite_project

PYTHON = json.dumps(sys.executable)
LIVE = ["--record-mode", "all"]
ALARM = ["--profiles", "7", "--domains", "Alarm"]


def project(pytester: pytest.Pytester, fake: FakeLLM, extra: str = "") -> pytest.Pytester:
    """A team project: the suites, its models on the fake server, retries quick, and ``extra`` config."""
    return suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                   f'assistant_model = "openai:fake-bot"\nopenai_base_url = "{fake.url}"\n'
                                   f'retry_initial_s = 0.01\nretry_max_s = 0.05\n{extra}')


def bot_entry(name: str, source: str, tmp: Path, **fields: str) -> str:
    """A command bot written as a Python script, and its config entry."""
    script = tmp / f"{name}.py"
    script.write_text(source)
    lines = "".join(f"{key} = {value}\n" for key, value in fields.items())
    return f'[assistants.{name}]\nkind = "command"\ncommand = [{PYTHON}, "{script}"]\n{lines}'


def python_entry(name: str, source: str, tmp: Path, **fields: str) -> str:
    module = tmp / "pybots" / f"{name}.py"
    module.parent.mkdir(exist_ok=True)
    module.write_text(source)
    lines = "".join(f"{key} = {value}\n" for key, value in fields.items())
    return f'[assistants.{name}]\nkind = "python"\ncallable = "{name}:reply"\npath = ["{module.parent}"]\n{lines}'


def run_rows(pytester: pytest.Pytester, *args: str, subprocess: bool = True) -> tuple[pytest.RunResult, list[dict]]:
    result = pytester.runpytest_subprocess(*args, timeout=300) if subprocess else pytester.runpytest(*args)
    named = [line.split(" -> ", 1)[1] for line in result.stdout.lines
             if " result rows -> " in line and " recorded result rows" not in line]
    return result, read_rows(Path(named[0])) if named else []


def run_bot(pytester: pytest.Pytester, name: str, entry: str, *args: str) -> tuple[pytest.RunResult, list[dict]]:
    """A live run of user7's Alarm tasks against the bot ``name`` (its config ``entry``) and a fake model server."""
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, entry)
        return run_rows(pytester, "--assistant", name, *ALARM, *LIVE, *args)


def cases_run(result: pytest.RunResult) -> int:
    outcomes = result.parseoutcomes()
    return sum(outcomes.get(kind, 0) for kind in ("passed", "failed", "errors", "error", "skipped", "xfailed", "xpassed"))


def assert_rows_are_cases(result: pytest.RunResult, rows: list[dict]) -> None:
    assert len(rows) == cases_run(result), result.stdout.str()[-3000:]
    for row in rows:
        if row["status"] == "error":
            assert row["scores"] is None and row["error"]["message"] and row["error"]["source"], row["error"]
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text


# -- 1. command bots: a reply is never read as another request's answer -------------------------

STRAY = '''import json, sys
print("starting up...", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"reply": f"answer to {request['scenario_id']} turn {request['turn']}"}), flush=True)
'''

TWICE = '''import json, sys
for line in sys.stdin:
    request = json.loads(line)
    answer = json.dumps({"id": request["id"], "reply": f"answer to {request['scenario_id']} turn {request['turn']}"})
    print(answer, flush=True)
    print(answer, flush=True)      # every reply written twice: the copy must never answer the next request
'''

LATIN1 = '''import json, sys
for line in sys.stdin:
    request = json.loads(line)
    text = "caf\\u00e9" if request["scenario_id"].endswith("task-2") else "fine"
    sys.stdout.buffer.write((json.dumps({"reply": f"{text} {request['scenario_id']} {request['turn']}"},
                                        ensure_ascii=False) + "\\n").encode("latin-1"))
    sys.stdout.flush()
'''


def own_answers(row: dict) -> bool:
    """Whether every assistant reply in the row answers its own scenario and turn."""
    replies = [m["content"] for m in row["transcript"] if m["role"] == "assistant"]
    return all(reply.endswith(f"{row['scenario_id']} turn {turn}") or reply.endswith(f"{row['scenario_id']} {turn}")
               for turn, reply in enumerate(replies, start=1))


def test_a_bot_that_logs_on_stdout_never_shifts_a_reply(pytester, tmp_path):
    result, rows = run_bot(pytester, "stray", bot_entry("stray", STRAY, tmp_path))
    result.assert_outcomes(passed=4, deselected=1)
    assert_rows_are_cases(result, rows)
    assert all(own_answers(row) for row in rows), [row["transcript"] for row in rows]
    assert any("not responses (skipped; log to stderr): 'starting up...'" in note for note in rows[0]["notes"])


def test_a_bot_that_writes_each_reply_twice_is_caught_by_the_id_it_echoes(pytester, tmp_path):
    with FakeLLM(Script(terminate_after=2)) as fake:
        project(pytester, fake, bot_entry("twice", TWICE, tmp_path))
        result, rows = run_rows(pytester, "--assistant", "twice", *ALARM, *LIVE)
    assert_rows_are_cases(result, rows)
    scored = [row for row in rows if row["status"] != "error"]
    assert all(own_answers(row) for row in scored)  # never another turn's reply
    for row in rows:
        if row["status"] == "error":
            assert "is not the request's id" in row["error"]["message"] and row["error"]["source"] == "assistant"


def test_a_line_in_the_wrong_encoding_is_an_error_and_the_bot_restarts(pytester, tmp_path):
    result, rows = run_bot(pytester, "latin", bot_entry("latin", LATIN1, tmp_path))
    result.assert_outcomes(passed=3, errors=1, deselected=1)
    assert_rows_are_cases(result, rows)
    (error,) = [row for row in rows if row["status"] == "error"]
    assert error["scenario_id"].endswith("task-2") and error["error"]["source"] == "assistant"
    assert "the bot wrote a line that is not UTF-8 (byte 0xe9 at position" in error["error"]["message"]
    assert all(own_answers(row) for row in rows if row["status"] == "passed")


# -- 2. unexpected failures keep their row --------------------------------------------------------

ODD_REPLIES = '''import sys
def reply(request):
    task = request["scenario_id"].rsplit("-", 1)[1]
    if task == "1":
        return "lone \\udc80 surrogate"
    if task == "2":
        sys.exit(3)
    if task == "3":
        return {"reply": 42}
    return "a fine reply"
'''


def test_odd_python_bots_are_errors_of_their_case_never_lost_rows(pytester, tmp_path):
    result, rows = run_bot(pytester, "odd", python_entry("odd", ODD_REPLIES, tmp_path))
    result.assert_outcomes(passed=1, errors=3, deselected=1)
    assert_rows_are_cases(result, rows)
    messages = {row["scenario_id"][-1]: row["error"]["message"] for row in rows if row["error"]}
    assert "is not valid Unicode text: a lone surrogate '\\udc80' at character 5" in messages["1"]
    assert "odd:reply raised SystemExit: 3" in messages["2"]
    assert 'the answer has no "reply" string: {"reply": 42}' in messages["3"]


def test_an_http_bot_answering_in_the_wrong_encoding_is_an_error_row(pytester, tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import threading

    class Latin1(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"reply": "d\u00e9j\u00e0 fait"}, ensure_ascii=False).encode("latin-1")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Latin1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    entry = f'[assistants.latin-http]\nkind = "http"\nurl = "http://127.0.0.1:{server.server_address[1]}/reply"\n'
    try:
        result, rows = run_bot(pytester, "latin-http", entry)
    finally:
        server.shutdown()
    result.assert_outcomes(errors=4, deselected=1)
    assert_rows_are_cases(result, rows)
    assert all("breaks the turn contract: the body is not utf-8 (byte 0xe9 at position" in row["error"]["message"]
               for row in rows)


# -- 2b. full disks -------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A real filesystem of its own that fills up: a tmpfs, mounted for the test (needs root, as CI has)."""
    mounted: list[Path] = []

    def make(size_kb: int, free_kb: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): this test needs root")
        mounted.append(folder)
        filler = size_kb - free_kb
        if filler > 0:
            with open(folder / "filler", "wb") as handle:
                handle.write(b"\0" * filler * 1024)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_cassette_disk_stops_the_run_with_one_line_and_every_row(pytester, small_disk):
    disk = small_disk(512, 24)
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, "--profiles", "7,53", "--domains", "Alarm,Books", "--max-turns", "1",
                                "--record-mode", "once", "--cassette-dir", str(disk / "cassettes"))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert_rows_are_cases(result, rows)
    assert 0 < len(rows) < 17  # stopped at the first case that could not keep its cassette
    last = rows[-1]
    assert last["status"] == "error" and last["error"]["source"] == "storage" and last["error"]["disk_full"]
    assert last["error"]["message"].startswith(f"cannot write {disk / 'cassettes' / 'reference'}/")
    assert last["error"]["message"].endswith(".json.xz: No space left on device")
    stopped = [line for line in result.stdout.lines if "STOPPED early" in line]
    assert len(stopped) == 1 and "no space left on the disk: cannot write" in stopped[0]
    kept = list((disk / "cassettes" / "reference").glob("*.json.xz"))
    assert len(kept) == sum(row["status"] != "error" for row in rows)  # no half-written cassette either
    assert not list((disk / "cassettes" / "reference").glob(".*.tmp"))


def test_a_full_results_disk_keeps_every_row_whole_and_names_the_path(pytester, small_disk):
    disk = small_disk(1600, 1024 + 48)  # room for the reserved rows, and a few transcripts
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake)
        result, rows = run_rows(pytester, "--profiles", "7,53", "--domains", "Alarm,Books,Buses", "--max-turns", "1",
                                *LIVE, "--results-dir", str(disk / "results"))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert_rows_are_cases(result, rows)  # every line parses: no torn row
    stopped = [line for line in result.stdout.lines if "STOPPED early" in line]
    assert len(stopped) == 1 and str(disk) in stopped[0] and "No space left on device" in stopped[0]
    failures = [line for line in result.stdout.lines if line.startswith("personalens: FAILED") and "report" in line]
    assert failures and all(": No space left on device" in line and str(disk) in line for line in failures)


def test_no_room_for_results_fails_before_any_case(pytester, small_disk):
    disk = small_disk(256, 200)
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake)
        result = pytester.runpytest_subprocess(*ALARM, *LIVE, "--results-dir", str(disk / "results"), timeout=120)
        assert fake.requests == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: personalens: cannot write {disk}/results/*/results.jsonl: No space left on device"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_the_results_writer_reserves_room_ahead(small_disk):
    from personalens_testkit.results.files import ResultsWriter

    disk = small_disk(2048, 2048)
    writer = ResultsWriter(disk / "results.jsonl")
    writer.open()
    with open(disk / "hog", "wb") as hog:  # another writer fills the disk
        with pytest.raises(OSError):
            while True:
                hog.write(b"x" * 65536)
                hog.flush()
    row = json.dumps({"row": "x" * 20_000})
    writer.write_json(row)
    assert "No space left on device" in str(writer.out_of_room)  # the run is told to stop at once...
    for _ in range(40):  # ... and the rows of the cases still under way go into the room reserved ahead
        writer.write_json(row)
    writer.close()
    assert len(read_rows(disk / "results.jsonl")) == 41  # every row went in whole


# -- 3. hangs are bounded while they run, and Ctrl-C ends a run in seconds ------------------------

HANGS = '''import time
def reply(request):
    if request["scenario_id"].endswith("task-2"):
        time.sleep(3600)
    return "a fine reply"
'''


def test_a_sync_python_bot_that_hangs_fails_its_turn_and_the_run_goes_on(pytester, tmp_path):
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, python_entry("hangs", HANGS, tmp_path, timeout_s="1"))
        started = time.monotonic()
        result, rows = run_rows(pytester, "--assistant", "hangs", *ALARM, *LIVE)
    assert time.monotonic() - started < 60
    result.assert_outcomes(passed=3, errors=1, deselected=1)
    assert_rows_are_cases(result, rows)
    (error,) = [row for row in rows if row["status"] == "error"]
    assert "hangs:reply did not reply within 1 s (the call was abandoned)" in error["error"]["message"]


def test_the_scenario_time_limit_bounds_a_call_while_it_runs(pytester):
    with FakeLLM(Script(terminate_after=1, delay_s=30)) as fake:
        project(pytester, fake, "scenario_timeout_s = 1.5\n")
        started = time.monotonic()
        result, rows = run_rows(pytester, *ALARM, *LIVE, "-k", "task-1")
    assert time.monotonic() - started < 25
    result.assert_outcomes(skipped=1, deselected=4)  # the benchmark's model ran out of time: not scored
    assert "given up while it ran: the scenario's time limit of 1.5 s ran out" in rows[0]["error"]["message"]
    assert rows[0]["seconds"] < 5


def test_ctrl_c_ends_a_concurrent_run_with_a_hung_bot_in_seconds(pytester, tmp_path):
    forever = "import time\ndef reply(request):\n    time.sleep(3600)\n"
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, python_entry("forever", forever, tmp_path, timeout_s="3000"))
        process = subprocess.Popen([sys.executable, "-m", "pytest", "--assistant", "forever", *ALARM, *LIVE,
                                    "--concurrency", "2", "-p", "no:cacheprovider"], cwd=pytester.path,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(pytester.path.glob("personalens-results/*")):
            time.sleep(0.1)
        time.sleep(2)  # the bot is now stuck in its first turns
        process.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        try:
            output, _ = process.communicate(timeout=20)
        finally:
            process.kill()
    assert time.monotonic() - interrupted < 15, "Ctrl-C did not end the run"
    assert "KeyboardInterrupt" in output


# -- 8. replies are bounded ------------------------------------------------------------------------

HUGE_LINE = '''import json, sys
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({"id": request["id"], "reply": "x" * 10_000_000}), flush=True)
'''
HUGE_PY = "def reply(request):\n    return 'x' * 10_000_000\n"
PEAK_RSS = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


@pytest.mark.parametrize("kind", ["command", "python", "http"])
def test_a_ten_megabyte_reply_is_an_error_naming_its_size_not_a_memory_blow_up(pytester, tmp_path, kind):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    server = None
    if kind == "command":
        entry = bot_entry("huge", HUGE_LINE, tmp_path)
    elif kind == "python":
        entry = python_entry("huge", HUGE_PY, tmp_path)
    else:
        class Huge(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # no length: the bot streams until it closes
                try:
                    self.wfile.write(b'{"reply": "')
                    for _ in range(100):
                        self.wfile.write(b"x" * 100_000)
                    self.wfile.write(b'"}')
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        server = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        entry = f'[assistants.huge]\nkind = "http"\nurl = "http://127.0.0.1:{server.server_address[1]}/reply"\n'
    try:
        with FakeLLM(Script(terminate_after=1)) as fake:
            project(pytester, fake, entry)
            # the run's own peak memory, its bot included, measured from a small parent (a child's peak counts
            # the pages it shared with its parent when it was forked)
            measured = subprocess.run([sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "pytest", "--assistant",
                                       "huge", *ALARM, *LIVE, "-k", "task-1 or task-2", "-p", "no:cacheprovider"],
                                      cwd=pytester.path, capture_output=True, text=True, timeout=300)
            peak_kib = int(measured.stdout.strip().splitlines()[-1])
    finally:
        if server is not None:
            server.shutdown()
    (results,) = pytester.path.glob("personalens-results/*/results.jsonl")
    rows = read_rows(results)
    assert len(rows) == 2 and all(row["status"] == "error" and row["error"]["source"] == "assistant" for row in rows)
    message = rows[0]["error"]["message"]
    assert {"command": "the bot wrote a line of 10,000,0", "python": "the reply has 10,000,000 characters: more than "
            "the limit of 20,000 (max_reply_chars", "http": "more than a reply of max_reply_chars=20,000"}[kind] in message
    assert peak_kib < 300_000, peak_kib  # KiB: 10 MB replies are never copied around (2.2 GB before)
    assert sum(path.stat().st_size for path in pytester.path.rglob("*") if path.is_file()) < 5_000_000


# -- 7. dead endpoints: one line before any case; a circuit breaker during the run ------------------

def test_a_dead_endpoint_fails_the_run_before_any_case_with_one_line(pytester):
    with FakeLLM() as fake:
        project(pytester, fake, '[models.dead]\nkind = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
        started = time.monotonic()
        result = pytester.runpytest_subprocess("--user-model", "dead", *ALARM, *LIVE, timeout=120)
    assert time.monotonic() - started < 30
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].startswith("ERROR: user agent model, --user-model dead ([models.dead] in "
                                                     "personalens.toml): ") and "cannot reach http://127.0.0.1:9/v1" in errors[0]
    assert fake.requests == [] and not list(pytester.path.glob("personalens-results/*/results.jsonl"))


def test_a_judge_refusing_the_key_fails_the_run_before_any_case(pytester):
    with FakeLLM() as fake, FakeLLM(Script(status=401)) as judge:
        project(pytester, fake, f'[models.judge-prod]\nkind = "openai"\nmodel = "j"\nbase_url = "{judge.url}"\n')
        result = pytester.runpytest_subprocess("--judge-model", "judge-prod", *ALARM, *LIVE, timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: judge model, --judge-model judge-prod (*): call to judge-prod (openai:j) failed: "
                                 "HTTP 401 from *: scripted failure"])
    assert fake.requests == [] and judge.requests == [] and len(judge.pings) == 1  # 401 is not retried


def test_identical_errors_in_a_row_stop_the_run_keeping_every_row(pytester):
    with FakeLLM(Script(status=401, status_pings=False)) as fake:  # the key is revoked after the preflight
        project(pytester, fake)
        result, rows = run_rows(pytester, "--profiles", "7,53", "--domains", "Alarm,Books", *LIVE)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert_rows_are_cases(result, rows)
    assert len(rows) == 5 and all(row["error"]["cause"].startswith("HTTP 401 from") for row in rows)
    stopped = [line for line in result.stdout.lines if "STOPPED early" in line]
    assert len(stopped) == 1 and "5 cases in a row failed with the same error from the user agent (openai:fake-user): " \
        "HTTP 401 from" in stopped[0]
    assert len(fake.requests) == 5  # one call a case: the 401 is not retried, and no sixth case started


# -- 6. secrets: never in a file we write or a line we print, in any encoding -------------------------

ECHO_SECRETS = '''import os
def reply(request):
    names = ("TEAM_TOKEN", "ANTHROPIC_KEY", "DATABASE_URL", "PLAIN_SETTING")
    return "Here you go: " + " | ".join(os.environ[name] for name in names)
'''
SECRETS = {
    "TEAM_TOKEN": 'tok-"quoted"-caf\u00e9-9f2a81',       # a quote and a non-ASCII character
    "ANTHROPIC_KEY": "sk-ant-planted-5d1e7c",            # a name outside the old patterns
    "DATABASE_URL": "postgres://app:pw-planted-77aa@db.internal:5432/app",
    "PLAIN_SETTING": "plain-planted-value-31",            # named in the config's secret_env
}


def forms(value: str) -> set[str]:
    from urllib.parse import quote, quote_plus

    escaped = json.dumps(value)[1:-1]
    return {value, json.dumps(value, ensure_ascii=False)[1:-1], escaped, json.dumps(escaped)[1:-1], quote(value, safe=""),
            quote_plus(value)}


def test_planted_secrets_reach_no_file_in_any_encoding(pytester, tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, 'secret_env = ["PLAIN_SETTING"]\n' + python_entry("leaky", ECHO_SECRETS, tmp_path))
        result, rows = run_rows(pytester, "--assistant", "leaky", *ALARM, *LIVE, "-k", "task-1", "--json-report",
                                str(pytester.path / "out" / "r.json"))
        prompts = json.dumps(fake.requests, ensure_ascii=False)
    result.assert_outcomes(passed=1, deselected=4)
    assert all(json.dumps(value, ensure_ascii=False)[1:-1] in prompts for value in SECRETS.values())  # they travelled
    texts = {}
    for path in pytester.path.rglob("*"):
        if path.is_file() and "pybots" not in path.parts:
            data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
            texts[path] = data.decode("utf-8", "replace")
    assert any(path.suffix == ".xz" for path in texts) and any(path.name == "results.jsonl" for path in texts)
    leaks = [(path.name, form) for path, text in texts.items() for value in SECRETS.values() for form in forms(value)
             if form in text]
    assert leaks == []
    assert "pw-planted-77aa" not in "".join(texts.values())  # the password of a URL, on its own too
    reply = rows[0]["transcript"][1]["content"]
    assert reply == "Here you go: <TEAM_TOKEN> | <ANTHROPIC_KEY> | <DATABASE_URL> | <PLAIN_SETTING>"
    assert all(value not in result.stdout.str() for value in SECRETS.values())


def test_a_setup_error_printing_a_token_is_redacted(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("TEAM_TOKEN", SECRETS["TEAM_TOKEN"])
    leaky = "import os, sys\nprint('auth failed with ' + os.environ['TEAM_TOKEN'], file=sys.stderr)\nsys.exit(2)\n"
    with FakeLLM() as fake:
        project(pytester, fake, bot_entry("leaky", leaky, tmp_path))
        result = pytester.runpytest_subprocess("--assistant", "leaky", *ALARM, *LIVE, timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: assistant 'leaky' (*): the command exited at once with code 2; "
                                 "stderr: auth failed with <TEAM_TOKEN>"])
    assert SECRETS["TEAM_TOKEN"] not in result.stderr.str() + result.stdout.str()


# -- 9. smaller: thresholds, option ranges, --resume outside the project ----------------------------

def test_an_empty_thresholds_file_is_an_error(pytester):
    with FakeLLM() as fake:
        project(pytester, fake)
        (pytester.path / "thresholds.yaml").write_text("# nothing yet\n")
        result = pytester.runpytest_subprocess(*ALARM, *LIVE, timeout=120)
        assert fake.requests == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */thresholds.yaml: the file is empty: it sets no floor and no gate*"])


def test_a_thresholds_file_without_gates_says_so_in_the_header(pytester):
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake)
        (pytester.path / "thresholds.yaml").write_text("version: 1\n")
        result = pytester.runpytest_subprocess(*ALARM, *LIVE, "-k", "task-1", timeout=120)
    result.stdout.fnmatch_lines(["personalens: NO AGGREGATE GATE is set in thresholds.yaml: the run is judged by the "
                                 "per-scenario floors alone"])


@pytest.mark.parametrize("args, message", [
    (["--retries", "99"], "ERROR: --retries: must be from 0 to 10 (got 99)"),
    (["--stop-after-errors", "-1"], "ERROR: --stop-after-errors: must be 0 (never) or more (got -1)"),
])
def test_options_have_the_configs_ranges(pytester, args, message):
    with FakeLLM() as fake:
        project(pytester, fake)
        result = pytester.runpytest(*args, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_resume_from_outside_the_project_keeps_the_projects_config(pytester, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, f'[models.sim-user]\nkind = "openai"\nmodel = "sim"\nbase_url = "{fake.url}"\n')
        (pytester.path / "personalens.toml").write_text((pytester.path / "personalens.toml").read_text().replace(
            'user_model = "openai:fake-user"', 'user_model = "sim-user"'))
        first, rows = run_rows(pytester, *ALARM, *LIVE, "-k", "task-1 or task-2")
        kept = outside / "results.jsonl"
        kept.write_text((Path(first.stdout.str().split(" result rows -> ")[1].split()[0])).read_text())
        resumed, rows = run_rows(pytester, *ALARM, *LIVE, "--resume", str(kept))  # a separate argument
    resumed.stdout.fnmatch_lines([f"personalens: project {pytester.path} (pytest took its rootdir, *, from a "
                                  "path option given as a separate argument*",
                                  f"personalens: resuming {kept}: 2 scored cases kept, 2 to run"])
    assert {row["user_model"] for row in rows} == {"sim-user (openai:sim)"}  # the project's models ran
    assert len(rows) == 4


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user_agent", "judge", "assistant"]), st.booleans()), max_size=30),
       st.sets(st.sampled_from(["user_agent", "judge"])), st.integers(1, 6))
def test_errors_of_a_role_that_only_replays_never_stop_the_run(rows, replayed, limit):
    """An error a cassette answered (a batch job's record in error, replayed by --judge-batch collect) says nothing of
    a dead endpoint: the breaker trips on exactly the runs of identical errors of live roles, as long as its limit."""
    from personalens_testkit.run.stop import Breaker

    breaker = Breaker(limit, replayed=frozenset(replayed))
    tripped_at = None
    for n, (source, failed) in enumerate(rows):
        row = {"status": "error", "error": {"source": source, "endpoint": "m", "cause": "HTTP 500"}} if failed else {}
        if breaker.observe(row) is not None:
            tripped_at = n
            break
    expected, streak = None, 0  # the rule: a run of `limit` identical errors of live roles, nothing between
    for n, (source, failed) in enumerate(rows):
        counts = failed and source not in replayed
        streak = streak + 1 if counts and n and streak and rows[n - 1][0] == source else (1 if counts else 0)
        if streak >= limit:
            expected = n
            break
    assert tripped_at == expected
