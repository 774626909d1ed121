"""The pull-request gate workflow `personalens init` writes, and init's hygiene.

Every variant (kind x models provider, with and without --start) is a valid GitHub workflow (the schema
check-jsonschema vendors, read offline with jsonschema) with no `${{ }}` expression in a `run:` script.
The workflow's own `run:` steps, read from the generated YAML, then run with bash - `uses:` steps skipped,
the test makes the checkout itself - in a fresh git repository that is not a Python project, against the
installed wheel: green on the pull request of an unchanged bot, red on one whose bot says something
else, and one `::error::` line when the start command was never set."""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import jsonschema
import pytest
import yaml

from personalens_testkit.cli import main
from personalens_testkit.cli.estimate import estimate_of
from personalens_testkit.cli.init_workflow import PROVIDERS, GateSetup, render_workflow

from .support.fake_llm import FakeLLM, Script
from .test_install import clean_env, sh, venv  # noqa: F401 (venv: the module fixture, the wheel installed)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = GateSetup(kind="http", models="openai", start="node server.js --port 8080",
                    health_url="http://127.0.0.1:8080/health")
VARIANTS = [GateSetup(kind=kind, models=models, start=start, health_url=start and "http://127.0.0.1:8080/health")
            for kind in ("http", "openai", "python", "command") for models in PROVIDERS
            for start in ((None, "./serve --port 8080") if kind in ("http", "openai") else (None,))]
GATE_OPTIONS = {"--base", "--target", "--start", "--health-url", "--start-timeout", "--record-mode", "--out"}


def load(text: str) -> dict:
    workflow = yaml.safe_load(text)
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads the key `on` as true
    return workflow


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.Draft7Validator:
    spec = importlib.util.find_spec("check_jsonschema")  # its schema file only: the package is not imported
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("check-jsonschema is a test dependency (pyproject.toml, the embedded extra): pip install -e '.[embedded]'")
    path = Path(spec.submodule_search_locations[0]) / "builtin_schemas" / "vendor" / "github-workflows.json"
    return jsonschema.Draft7Validator(json.loads(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("setup", VARIANTS, ids=[f"{s.kind}-{s.models}-{'start' if s.start else 'nostart'}" for s in VARIANTS])
def test_every_variant_is_a_valid_workflow_that_calls_the_gate(setup, schema_validator):
    text = render_workflow(setup)
    workflow = load(text)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in schema_validator.iter_errors(workflow)]
    assert errors == []
    assert list(workflow["on"]) == ["pull_request"] and "pull_request_target" not in workflow["on"]
    assert workflow["permissions"] == {"contents": "read", **({"id-token": "write"} if setup.models == "bedrock" else {})}
    header = text.split("\nname:")[0]
    assert "CODEOWNERS" in header and "pull_request_target" in header and "docs/pr-gate.md" in header
    job = workflow["jobs"]["personalens"]
    assert ("HAS_MODELS" in job.get("env", {})) == (setup.models != "local")
    steps = job["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0
    python = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))
    assert "cache" not in python["with"]
    uses = {s["uses"].split("@")[0] for s in steps if "uses" in s}
    assert uses == {"actions/checkout", "actions/setup-python", "actions/upload-artifact"} | (
        {"aws-actions/configure-aws-credentials"} if setup.models == "bedrock" else set())
    runs = [s["run"] for s in steps if "run" in s]
    assert all("${{" not in run and "-e ." not in run for run in runs)  # values reach scripts through env only
    (gate,) = [run for run in runs if "personalens gate" in run]
    gate = "\n".join(line for line in gate.splitlines() if not line.lstrip().startswith("#"))
    assert set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", gate)) <= GATE_OPTIONS
    assert ("--start" in gate) == (setup.kind in ("http", "openai"))
    assert ("new_episodes" in gate) == (setup.models != "local")


def test_the_example_is_what_init_writes():
    assert (ROOT / "examples" / "ci" / "personalens-pr-gate.yml").read_text(encoding="utf-8") == render_workflow(EXAMPLE)


def test_the_start_command_is_kept_exactly(tmp_path):
    start = """node "my server.js" --greeting 'hi: #1' ${PORT:-8080} && echo "a\\b" """
    env = load(render_workflow(GateSetup(kind="http", start=start)))["jobs"]["personalens"]["steps"][-2]["env"]
    assert env["BOT_START"] == start.strip() and env["BOT_HEALTH_URL"] == ""


