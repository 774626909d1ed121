"""The bot's identity under a gate (assistants/sandbox.py), tried as a hostile bot would, member by member: real
processes under a real user id of their own (the gate's CI runs as root, as a hosted runner's gate does under
sudo). Each attack is generated - a target of the gate's, a way to write it, a way to outlive the run - and
each must fail; the same checks on benign set-ups must pass (no false alarm)."""

from __future__ import annotations

import base64
import json
import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import GateError
from personalens_testkit.gate.bot import StartedBot, copy_log
from personalens_testkit.assistants.boundary import probe, protected_paths
from personalens_testkit.assistants.bot_identity import bot_env_names, open_sandbox, pick_uid
from personalens_testkit.assistants.sandbox import ALLOWED_ENV, Sandbox, processes_of

from .support.reachable import tmp_path  # noqa: F401 - a folder the bot can reach

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a user id of the bot's own needs root (CI runs as root)")

KEY = "sk-test-judge-key-0123456789abcdef"


@pytest.fixture
def sandbox(tmp_path: Path):
    """A fresh identity, as a gate makes it; everything of it ended and removed afterwards."""
    box = open_sandbox(pass_env=(), wanted=True, reach=[tmp_path, Path(sys.executable), Path(sys.prefix),
                                                        Path(sys.base_prefix)])
    assert box.isolated and box.uid is not None and box.home
    yield box
    box.end_all()
    box.remove_files()


