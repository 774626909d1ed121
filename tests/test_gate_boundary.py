"""`personalens gate` against a bot built to pass it without earning it: the pull request's *code*. The team's
repository of tests/test_pr_gate.py (a command bot in a script, a recording on main); the pull request brings a
worse bot that, at its start, at every reply and from a process it leaves behind for a minute, tries every
kind of attack: write the trusted tree, the cassette copy, the rows, the reports and the job summary; plant a
``.pth`` and a ``sitecustomize`` in the interpreter; read the model key from its environment, the gate's
processes' environments and their files; signal the gate's processes. Each attempt it manages is reported to a
folder anyone may write. The gate must end red, no attempt may succeed, nothing of the bot may outlive the
run, and no model key may be in the bot's environment, its log or any artifact."""

from __future__ import annotations

import base64
import json
import os
import re
import time
from pathlib import Path

import pytest

from personalens_testkit.assistants.sandbox import processes_of

from .support.fake_llm import FakeLLM, Script
from .support.reachable import tmp_path  # noqa: F401 - a folder the bot can reach
from .test_pr_gate import CASES, commit, environment, git, judge_rule, main_repo, personalens, pr  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a user id of the bot's own needs root (CI runs as root)")

KEY = "sk-test-not-a-real-key-000"  # the key tests/test_pr_gate.environment gives the gate

ATTACK_BOT = r'''import glob, json, os, signal, sys, sysconfig, time
REPORT = {report!r}
OUT = {out!r}
REPO = {repo!r}  # the pull request's checkout itself (the bot runs in a copy of its own)
SUMMARY = {summary!r}
KEY_MARK = "sk-test"
PLANT = "import os; os._exit(0)  # BOT-WAS-HERE\n"

def targets():
    """(path, whether a file there is planted afresh): what the gate and a later step read, and where Python looks."""
    found = glob.glob("/tmp/personalens-gate-*") + glob.glob("/tmp/personalens-gate-*/**", recursive=True)
    found += glob.glob(OUT + "/**", recursive=True) + [SUMMARY, REPO, os.path.join(REPO, "bot.py")]
    paths = sysconfig.get_paths()
    found += [os.path.join(paths["purelib"], "personalens_testkit", "__init__.py")]
    return [(path, False) for path in found] + [(os.path.join(paths["purelib"], "zz-bot.pth"), True),
                                                 (os.path.join(paths["stdlib"], "sitecustomize.py"), True)]

def attack(moment):
    wrote, signalled, keys = [], [], []
    for path, plant in targets():
        try:
            if os.path.isdir(path):
                open(os.path.join(path, "conftest.py"), "w").write(PLANT)
            else:  # a file found a moment ago is written only if it is still there: one gone (another gate's scratch
                # removed) would be a new file of the bot's own in /tmp, not a write into anything of the gate's
                flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if plant else 0)
                with os.fdopen(os.open(path, flags, 0o644), "a") as handle:
                    handle.write(PLANT if path.endswith((".py", ".pth")) else "BOT-WAS-HERE: passed\n")
            wrote.append(path)
        except OSError:
            pass
    me = os.getuid()
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            owner = os.stat("/proc/" + pid).st_uid
            if owner != me:
                os.kill(int(pid), 0)  # permission only: signal 0 delivers nothing
                signalled.append(pid)
        except OSError:
            pass
        try:
            if KEY_MARK in open("/proc/%s/environ" % pid, "rb").read().decode("latin-1"):
                keys.append("environ of " + pid)
        except OSError:
            pass
    keys += [name for name, value in os.environ.items() if KEY_MARK in value]
    for home in ("/root", os.path.expanduser("~")):
        for name in glob.glob(home + "/.*env*") + glob.glob(home + "/.aws/*"):
            try:
                if KEY_MARK in open(name).read():
                    keys.append(name)
            except OSError:
                pass
    with open(os.path.join(REPORT, "attempts.jsonl"), "a") as log:
        log.write(json.dumps({{"moment": moment, "uid": me, "wrote": wrote, "signalled": signalled, "keys": keys,
                              "env": sorted(os.environ)}}) + "\n")
    print("env as base64 for the log:", __import__("base64").b64encode(repr(dict(os.environ)).encode()).decode(),
          file=sys.stderr)

def linger():
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for _ in range(600):
        with open(os.path.join(REPORT, "alive"), "a") as alive:
            alive.write(".")
        attack("after")
        time.sleep(0.1)
    os._exit(0)

attack("start")
linger()
for line in sys.stdin:
    request = json.loads(line)
    attack("reply")
    print(json.dumps({{"id": request["id"], "reply": "Done - an alarm is set."}}), flush=True)
'''


def every_file_holds_no_key(folder: Path) -> list[str]:
    forms = {KEY.encode(), base64.b64encode(KEY.encode())[:20]}
    return [str(path) for path in folder.rglob("*") if path.is_file() and any(f in path.read_bytes() for f in forms)]


