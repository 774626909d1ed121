"""`personalens gate`: a pull request's verdict takes everything that decides it from the base commit and only
the bot from the pull request. A team repository (not a Python package: a command bot in a script) records on
main against a loopback judge that scores by what the bot says; then pull requests - the unchanged bot, a
worse bot, and worse bots that try to pass the gate without earning it - run the gate as CI would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .support.fake_llm import FakeLLM, Script
from .support.project import LEFT_OUT, recorded_rows, write_recorded, with_runs
from .support.reachable import tmp_path  # noqa: F401 - a folder a bot under its own user id can reach

#: user 7's single-domain scenarios in these domains: enough for the baseline to decide (a gate needs 10)
CASES = 13
GOOD = "Done - your saved 7:30 birdsong alarm is set, as you like it."
WORSE = "Done - an alarm is set."
BOT = '''import json, sys
REPLY = {reply!r}
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps({{"id": request["id"], "reply": REPLY}}), flush=True)
'''
CONFIG = '''assistant = "my-bot"
user_model = "openai:fake-user"
judge_model = "openai:fake-judge"
profiles = "7"
domains = "Alarm,Books,Calendar"
task_kind = "sd"

[assistants.my-bot]
kind = "command"
command = ["{python}", "bot.py"]
'''


def judge_rule(text: str) -> dict:
    """A judge in miniature: the bot that uses the saved preference personalizes; one that does not, does not."""
    return {} if "birdsong" in text else {"personalization": 1, "task_completion": False, "naturalness_assistant": 2}


def run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def environment(fake: FakeLLM | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "OPENAI", "GITHUB"))}
    env.update(PYTEST_ADDOPTS=LEFT_OUT, OPENAI_API_KEY="sk-test-not-a-real-key-000",
               OPENAI_BASE_URL=fake.url if fake else "http://127.0.0.1:9/v1", **extra)
    return env


def git(repo: Path, *args: str) -> str:
    done = run("git", *args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return done.stdout


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)


def personalens(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "personalens_testkit.cli", *args, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def main_repo(tmp_path_factory) -> Path:
    """A team's repository whose main has the suite, the config and a recording of the good bot."""
    repo = tmp_path_factory.mktemp("gate") / "team"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    init = personalens("init", "--kind", "command", "--assistant", "my-bot", "--no-ci", cwd=repo, env=environment())
    assert init.returncode == 0, init.stderr
    (repo / "personalens.toml").write_text(CONFIG.format(python=sys.executable))
    (repo / "bot.py").write_text(BOT.format(reply=GOOD))
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        record = run(sys.executable, "-m", "pytest", "suites/", "--record-mode", "once", "-p", "no:cacheprovider",
                     cwd=repo, env=environment(fake))
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    (repo / ".gitignore").write_text("personalens-results/\npersonalens-gate/\n")
    commit(repo, "the bot, the suite and its recording")
    return repo


@pytest.fixture
def pr(main_repo: Path, tmp_path: Path) -> Path:
    """A pull request's checkout: a clone of main on a branch of its own."""
    repo = tmp_path / "pr"
    shutil.copytree(main_repo, repo, symlinks=True)
    git(repo, "checkout", "-q", "-b", "change")
    return repo


def gate(repo: Path, *args: str, fake: FakeLLM | None = None) -> subprocess.CompletedProcess[str]:
    record = ["--record-mode", "new_episodes"] if fake else []
    return personalens("gate", "--target", "main", *record, *args, cwd=repo, env=environment(fake))


def worse_bot(repo: Path) -> None:
    (repo / "bot.py").write_text(BOT.format(reply=WORSE))


def test_an_unchanged_bot_passes_offline(pr: Path):
    (pr / "README.md").write_text("a change that is not the bot's\n")
    commit(pr, "docs")
    done = gate(pr)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "everything that decides the verdict from" in done.stdout and "merge base of HEAD and main" in done.stdout
    assert "not used by this gate" not in done.stdout  # README.md is not among the files the gate takes from the base
    report = json.loads((pr / "personalens-gate" / "report.json").read_text())
    assert report["verdict"]["failures"] == [] and report["verdict"]["cases"] == CASES
    assert git(pr, "status", "--porcelain") == ""  # nothing written outside the ignored gate folder