def as_bot(box: Sandbox, code: str, *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 30) -> str:
    """Run python ``code`` as the bot; what it printed."""
    process = box.popen([sys.executable, "-c", code], cwd=cwd, env=env or box.environment(),
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = process.communicate(timeout=timeout)
    return out.decode("utf-8", "replace")


def gate_files(root: Path) -> dict[str, Path]:
    """What a gate keeps out of the bot's reach, made as the gate makes it: the trusted tree and the cassettes in
    a 0700 scratch folder, the reports in a folder of the gate's user, a job summary file."""
    scratch = root / "gate-scratch"
    scratch.mkdir(mode=0o700)
    (scratch / "base" / "suites").mkdir(parents=True)
    (scratch / "base" / "suites" / "conftest.py").write_text("# the base's\n")
    (scratch / "cassettes").mkdir()
    (scratch / "cassettes" / "a.json.xz").write_bytes(b"recorded")
    out = root / "repo" / "personalens-gate"
    out.mkdir(parents=True)
    (out / "report.json").write_text('{"verdict": "red"}')
    summary = root / "summary.md"
    summary.write_text("red\n")
    return {"conftest": scratch / "base" / "suites" / "conftest.py", "cassette": scratch / "cassettes" / "a.json.xz",
            "report": out / "report.json", "summary": summary, "out": out, "scratch": scratch}


#: ways a bot tries to change a file it found (each a python expression over ``p``, the path)
WRITES = {
    "overwrite": "open(p, 'w').write('import os; os._exit(0)')",
    "append": "open(p, 'a').write('passed')",
    "replace": "open(p + '.new', 'w').write('x'); os.replace(p + '.new', p)",
    "unlink": "os.unlink(p)",
    "chmod": "os.chmod(p, 0o666)",
    "symlink": "os.unlink(p); os.symlink('/dev/null', p)",
    "rename-folder": "os.rename(os.path.dirname(p), os.path.dirname(p) + '.old')",
    "truncate": "os.truncate(p, 0)",
    "utime": "os.utime(p, (0, 0))",
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(targets=st.lists(st.sampled_from(["conftest", "cassette", "report", "summary"]), min_size=1, max_size=4,
                        unique=True),
       ways=st.lists(st.sampled_from(sorted(WRITES)), min_size=1, max_size=4, unique=True))
def test_the_bot_can_write_nothing_the_gate_keeps(sandbox: Sandbox, tmp_path_factory, targets, ways):
    root = tmp_path_factory.mktemp("gate")
    files = gate_files(root)
    before = {name: (files[name].read_bytes(), files[name].stat().st_mode) for name in targets}
    code = "import os, json\nresults = []\n"
    for name in targets:
        for way in ways:
            code += (f"p = {str(files[name])!r}\ntry:\n    {WRITES[way]}\n    results.append({name + ':' + way!r})\n"
                     "except OSError:\n    pass\n")
    code += "print(json.dumps(results))"
    done = json.loads(as_bot(sandbox, code, cwd=Path("/")).strip().splitlines()[-1])
    assert done == []
    assert {name: (files[name].read_bytes(), files[name].stat().st_mode) for name in targets} == before


def test_the_probe_finds_what_the_bot_could_write_and_nothing_on_a_sound_set_up(sandbox: Sandbox, tmp_path: Path):
    files = gate_files(tmp_path)
    protected = protected_paths(files["scratch"], files["out"], files["summary"])
    assert probe(sandbox, protected=protected, readable=[str(tmp_path)]) == []  # no false alarm
    # each kind of hole: a file others may write, a folder others may write (its file could be put aside), a
    # writable folder above a protected one
    for hole, path, mode in (("file", files["summary"], 0o666), ("folder", files["out"], 0o777),
                             ("above", files["out"].parent, 0o777)):
        original = stat.S_IMODE(path.stat().st_mode)
        path.chmod(mode)
        try:
            found = probe(sandbox, protected=protected, readable=[])
            assert any(str(path) in line and "writable by the bot" in line for line in found), (hole, found)
        finally:
            path.chmod(original)
    assert probe(sandbox, protected=protected, readable=[str(files["scratch"])]) == [
        f"{files['scratch']} cannot be read by the bot (its checkout)"]


def test_the_probe_says_when_the_interpreters_packages_are_writable(sandbox: Sandbox, tmp_path: Path):
    site = tmp_path / "site-packages"
    site.mkdir()
    site.chmod(0o777)  # a runner whose site-packages anyone may write: a .pth of the bot's would run in the gate
    found = probe(sandbox, protected=[str(site)], readable=[])
    assert found == [f"{site} is writable by the bot"]


#: ways a process outlives its parent
DETACH = {
    "setsid": "os.setsid()",
    "double-fork": "os._exit(0) if os.fork() else None\nos._exit(0) if os.fork() else None",
    "ignore-term": "signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)",
    "new-group": "os.setpgid(0, 0)",
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(sorted(DETACH)), min_size=1, max_size=3), min_size=1, max_size=3))
def test_every_process_of_the_bot_ends_however_it_detached(sandbox: Sandbox, tmp_path_factory, plans):
    """Processes that left the bot's group and session, ignore SIGTERM and keep forking, all end."""
    code = "import os, signal, time\n"
    for plan in plans:
        code += "if os.fork() == 0:\n"
        for step in plan:  # a step the process cannot take (setsid as a group leader) is skipped
            code += "".join(f"    try:\n        {line}\n    except OSError:\n        pass\n"
                            for line in DETACH[step].splitlines())
        code += "    while True:\n        os.fork() == 0 and os._exit(0)\n        time.sleep(0.05)\n"
    code += "time.sleep(0.5)\n"
    bot = sandbox.popen([sys.executable, "-c", code], cwd=Path("/"), env=sandbox.environment(),
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert bot.wait(timeout=30) == 0
    assert sandbox.processes(), "the detached processes should outlive the bot's own"
    sandbox.end_all()
    assert processes_of(sandbox.uid) == []


def test_a_fork_bomb_is_bounded_and_ended(sandbox: Sandbox):
    process = sandbox.popen(["/bin/sh", "-c", "b() { b & b & wait; }; b"], cwd=Path("/"), env=sandbox.environment(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    from personalens_testkit.assistants.sandbox import MAX_PROCESSES

    assert len(sandbox.processes()) <= MAX_PROCESSES
    sandbox.end_all()
    process.wait(timeout=10)
    assert sandbox.processes() == []


def test_the_bot_can_neither_signal_nor_read_the_gate(sandbox: Sandbox, tmp_path: Path):
    gate = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, "OPENAI_API_KEY": KEY})
    try:
        said = as_bot(sandbox, f"""import os, signal
out = []
for how in ("kill", "environ", "ptrace"):
    try:
        if how == "kill":
            os.kill({gate.pid}, signal.SIGKILL)
        elif how == "environ":
            out.append(open("/proc/{gate.pid}/environ", "rb").read().decode("latin-1"))
        else:
            open("/proc/{gate.pid}/mem", "rb").read(1)
        out.append(how)
    except OSError as exc:
        out.append(type(exc).__name__)
print(out)""", cwd=Path("/"))
        assert gate.poll() is None and KEY not in said
        assert said.strip() == "['PermissionError', 'PermissionError', 'PermissionError']"
    finally:
        gate.kill()
        gate.wait()


names = st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(names, st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=30),
                       max_size=12), st.lists(names, max_size=3, unique=True))