def attempts(report: Path) -> list[dict]:
    return [json.loads(line) for line in (report / "attempts.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("live", [False, True], ids=["offline", "with-credentials"])
def test_a_bot_that_attacks_the_gate_from_every_side_ends_red_and_changes_nothing(pr: Path, tmp_path: Path, live: bool):
    report = tmp_path / "reported"
    report.mkdir()
    report.chmod(0o777)
    summary = tmp_path / "step-summary.md"
    summary.write_text("")
    out = pr / "personalens-gate"
    (pr / "bot.py").write_text(ATTACK_BOT.format(report=str(report), out=str(out), summary=str(summary), repo=str(pr)))
    commit(pr, "a worse bot that attacks the gate")
    record = ["--record-mode", "new_episodes"] if live else []
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        done = personalens("gate", "--target", "main", *record, cwd=pr,
                           env=environment(fake if live else None, GITHUB_STEP_SUMMARY=str(summary)))
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    uid = int(re.search(r"the bot runs as user id (\d+)", done.stdout).group(1))
    seen = attempts(report)
    assert {"start", "reply", "after"} <= {a["moment"] for a in seen}, done.stdout[-3000:]
    assert all(a["uid"] == uid for a in seen)
    assert [a for a in seen if a["wrote"] or a["signalled"] or a["keys"]] == []
    assert not any(name.startswith(("OPENAI", "AWS", "GITHUB", "PYTEST")) for a in seen for name in a["env"])
    # nothing of the bot outlives the run: its lingering process stopped with it
    assert processes_of(uid) == []
    alive = (report / "alive").stat().st_size
    time.sleep(0.5)
    assert (report / "alive").stat().st_size == alive
    assert "BOT-WAS-HERE" not in summary.read_text()
    assert git(pr, "status", "--porcelain") == ""  # nothing of the checkout itself changed
    assert every_file_holds_no_key(out) == []
    assert not [p for p in out.rglob("*") if p.is_file() and b"BOT-WAS-HERE" in p.read_bytes() and p.name != "bot.py"]
    verdict = json.loads((out / "report.json").read_text())["verdict"]
    assert verdict["cases"] == CASES and verdict["outcome"] != "passed"
    if live:  # the gate's own recording, listed with its digests, promotes as it is
        manifest = json.loads((out / "gate.json").read_text())
        assert manifest["files"] and all(name.endswith((".json.xz", ".jsonl.xz")) for name in manifest["files"])


def test_no_isolation_is_said_in_one_line_and_in_the_job_summary_and_so_is_a_changed_workflow(pr: Path, tmp_path: Path):
    summary = tmp_path / "step-summary.md"
    workflow = pr / ".github" / "workflows" / "personalens-pr-gate.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("name: a workflow the pull request rewrote\n")
    commit(pr, "a changed workflow")
    done = personalens("gate", "--target", "main", "--isolation", "off", cwd=pr,
                       env=environment(GITHUB_STEP_SUMMARY=str(summary),
                                       GITHUB_WORKFLOW_REF="team/repo/.github/workflows/personalens-pr-gate.yml@x"))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    said = [line for line in done.stdout.splitlines() if "no isolation (--isolation off)" in line]
    assert len(said) == 1
    text = summary.read_text()
    assert "no isolation (--isolation off)" in text
    assert "adds .github/workflows/personalens-pr-gate.yml: the workflow running this gate" in text


EXPECTATIONS = """version: 1
assistant: my-bot
scenarios:
  user7-SD-Alarm-task-1: fail personalization
"""


def test_promote_takes_a_credentialed_gates_recording_and_refuses_any_file_it_did_not_list(pr: Path):
    """The base's folder holds expectations.yaml (which promote never takes); each file must be as the gate
    listed it: a changed byte, a file added, a file removed - all refused, nothing written."""
    git(pr, "checkout", "-q", "main")
    (pr / "cassettes" / "my-bot" / "expectations.yaml").write_text(EXPECTATIONS)
    commit(pr, "expectations on main")
    git(pr, "checkout", "-q", "-b", "change-2")
    (pr / "bot.py").write_text((pr / "bot.py").read_text().replace("birdsong", "ocean-wave"))
    commit(pr, "another bot")
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        done = personalens("gate", "--target", "main", "--record-mode", "new_episodes", cwd=pr, env=environment(fake))
    assert done.returncode in (0, 1), done.stdout[-4000:] + done.stderr[-2000:]
    git(pr, "checkout", "-q", "main")
    git(pr, "merge", "-q", "change-2")
    folder = pr / "personalens-gate" / "cassettes" / "my-bot"
    assert not (folder / "expectations.yaml").exists()  # the base's file is not part of the recording
    cassette = sorted(folder.glob("*.json.xz"))[0]
    original = cassette.read_bytes()
    other = sorted(folder.glob("*.json.xz"))[1].read_bytes()  # a cassette that reads back, but not this one
    for tamper, undo, message in (
        (lambda: cassette.write_bytes(other), lambda: cassette.write_bytes(original), "not as the gate recorded it"),
        (lambda: (folder / "extra.json.xz").write_bytes(original), lambda: (folder / "extra.json.xz").unlink(),
         "not as the gate recorded it"),
        (lambda: cassette.unlink(), lambda: cassette.write_bytes(original), "listed in gate.json but missing"),
    ):
        tamper()
        refused = personalens("promote", "personalens-gate", cwd=pr, env=environment())
        undo()
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert git(pr, "status", "--porcelain") == ""
    promoted = personalens("promote", "personalens-gate", cwd=pr, env=environment())
    assert promoted.returncode == 0, promoted.stderr
    assert "promoted" in promoted.stdout


def test_a_model_key_the_bases_bot_entry_would_hand_the_bot_is_refused(pr: Path):
    """The base's bot entry may pass the bot variables (``env``) or send its server headers: none of them may
    carry a model's key, whatever it is called there."""
    git(pr, "checkout", "-q", "main")
    config = (pr / "personalens.toml").read_text()
    (pr / "personalens.toml").write_text(config + 'env = { LLM_TOKEN = "Bearer ${OPENAI_API_KEY}" }\n')
    commit(pr, "the bot gets the judge's key")
    git(pr, "checkout", "-q", "-b", "change-3")
    done = personalens("gate", "--target", "main", cwd=pr, env=environment())
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-2000:]
    assert "the base's [assistants.my-bot] env: LLM_TOKEN: holds the value of one of the gate's secret" in done.stderr
    assert KEY not in done.stdout + done.stderr