def test_a_worse_bot_fails_offline_and_live(pr: Path):
    worse_bot(pr)
    commit(pr, "a worse bot")
    offline = gate(pr)
    assert offline.returncode == 1, offline.stdout[-4000:]
    assert "differs from the recording" in offline.stdout
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        live = gate(pr, fake=fake)
    assert live.returncode == 1, live.stdout[-4000:] + live.stderr[-2000:]
    report = json.loads((pr / "personalens-gate" / "report.json").read_text())
    # judged live: each case below its floor is judged again beside the base's dialogue, and confirmed
    assert report["verdict"]["outcome"] == "regressed" and len(report["verdict"]["regressions"]) == CASES
    assert report["verdict"]["unconfirmed"] == []
    baseline = next(c for c in report["verdict"]["checks"] if c["name"] == "baseline comparison")
    assert baseline["outcome"] == "failed", report["verdict"]
    # the gate recorded into its own folder, never into the committed cassettes or recorded results
    assert git(pr, "status", "--porcelain") == ""
    assert list((pr / "personalens-gate" / "cassettes" / "my-bot").glob("*.json.xz"))


def test_forged_recordings_and_results_are_not_used(pr: Path):
    """Re-recorded cassettes from a judge of the pull request's own that always gives 4/4, its recorded results
    and a narrowed selection with the worse domain's rows deleted: all taken from the base instead."""
    worse_bot(pr)
    generous = Script(terminate_after=1)  # no judge_rule: every dialogue gets the good scores
    with FakeLLM(generous) as fake:
        forged = run(sys.executable, "-m", "pytest", "suites/", "--record-mode", "all", "-p", "no:cacheprovider",
                     cwd=pr, env=environment(fake))
    assert forged.returncode == 0, forged.stdout[-3000:]
    config = (pr / "personalens.toml").read_text().replace('profiles = "7"', 'profiles = "7"\nmax_turns = 1')
    (pr / "personalens.toml").write_text(config)
    folder = pr / "cassettes" / "my-bot"
    write_recorded(folder, recorded_rows(folder)[:1])
    commit(pr, "a worse bot, re-recorded against a generous judge")
    plain = run(sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", cwd=pr, env=environment())
    assert plain.returncode == 0, plain.stdout[-3000:]  # the forgery passes a run that reads the pull request's files
    done = gate(pr)
    assert done.returncode == 1, done.stdout[-4000:]
    assert "changes personalens.toml: not used by this gate; takes effect once merged" in done.stdout
    assert "changes cassettes/my-bot/results.jsonl.xz: not used by this gate; takes effect once merged" in done.stdout
    assert "differs from the recording" in done.stdout


def test_forged_expectations_thresholds_and_judge_are_not_used(pr: Path):
    worse_bot(pr)
    thresholds = (pr / "thresholds.yaml").read_text()
    lowered = thresholds.replace("task_completion: true", "task_completion: null").replace("personalization: 2",
                                                                                            "personalization: null")
    assert lowered != thresholds
    (pr / "thresholds.yaml").write_text(lowered)
    ids = sorted(row["scenario_id"] for row in recorded_rows(pr / "cassettes" / "my-bot"))
    (pr / "cassettes" / "my-bot" / "expectations.yaml").write_text(  # every scenario "flaky": expected, whatever
        "version: 1\nassistant: my-bot\nscenarios:\n" + "".join(f"  {i}: flaky\n" for i in ids))
    with FakeLLM(Script(terminate_after=1)) as own_judge:  # the pull request's own judge: always generous
        config = (pr / "personalens.toml").read_text()
        (pr / "personalens.toml").write_text(config.replace('judge_model = "openai:fake-judge"',
                                                            f'judge_model = "openai:own"\n'
                                                            f'# own judge at {own_judge.url}'))
        commit(pr, "a worse bot, expectations, thresholds and a judge of its own")
        with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
            done = gate(pr, fake=fake)
    assert done.returncode == 1, done.stdout[-4000:]
    shown = done.stdout.splitlines()
    for name in ("thresholds.yaml", "personalens.toml"):
        assert f"personalens gate: changes {name}: not used by this gate; takes effect once merged" in shown
    assert "personalens gate: adds cassettes/my-bot/expectations.yaml: not used by this gate; takes effect once merged" in shown
    assert not own_judge.requests  # the pull request's judge was never asked


def test_forged_pytest_config_and_conftest_are_not_used(pr: Path):
    """pytest reads config and conftest files by name: the pull request's never reach the gate's run."""
    worse_bot(pr)
    (pr / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n\n"
        "@pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n")
    (pr / "suites" / "conftest.py").write_text((pr / "conftest.py").read_text())
    (pr / "pytest.ini").write_text("[pytest]\naddopts = -k nothing-at-all\n")
    commit(pr, "a worse bot that rewrites the outcome")
    plain = run(sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", "-o", "addopts=", cwd=pr,
                env=environment())
    assert plain.returncode == 0, plain.stdout[-3000:]  # the forgery passes a run that reads the pull request's files
    summary = pr.parent / "step-summary.md"
    done = personalens("gate", "--target", "main", cwd=pr, env=environment(GITHUB_STEP_SUMMARY=str(summary)))
    assert done.returncode == 1, done.stdout[-4000:]
    for name in ("conftest.py", "suites/conftest.py", "pytest.ini"):
        line = next(line for line in done.stdout.splitlines() if f" {name}: not used by this gate" in line)
        assert line.endswith(f"s {name}: not used by this gate; takes effect once merged")  # adds / changes
        assert f"{name}: not used by this gate" in summary.read_text()


def test_promote_is_an_explicit_step_on_main(pr: Path, main_repo: Path):
    worse_bot(pr)
    commit(pr, "a worse bot")
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        gate(pr, fake=fake)
    before = (pr / "cassettes" / "my-bot" / "results.jsonl.xz").read_bytes()
    git(pr, "checkout", "-q", "main")
    git(pr, "merge", "-q", "change")
    promoted = personalens("promote", "personalens-gate", cwd=pr, env=environment())
    assert promoted.returncode == 0, promoted.stderr
    assert "cassettes/my-bot/results.jsonl.xz: promoted" in promoted.stdout
    assert (pr / "cassettes" / "my-bot" / "results.jsonl.xz").read_bytes() != before
    again = personalens("promote", "personalens-gate", cwd=pr, env=environment())
    assert again.returncode == 0 and "nothing differed" in again.stdout


PYTHON_BOT = '''import json, os, sys
with open({where!r}, "w") as out:
    json.dump({{"pid": os.getpid(), "uid": os.getuid(), "beside_the_judge": "personalens_testkit.plugin" in sys.modules}}, out)

def reply(request):
    return {{"reply": "Done - your saved 7:30 birdsong alarm is set."}}
'''


def test_a_python_bot_runs_in_a_process_of_its_own(tmp_path: Path):
    """A python bot is the pull request's code: in the gate it shares no memory with the judge (in a plain run
    it is imported into pytest's process), and runs under a user id of its own (it writes where it ran to a
    folder anyone may write: its own checkout is not writable to it)."""
    drop = tmp_path / "drop"
    drop.mkdir()
    drop.chmod(0o777)
    where = drop / "where.json"
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    assert personalens("init", "--kind", "python", "--no-ci", cwd=repo, env=environment()).returncode == 0
    config = CONFIG.replace('kind = "command"', 'kind = "python"').replace('command = ["{python}", "bot.py"]',
                                                                        'callable = "bot:reply"\npath = ["."]')
    (repo / "personalens.toml").write_text(config)
    (repo / "bot.py").write_text(PYTHON_BOT.format(where=str(where)))
    (repo / ".gitignore").write_text("personalens-results/\npersonalens-gate/\nwhere.json\n__pycache__/\n")
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        record = run(sys.executable, "-m", "pytest", "suites/", "--record-mode", "once", "-p", "no:cacheprovider",
                     "-k", "task-1", cwd=repo, env=environment(fake))
    assert record.returncode == 0, record.stdout[-3000:]
    assert json.loads(where.read_text())["beside_the_judge"] is True  # a plain run: in-process
    where.unlink()  # the gate's bot writes it afresh
    commit(repo, "main")
    git(repo, "checkout", "-q", "-b", "change")
    done = personalens("gate", "--target", "main", "--", "-k", "task-1", cwd=repo, env=environment())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    ran = json.loads(where.read_text())
    assert ran["beside_the_judge"] is False
    assert ran["uid"] != os.getuid() or os.geteuid() != 0  # a root gate gives the bot a user id of its own


def test_the_gate_refuses_what_it_sets_itself_and_a_base_it_cannot_find(pr: Path):
    owned = gate(pr, "--", "--cassette-dir", "elsewhere")
    assert owned.returncode == 2 and "--cassette-dir: the gate sets it" in owned.stderr
    lost = personalens("gate", "--target", "no-such-branch", cwd=pr, env=environment())
    assert lost.returncode == 2 and "--target no-such-branch: neither origin/no-such-branch nor" in lost.stderr
    (pr / "personalens-gate").mkdir()
    (pr / "personalens-gate" / "mine.txt").write_text("a team's file")
    foreign = gate(pr)
    assert foreign.returncode == 2 and "not a gate run's" in foreign.stderr
    assert (pr / "personalens-gate" / "mine.txt").is_file()
    (pr / "linked").symlink_to(pr / "cassettes")
    linked = gate(pr, "--out", "linked")
    assert linked.returncode == 2 and "--out" in linked.stderr and "not a folder (a link" in linked.stderr
    assert (pr / "cassettes" / "my-bot" / "results.jsonl.xz").is_file()


def test_a_changed_file_is_one_line_whatever_its_name(pr: Path):
    (pr / "suites" / "x\npersonalens gate: all clear.py").write_text("# a name that tries to print a line\n")
    commit(pr, "an odd name")
    done = gate(pr)
    assert done.returncode == 0, done.stdout[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if "not used by this gate" in line]
    assert line.startswith("personalens gate: adds 'suites/x\\npersonalens gate: all clear.py': not used")
    assert not any(line.startswith("personalens gate: all clear") for line in done.stdout.splitlines())


def test_a_plain_recording_run_never_overwrites_its_own_baseline(pr: Path):
    """Today's trap: a new_episodes run that merged its rows into the recorded results it compared with made
    the next run compare the worse bot with itself ("no significant drop")."""
    worse_bot(pr)
    baseline = pr / "cassettes" / "my-bot" / "results.jsonl.xz"
    before = baseline.read_bytes()
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        done = run(sys.executable, "-m", "pytest", "suites/", "--record-mode", "new_episodes", "-p", "no:cacheprovider",
                   "--baseline", str(baseline), cwd=pr, env=environment(fake))
    assert done.returncode == 1, done.stdout[-3000:]
    assert baseline.read_bytes() == before
    assert "are left as they are: they are this run's --baseline" in done.stdout


def test_a_tag_named_like_the_target_branch_is_not_the_base(pr: Path):
    """git finds refs/tags/origin/main before refs/remotes/origin/main: the gate names the branch in full."""
    worse_bot(pr)
    commit(pr, "a worse bot")
    git(pr, "update-ref", "refs/remotes/origin/main", "main")
    git(pr, "tag", "origin/main", "HEAD")  # the pull request's own commit, dressed as the base
    done = gate(pr)
    assert done.returncode == 1 and "merge base of HEAD and origin/main" in done.stdout
    assert git(pr, "rev-parse", "main").strip()[:12] in done.stdout


def test_base_side_git_attributes_do_not_change_what_the_gate_reads(pr: Path):
    """export-ignore would drop the cassettes and thresholds from a `git archive` of the base: the gate reads blobs."""
    git(pr, "checkout", "-q", "main")
    (pr / ".gitattributes").write_text("cassettes/** export-ignore\nthresholds.yaml export-ignore\n")
    commit(pr, "slimmer archives")
    git(pr, "checkout", "-q", "-b", "change2")
    worse_bot(pr)
    commit(pr, "a worse bot")
    done = gate(pr)
    assert done.returncode == 1 and "differs from the recording" in done.stdout
    assert "no recorded results" not in done.stdout


def test_a_config_file_that_is_not_a_plain_file_is_a_change_never_read(pr: Path):
    (pr / "pyproject.toml").symlink_to("/dev/zero")
    commit(pr, "a pyproject that never ends")
    done = gate(pr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "adds pyproject.toml: not used by this gate; takes effect once merged" in done.stdout


def test_promote_refuses_a_tampered_gate_folder(pr: Path):
    worse_bot(pr)
    commit(pr, "a worse bot")
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        gate(pr, fake=fake)
    git(pr, "checkout", "-q", "main")
    git(pr, "merge", "-q", "change")
    folder = pr / "personalens-gate"
    manifest = json.loads((folder / "gate.json").read_text())
    assert (manifest["finished"], manifest["outcome"], manifest["pytest_status"]) == (True, "regressed", 1)
    (folder / "gate.json").write_text(json.dumps({**manifest, "cassette_dir": "suites"}))
    elsewhere = personalens("promote", "personalens-gate", cwd=pr, env=environment())
    assert elsewhere.returncode == 2 and "is not this repository's cassette folder" in elsewhere.stderr
    (folder / "gate.json").write_text(json.dumps(manifest))
    (folder / "cassettes" / "my-bot" / "conftest.py").write_text("raise SystemExit\n")
    planted = personalens("promote", "personalens-gate", cwd=pr, env=environment())
    assert planted.returncode == 2 and "conftest.py: not a cassette or the recorded results" in planted.stderr
    assert git(pr, "status", "--porcelain") == ""  # nothing promoted: all or none


def test_the_report_reads_only_the_rows_the_run_wrote(tmp_path: Path):
    """A bot that finds the run's results file and appends good rows to it changes nothing."""
    from personalens_testkit.results.files import ResultsWriter, read_rows
    from personalens_testkit.results.rows import ResultRow

    writer = ResultsWriter(tmp_path / "results.jsonl")
    folder = Path(__file__).resolve().parent.parent / "cassettes" / "reference"
    recorded = [ResultRow.model_validate(row) for row in recorded_rows(folder)[:3]]
    for row in recorded[:2]:
        writer.write(row)
    forged = recorded[2].model_copy(update={"finished_at": "2099-01-01T00:00:00+00:00"})
    with open(tmp_path / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(forged.model_dump_json() + "\n")
    writer.close()
    assert len(read_rows(tmp_path / "results.jsonl")) == 3
    kept = read_rows(tmp_path / "results.jsonl", written=writer.written)
    assert sorted(row.case_id for row in kept) == sorted(row.case_id for row in recorded[:2])


def noisy(rule, seed: int):
    """A judge as noisy as a real one: a rating moves one level with probability 0.3, a completion verdict flips
    with probability 0.1, on every judgement afresh."""
    import random
    import threading

    rng, lock = random.Random(seed), threading.Lock()
    base = Script().scores

    def judge(text: str) -> dict:
        scores = {**base, **rule(text)}
        with lock:
            for name, high in (("personalization", 4), ("naturalness_assistant", 5), ("coherence_assistant", 5)):
                if rng.random() < 0.3:
                    scores[name] = min(high, max(1, scores[name] + rng.choice((-1, 1))))
            if rng.random() < 0.1:
                scores["task_completion"] = not scores["task_completion"]
        return scores

    return judge


def test_a_noisy_judge_re_judging_the_same_bot_is_not_red_and_a_worse_bot_is(pr: Path):
    baseline = str(pr / "cassettes" / "my-bot" / "results.jsonl.xz")
    for seed in (1, 2, 3):
        with FakeLLM(Script(terminate_after=1, judge_rule=noisy(judge_rule, seed))) as fake:
            same = run(sys.executable, "-m", "pytest", "suites/", "--rejudge", "--record-mode", "all", "--baseline", baseline,
                       "-p", "no:cacheprovider", cwd=pr, env=environment(fake))
        assert same.returncode == 0, same.stdout[-3000:]
        assert "personalens: verdict: REGRESSED" not in same.stdout
    worse_bot(pr)
    commit(pr, "a worse bot")
    with FakeLLM(Script(terminate_after=1, judge_rule=noisy(judge_rule, 4))) as fake:
        worse = gate(pr, fake=fake)
    assert worse.returncode == 1 and "personalens: verdict: REGRESSED" in worse.stdout, worse.stdout[-3000:]


PARTLY = '''import json, sys
for line in sys.stdin:
    request = json.loads(line)
    broken = "book" in json.dumps(request).lower()  # a generic sentence where the user talks of books
    print(json.dumps({{"id": request["id"], "reply": {worse!r} if broken else {good!r}}}), flush=True)
'''


def test_a_bot_broken_on_a_few_scenarios_is_red_with_credentials(pr: Path):
    """A floor missed on a live judgement is judged again beside the base's dialogue: a bot broken on a few
    scenarios fails the gate with credentials, as it does without them, naming only those - on a noisy judge."""
    (pr / "bot.py").write_text(PARTLY.format(worse=WORSE, good=GOOD))
    commit(pr, "a bot broken where books come up")
    with FakeLLM(Script(terminate_after=1, judge_rule=noisy(judge_rule, 5))) as fake:
        live = gate(pr, fake=fake)
    assert live.returncode == 1, live.stdout[-4000:] + live.stderr[-2000:]
    report = json.loads((pr / "personalens-gate" / "report.json").read_text())
    regressions = report["verdict"]["regressions"]
    assert report["verdict"]["outcome"] == "regressed" and regressions
    assert all("Books" in case for case in regressions), regressions  # only the broken scenarios
    rows = with_runs([json.loads(line) for line in next((pr / "personalens-gate").rglob("results.jsonl")).read_text().splitlines()])
    for row in rows:
        if row["scenario_id"] in regressions:
            confirmation = row["confirmation"]
            assert confirmation["confirmed"] and len(confirmation["case"]) == len(confirmation["base"]) == 5  # 13 cases
        else:
            assert row["confirmation"] is None or not row["confirmation"]["confirmed"]


CRASHING = '''import json, sys
for line in sys.stdin:
    request = json.loads(line)
    if "book" in json.dumps(request).lower():
        sys.exit(3)  # the bot dies half-way through the run
    print(json.dumps({{"id": request["id"], "reply": {good!r}}}), flush=True)
'''


def test_a_bot_that_crashes_mid_gate_gets_one_verdict_everywhere(pr: Path, tmp_path: Path):
    (pr / "bot.py").write_text(CRASHING.format(good=GOOD))
    commit(pr, "a bot that dies where books come up")
    summary = tmp_path / "step-summary.md"
    with FakeLLM(Script(terminate_after=1, judge_rule=judge_rule)) as fake:
        done = personalens("gate", "--target", "main", "--record-mode", "new_episodes", cwd=pr,
                           env={**environment(fake), "GITHUB_STEP_SUMMARY": str(summary)})
    report = json.loads((pr / "personalens-gate" / "report.json").read_text())
    manifest = json.loads((pr / "personalens-gate" / "gate.json").read_text())
    outcome = report["verdict"]["outcome"]
    assert outcome == "regressed", report["verdict"]
    assert done.returncode == 1 and f"personalens gate: verdict: {outcome}" in done.stdout, done.stdout[-3000:]
    assert (manifest["finished"], manifest["outcome"]) == (True, outcome)
    assert "REGRESSED" in summary.read_text().upper() and "no verdict" not in summary.read_text()