def test_start_is_only_for_a_bot_that_is_a_server(tmp_path, capsys):
    assert main(["init", str(tmp_path), "--kind", "python", "--start", "python3 bot.py"]) == 2
    assert "only for a bot that is a server" in capsys.readouterr().err
    assert main(["init", str(tmp_path), "--kind", "http", "--start", "a\nb"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_init_models_choose_the_config_and_the_credentials(tmp_path):
    for models, lines in (("openai", ['user_model = "openai:gpt-4o"', 'judge_model = "openai:gpt-4o"']),
                          ("bedrock", ['preset = "paper"'])):
        repo = tmp_path / models
        repo.mkdir()
        assert main(["init", str(repo), "--models", models, "--health-url", "http://127.0.0.1:3000/health",
                     "--start", "./serve"]) == 0
        config = (repo / "personalens.toml").read_text()
        assert all(f"\n{line}\n" in config for line in lines)
        assert 'url = "http://127.0.0.1:3000/reply"' in config  # the entry points where the bot listens
        assert (repo / ".github" / "workflows" / "personalens-pr-gate.yml").read_text() == render_workflow(
            GateSetup(kind="http", models=models, start="./serve", health_url="http://127.0.0.1:3000/health"))


def test_init_protects_the_workflow_with_a_codeowners_line_or_says_how(tmp_path, capsys):
    """A pull request that edits the gate's workflow edits its own gate: init names its owners in CODEOWNERS
    (GitHub's first file, kept as it was) or says how to protect it, and says what the runner needs."""
    assert main(["init", str(tmp_path), "--kind", "python"]) == 0
    said = capsys.readouterr().out
    assert "protect .github/workflows/personalens-pr-gate.yml" in said and "--owners" in said
    assert "root or passwordless sudo" in said
    assert not any((tmp_path / name).exists() for name in (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "CODEOWNERS").write_text("* @org/all")
    assert main(["init", str(tmp_path), "--kind", "python", "--owners", "@org/gate-owners,@alice",
                 "--owners", "sec@example.com"]) == 0
    assert "protect .github" not in capsys.readouterr().out
    text = (tmp_path / "docs" / "CODEOWNERS").read_text()
    assert text.startswith("* @org/all\n\n# ")
    assert text.endswith("\n/.github/workflows/personalens-pr-gate.yml @org/gate-owners @alice sec@example.com\n")
    assert main(["init", str(tmp_path), "--kind", "python", "--owners", "@org/other"]) == 0
    assert "kept (it names /.github/workflows/personalens-pr-gate.yml already)" in capsys.readouterr().out
    assert (tmp_path / "docs" / "CODEOWNERS").read_text() == text
    assert main(["init", str(tmp_path), "--owners", "not an owner"]) == 2
    assert "--owners: 'not': a GitHub user (@name), a team (@org/team) or an e-mail address" in capsys.readouterr().err


def test_init_hygiene_gitignore_force_and_a_second_assistant(tmp_path, capsys):
    (tmp_path / ".gitignore").write_text("node_modules/\n/personalens-results\n")
    assert main(["init", str(tmp_path), "--kind", "python", "--no-ci"]) == 0
    assert (tmp_path / ".gitignore").read_text().startswith("node_modules/\n/personalens-results\n\n# ")
    ignored = (tmp_path / ".gitignore").read_text().splitlines()
    assert "personalens-gate/" in ignored and "my-cassettes/" in ignored and "personalens-results/" not in ignored
    assert (tmp_path / "suites" / "conftest.py").is_file()
    config = tmp_path / "personalens.toml"
    before = config.read_bytes()
    capsys.readouterr()

    assert main(["init", str(tmp_path), "--assistant", "other-bot", "--kind", "command", "--no-ci"]) == 0
    said = capsys.readouterr().out
    assert "[assistants.other-bot] added" in said and "kept (it exists" in said and ".gitignore: kept" in said
    after = config.read_bytes()
    assert after.startswith(before) and b"[assistants.other-bot]\nkind = \"command\"" in after[len(before):]
    assert main(["init", str(tmp_path), "--assistant", "other-bot", "--no-ci"]) == 0
    assert "kept (it has [assistants.other-bot]" in capsys.readouterr().out and config.read_bytes() == after

    (tmp_path / "thresholds.yaml").write_text("one: 1\ntwo: 2\n")
    assert main(["init", str(tmp_path), "--kind", "python", "--no-ci", "--force"]) == 0
    said = capsys.readouterr().out
    assert re.search(r"thresholds.yaml: overwritten \(was 2 lines; now \d+\)", said), said
    assert re.search(r"personalens.toml: overwritten \(was \d+ lines", said)
    assert re.search(r"test_personalens.py: unchanged", said)


# ---------------------------------------------------------------- running the workflow's own steps

BOT = """import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

REPLY = "Done - your usual alarm is set for tomorrow."


class Bot(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"ok": True})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send({"reply": REPLY})


HTTPServer(("127.0.0.1", int(sys.argv[1])), Bot).serve_forever()
"""
SELECTION = 'profiles = "7"\ndomains = "Alarm"\ntask_kind = "sd"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def git(repo: Path, *args: str) -> str:
    done = sh("git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return done.stdout


def expression(expr: str, known: dict[str, str]) -> str:
    """The value of the few `${{ }}` expressions a generated workflow may use; any other one fails the test."""
    expr = expr.strip()
    if m := re.fullmatch(r"([\w.]+) != ''", expr):
        return "true" if known[m.group(1)] else "false"
    values = [known[part.strip()] for part in expr.split("||")]
    return next((v for v in values if v), "")


def run_steps(text: str, repo: Path, env: dict[str, str], known: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
    """Run the job's `run:` steps as the runner would (bash -eo pipefail, job then step env); stop at a failure."""
    job = load(text)["jobs"]["personalens"]
    assert job["defaults"]["run"]["shell"] == "bash"
    values = lambda table: {k: re.sub(r"\$\{\{(.*?)\}\}", lambda m: expression(m.group(1), known), str(v))  # noqa: E731
                            for k, v in (table or {}).items()}
    job_env = {**env, **values(job.get("env"))}
    done = []
    for number, step in enumerate(job["steps"]):
        if "uses" in step:
            continue  # checkout, setup-python, credentials, upload: the test provides the checkout and Python
        assert "if" not in step
        script = repo.parent / f"step-{number}.sh"
        script.write_text(step["run"])
        done.append(sh("bash", "--noprofile", "--norc", "-eo", "pipefail", script, cwd=repo,
                       env={**job_env, **values(step.get("env"))}, timeout=300))
        if done[-1].returncode != 0:
            break
    return done


@pytest.fixture(scope="module")
def upstream(venv, tmp_path_factory):  # noqa: F811
    """A team's repository that is not a Python project, with init's files and a recording on main."""
    repo, port = tmp_path_factory.mktemp("upstream") / "team", free_port()
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "bot.py").write_text(BOT)
    (repo / "README.md").write_text("# a team's bot\n")
    (repo / "package.json").write_text('{"name": "team-bot", "version": "1.0.0", "private": true}\n')  # a Node repo
    start, health = f"python3 bot.py {port}", f"http://127.0.0.1:{port}/health"
    init = sh(venv / "bin" / "personalens", "init", "--kind", "http", "--models", "openai", "--assistant", "team-bot",
              "--start", start, "--health-url", health, cwd=repo)
    assert init.returncode == 0, init.stderr
    # the newcomer's path from the wheel: a sized selection, a budget, and the gate named as what pull requests run
    assert "personalens gate" in init.stdout and re.search(r"the [\d,]{5} scenarios personalens.toml selects", init.stdout)
    assert re.search(r"^max_cost = \d+\.0 ", (repo / "personalens.toml").read_text(), re.M)
    config = repo / "personalens.toml"
    config.write_text(SELECTION + re.sub(r"^profiles = .*\n", "", config.read_text(), flags=re.M))  # init's own selection
    bot = subprocess.Popen(["python3", "bot.py", str(port)], cwd=repo)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(health, timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        with FakeLLM(Script(terminate_after=1)) as fake:
            record = sh(venv / "bin" / "pytest", "suites/", "--record-mode", "once", cwd=repo,
                        env=clean_env(OPENAI_BASE_URL=fake.url, OPENAI_API_KEY="sk-test-not-a-real-key-000"))
    finally:
        bot.terminate()
        bot.wait(10)
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-2000:]
    assert "Running teardown with pytest sessionfinish" not in record.stdout  # suites/conftest.py: deepeval's plugin off
    assert not (repo / "pyproject.toml").exists() and not (repo / "requirements.txt").exists()
    git(repo, "add", "-A")
    assert "personalens-results" not in git(repo, "status", "--short")  # .gitignore keeps the run's folder out
    git(repo, "commit", "-q", "-m", "personalens: suite and recording")
    return repo


def pull_request(upstream: Path, tmp_path: Path, change=None) -> Path:
    """A checkout of a pull request's branch, as actions/checkout with fetch-depth 0 leaves it."""
    work = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(upstream), str(work))
    git(work, "checkout", "-q", "-b", "feature")
    (work / "README.md").write_text("# a team's bot\n\nNow documented.\n")
    if change:
        change(work)
    git(work, "commit", "-q", "-am", "a pull request")
    return work


def workflow_env(venv: Path, tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:  # noqa: F811
    (wheel,) = (venv.parent / "dist").glob("personalens_testkit-*.whl")
    env = clean_env(PATH=f"{venv / 'bin'}:/usr/bin:/bin", GITHUB_BASE_REF="main", GITHUB_ACTIONS="true", CI="true",
                    GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    known = {"vars.PERSONALENS_TESTKIT": str(wheel), "secrets.OPENAI_API_KEY": "", "secrets.AWS_ROLE_ARN": "",
             "vars.OPENAI_BASE_URL": "", "secrets.OPENAI_BASE_URL": "", "vars.AWS_REGION": ""}
    return env, known


def test_the_workflow_steps_gate_a_pull_request_in_a_repository_that_is_not_python(upstream, venv, tmp_path):  # noqa: F811
    work = pull_request(upstream, tmp_path)
    env, known = workflow_env(venv, tmp_path)
    text = (work / ".github" / "workflows" / "personalens-pr-gate.yml").read_text()
    done = run_steps(text, work, env, known)
    assert [d.returncode for d in done] == [0, 0], done[-1].stdout[-3000:] + done[-1].stderr[-3000:]
    assert {p.name for p in (work / "personalens-gate").iterdir()} >= {"report.html", "report.json", "junit.xml", "summary.md"}
    assert "personalens: verdict: " in done[-1].stdout and "verdict: REGRESSED" not in done[-1].stdout and (tmp_path / "summary.md").read_text().strip()
    assert "personalens: budget --max-cost $" in done[-1].stdout  # init's budget, from the base's personalens.toml


def test_a_pull_request_whose_bot_says_something_else_is_red(upstream, venv, tmp_path):  # noqa: F811
    def change(work: Path) -> None:
        bot = work / "bot.py"
        bot.write_text(bot.read_text().replace("your usual alarm is set", "I set an alarm"))

    work = pull_request(upstream, tmp_path, change)
    env, known = workflow_env(venv, tmp_path)
    done = run_steps((work / ".github" / "workflows" / "personalens-pr-gate.yml").read_text(), work, env, known)
    assert [d.returncode for d in done] == [0, 1], done[-1].stdout[-3000:] + done[-1].stderr[-3000:]
    assert "differs from the recording" in done[-1].stdout + (tmp_path / "summary.md").read_text()


def test_a_workflow_without_a_start_command_fails_with_one_error_line(upstream, venv, tmp_path):  # noqa: F811
    work = pull_request(upstream, tmp_path)
    env, known = workflow_env(venv, tmp_path)
    done = run_steps(render_workflow(GateSetup(kind="http", models="openai")), work, env, known)
    assert [d.returncode for d in done] == [0, 2]
    errors = [line for line in done[-1].stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1 and "BOT_START" in errors[0], done[-1].stdout


@pytest.mark.parametrize("models", ["local", "openai", "bedrock"])
def test_init_writes_one_story_selection_budget_and_the_gate(tmp_path, capsys, monkeypatch, models):
    """The selection personalens.toml gets, the budget that caps a run of it (the most recording it may cost, from
    the same estimate `personalens estimate --record-mode once` prints there) and the commands init names."""
    import math
    import tomllib

    from personalens_testkit.cli import plan

    estimates = []
    monkeypatch.setattr(plan, "_BUDGETS", {})  # worked out afresh here, whatever this process did before
    monkeypatch.setattr(plan, "estimate_of", lambda settings: estimates.append(settings) or estimate_of(settings))
    assert main(["init", str(tmp_path), "--models", models, "--no-ci"]) == 0
    assert len(estimates) == 1  # the budget it writes is the one it says (an estimate simulates dialogues: 1 s)
    said = capsys.readouterr().out
    config = tomllib.loads((tmp_path / "personalens.toml").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert main(["estimate", "--record-mode", "once", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["cases"] == estimate["live_cases"][1] > 1000  # the planned selection, every scenario recorded
    nxt = next(line for line in said.splitlines() if line.startswith("next: "))
    assert f"the {estimate['cases']:,} scenarios personalens.toml selects" in nxt and "--profiles 7" not in nxt
    assert "personalens gate" in nxt and "pytest suites/ --record-mode once" in nxt
    if models == "local":  # free: no budget to set, and said so
        assert "max_cost" not in config and estimate["total_cost"] == [0.0, 0.0, 0.0] and "free on the embedded" in nxt
    else:
        low, point, high = estimate["total_cost"]
        assert 0 < low < point < high and config["max_cost"] == math.ceil(high / 10) * 10
        assert f"about ${point:,.0f}" in nxt and "within personalens.toml's max_cost" in nxt


def test_the_command_line_page_names_every_file_init_writes(tmp_path, capsys):
    assert main(["init", str(tmp_path), "--owners", "@org/team"]) == 0
    written = [line.split(":", 1)[0].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")
               and line.split(":", 1)[0].strip() and not line.strip().startswith("note")]
    page = (Path(__file__).resolve().parent.parent / "docs" / "command-line.md").read_text()
    assert len(written) >= 7, written
    relative = [str(Path(path).relative_to(tmp_path)) for path in written]
    missing = [path for path in relative if f"`{Path(path).name}`" not in page and f"`{path}`" not in page
               and Path(path).name != "personalens-pr-gate.yml"]  # the workflow: linked as the CI recipe
    assert not missing, f"docs/command-line.md does not name what init writes: {missing}"
