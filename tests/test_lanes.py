"""``--concurrency auto``: the run picks how many scenarios a process evaluates at once - 16 a usable core for the
whole run, at most 64, shared out over its xdist workers, no more than --max-concurrency, and 1 when nothing is
called live or an embedded model is; a number given is taken as it is. The option, the config key and the header
say so; a value that is neither a whole number nor auto is one line naming where it came from."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.errors import ConfigError, UsageError
from personalens_testkit.run.lanes import MOST, PER_CORE, lanes
from personalens_testkit.settings import resolve_settings

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project

SPECS = ["--user-model", "openai:fake-user", "--judge-model", "openai:fake-judge", "--assistant-model", "openai:fake-bot"]


@settings(max_examples=500, deadline=None)
@given(given_=st.integers(1, 256) | st.just("auto"), workers=st.integers(0, 32), cores=st.integers(1, 64),
       live=st.booleans(), embedded=st.booleans(), limit=st.none() | st.integers(1, 200))
def test_the_rule(given_, workers, cores, live, embedded, limit):
    chosen = lanes(given_, workers=workers, cores=cores, live=live, embedded=embedded, max_concurrency=limit)
    if given_ != "auto":
        assert chosen == given_
        return
    assert chosen >= 1
    if not live or embedded:
        assert chosen == 1
        return
    processes = max(1, workers)
    whole = min(MOST, PER_CORE * cores, limit or MOST)
    assert chosen == max(1, whole // processes)
    assert chosen * processes <= max(whole, processes)  # never more lanes in all than the run's share allows


def test_the_option_and_the_config_take_auto_or_a_number_and_name_anything_else(tmp_path):
    assert resolve_settings({"concurrency": "auto"}, tmp_path, {}).concurrency == "auto"
    assert resolve_settings({"concurrency": 8}, tmp_path, {}).concurrency == 8
    (tmp_path / "pyproject.toml").write_text('[tool.personalens]\nconcurrency = "auto"\n')
    assert resolve_settings({}, tmp_path, {}).concurrency == "auto"
    for bad in ('"many"', "0", "2.5", "true", "300"):
        (tmp_path / "pyproject.toml").write_text(f"[tool.personalens]\nconcurrency = {bad}\n")
        with pytest.raises(ConfigError, match=r"tool.personalens.concurrency"):
            resolve_settings({}, tmp_path, {})
    with pytest.raises(UsageError, match=r"--concurrency: must be from 1 to 256 \(got 0\)"):
        resolve_settings({"concurrency": 0}, tmp_path / "none", {})


def test_a_bad_option_value_is_one_line(pytester):
    suite_project(pytester)
    result = pytester.runpytest_subprocess("--concurrency", "lots", "--collect-only")
    errors = [line for line in result.stderr.lines if "--concurrency" in line]
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in result.stderr.str()
    assert any("expected a whole number or auto, got 'lots'" in line for line in errors), result.stderr.lines


def test_auto_in_a_live_run_and_in_a_replay(pytester, monkeypatch):
    suite_project(pytester)
    selection = ["--profiles", "7", "--domains", "Alarm", "--max-turns", "2"]
    with FakeLLM(Script(terminate_after=1, delay_s=0.1)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
        live = pytester.runpytest_subprocess(*SPECS, *selection, "--record-mode", "all", "--concurrency", "auto",
                                             "--max-concurrency", "3", timeout=300)
    assert live.ret == pytest.ExitCode.OK, live.stdout.str()[-3000:]
    live.stdout.fnmatch_lines(["personalens: --concurrency auto: 3 scenarios at once in this process"])
    assert 2 <= fake.max_in_flight <= 3  # the cases ran at once, within the endpoint's limit
    replay = pytester.runpytest_subprocess(*SPECS, *selection, "--concurrency", "auto", timeout=300)
    assert replay.ret == pytest.ExitCode.OK, replay.stdout.str()[-3000:]
    replay.stdout.fnmatch_lines(["personalens: --concurrency auto: 1 scenario at once in this process"])