def test_the_bot_sees_the_allowlist_and_the_names_it_was_given_nothing_else(gate_env, passed):
    env = {**gate_env, "OPENAI_API_KEY": KEY, "AWS_SECRET_ACCESS_KEY": KEY[::-1], "PATH": "/usr/bin"}
    passed = [name for name in passed if name not in env or not name.startswith(("OPENAI_", "AWS_", "PERSONALENS_"))]
    box = Sandbox(uid=12345, home="/tmp/bot-home", pass_env=tuple(passed))
    seen = box.environment(env)
    own = {"HOME", "TMPDIR", "TMP", "TEMP", "USER", "LOGNAME"}
    assert set(seen) - own <= set(ALLOWED_ENV) | set(passed) | {n for n in env if n.startswith("LC_")}
    assert KEY not in seen.values() and KEY[::-1] not in seen.values()
    assert seen["HOME"] == "/tmp/bot-home"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["OPENAI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "OPENAI_BASE_URL",
                        "PERSONALENS_X"]) | names, st.text(min_size=0, max_size=8), st.text(min_size=0, max_size=8))
def test_a_model_key_never_reaches_the_bot_by_name_or_under_another(name, before, after):
    env = {"OPENAI_API_KEY": KEY, name: before + KEY + after}
    with pytest.raises(GateError, match=f"--bot-env {name}"):  # by its name (a model's), or by its value
        bot_env_names([name], env)
    # the bot's own secret, holding no model key, passes
    assert bot_env_names(["BOT_TOKEN"], {"OPENAI_API_KEY": KEY, "BOT_TOKEN": "its-own-token-42"}) == ("BOT_TOKEN",)


def test_the_bots_log_is_redacted_in_every_spelling_and_bounded(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    spellings = [KEY, base64.b64encode(KEY.encode()).decode(), base64.b64encode(b"x" + KEY.encode()).decode(),
                 base64.urlsafe_b64encode(b"ab" + KEY.encode()).decode(), json.dumps(KEY.replace("-", "\\u002d")),
                 "".join(f"%{ord(c):02X}" for c in KEY)]
    read, write = os.pipe()
    with os.fdopen(write, "wb") as out:
        for spelling in spellings:
            out.write(f"key: {spelling}\n".encode())
    with os.fdopen(read, "rb") as source:
        copy_log(source, tmp_path / "bot.log")
    text = (tmp_path / "bot.log").read_text()
    assert text.count("<OPENAI_API_KEY>") >= len(spellings) - 1 and KEY not in text
    assert base64.b64encode(KEY.encode()).decode()[:20] not in text
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a bot printing without end
        os.close(read)
        with os.fdopen(write, "wb") as out:
            for _ in range(4000):
                out.write(b"x" * 1000 + b"\n")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as source:
        copy_log(source, tmp_path / "big.log", limit=100_000)
    os.waitpid(pid, 0)
    big = (tmp_path / "big.log").read_bytes()
    assert len(big) < 101_000 and b"more bytes of the bot's output left out" in big


def test_a_started_bot_runs_as_its_identity_and_leaves_nothing_running(sandbox: Sandbox, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    port = random.randint(20000, 60000)
    command = (f"(setsid sh -c 'trap \"\" TERM; while :; do sleep 0.2; done' &) ; echo key=$OPENAI_API_KEY uid=$(id -u); "
               f"{sys.executable} -m http.server {port} --bind 127.0.0.1")
    bot = StartedBot(command, cwd=tmp_path, log=tmp_path / "bot.log", health_url=f"http://127.0.0.1:{port}/",
                     timeout_s=30, sandbox=sandbox)
    with bot:
        assert len(sandbox.processes()) >= 2
    assert sandbox.processes() == []
    log = (tmp_path / "bot.log").read_text()
    assert f"uid={sandbox.uid}" in log and "key= " in log and KEY not in log


def test_a_picked_user_id_is_nobodys():
    uid = pick_uid(random.Random(7))
    assert uid is not None and processes_of(uid) == []
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwuid(uid)


def test_a_gate_that_is_not_root_runs_itself_again_under_sudo_and_hands_its_folder_back(tmp_path: Path, monkeypatch):
    """On a hosted runner (a user with passwordless sudo) the gate re-runs as root with the same arguments and
    environment, once; the folder it wrote goes back to the user who ran it."""
    from personalens_testkit.gate.elevation import ELEVATED, elevated_command, hand_back

    command = elevated_command(["gate", "--target", "main", "--", "-k", "Alarm"])
    assert command[:4] == ["sudo", "-n", "-E", "env"] and f"{ELEVATED}=1" in command
    assert command[-6:] == ["gate", "--target", "main", "--", "-k", "Alarm"]
    assert command[command.index(sys.executable) + 1:][:2] == ["-m", "personalens_testkit.cli"]
    out = tmp_path / "personalens-gate"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "results.jsonl").write_text("{}\n")
    hand_back(out)  # not elevated: nothing changes hands
    assert out.stat().st_uid == os.geteuid()
    monkeypatch.setenv(ELEVATED, "1")
    monkeypatch.setenv("SUDO_UID", "4242")
    monkeypatch.setenv("SUDO_GID", "4343")
    hand_back(out)
    assert {(p.stat().st_uid, p.stat().st_gid) for p in [out, *out.rglob("*")]} == {(4242, 4343)}


SQUAT = '''import http.server, sys
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": [{"id": "a bot posing as the judge"}]}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Answer).serve_forever()
'''


def test_a_bot_that_takes_the_judges_port_first_is_refused(sandbox: Sandbox):
    """The embedded judge's port is picked, then its server binds it seconds later: a bot that binds it first
    answers every health check - and would judge. The listener's owner must be the run's own user."""
    from personalens_testkit.errors import ModelServerError
    from personalens_testkit.llm.embedded import _free_port, server_url, wait_until_healthy

    port = _free_port()
    squatter = sandbox.popen([sys.executable, "-c", SQUAT, str(port)], cwd=Path("/"), env=sandbox.environment(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with pytest.raises(ModelServerError, match=f"another user \\(uid {sandbox.uid}\\)"):
            wait_until_healthy(server_url(port), 20, pid=os.getpid())
        mine = _free_port()
        own = subprocess.Popen([sys.executable, "-c", SQUAT, str(mine)])
        try:
            wait_until_healthy(server_url(mine), 20, pid=own.pid)  # the run's own server: accepted
        finally:
            own.kill()
            own.wait()
    finally:
        squatter.kill()
        squatter.wait()



def test_what_the_bot_leaves_behind_is_removed_however_deep_or_wherever_shared(sandbox: Sandbox):
    """A tree deeper than Python's recursion limit, files at the top of every shared temporary folder, and
    System V IPC objects (they outlive every process) - all gone after the run."""
    as_bot(sandbox, f"""import os, subprocess
base = "/tmp/left-by-{sandbox.uid}"
os.makedirs(base)
os.chdir(base)
for _ in range(1500):
    os.mkdir("d"); os.chdir("d")
for folder in ("/var/tmp", "/dev/shm"):
    open(os.path.join(folder, "left-by-{sandbox.uid}"), "w").write("x")
subprocess.run(["ipcmk", "-M", "4096"], check=True, stdout=subprocess.DEVNULL)
""", cwd=Path("/"))
    shm = Path("/proc/sysvipc/shm")

    def owned() -> list[str]:
        rows = shm.read_text().splitlines()
        column = rows[0].split().index("uid")
        return [row for row in rows[1:] if row.split()[column] == str(sandbox.uid)]

    assert Path(f"/tmp/left-by-{sandbox.uid}").exists() and owned()
    sandbox.end_all()
    sandbox.remove_files()
    assert not any(Path(folder, f"left-by-{sandbox.uid}").exists() for folder in ("/tmp", "/var/tmp", "/dev/shm"))
    assert owned() == [] and not Path(sandbox.home).exists()


def test_listing_a_users_processes_while_processes_come_and_go_never_fails():
    """A process that ends between /proc's listing and the read of its status is skipped (the listing once raised
    ProcessLookupError at a gate's teardown)."""
    import os
    import subprocess
    import threading

    from personalens_testkit.assistants.sandbox import processes_of

    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            subprocess.run(["true"], check=False)  # noqa: S603, S607

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(300):
            assert os.getpid() in processes_of(os.getuid())
    finally:
        stop.set()
        for thread in threads:
            thread.join()
