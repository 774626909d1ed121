"""The embedded default model: llama-cpp-python's OpenAI-compatible server on loopback.

One server per role (user agent, assistant, judge) and GGUF file per pytest session,
started by the controlling process and shared by every xdist worker (they get the URLs,
never start their own). A server per role keeps that role's growing prompt in the
server's KV cache, so each call re-reads only what is new since the role's last call. It is
health-checked before use and stopped at exit; on Linux it also dies with its parent
(``PR_SET_PDEATHSIG``), so a killed pytest never leaves it running.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import timebox
from ..errors import ModelServerError
from .local_settings import LocalServerSettings, check_installed

#: the most one health check of a starting server may take (its whole answer)
HEALTH_POLL_S = 2.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: nothing in the server needs a clean shutdown


@dataclass(frozen=True)
class ServerHandle:
    """Where a launched server listens, and how to tell whether it is still alive."""

    url: str
    pid: int
    log_path: str

    def as_dict(self) -> dict[str, object]:
        return {"url": self.url, "pid": self.pid, "log_path": self.log_path}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ServerHandle:
        return cls(url=str(data["url"]), pid=int(data["pid"]), log_path=str(data["log_path"]))  # type: ignore[arg-type]


class EmbeddedServer:
    """One ``python -m llama_cpp.server`` process on a loopback port."""

    def __init__(self, settings: LocalServerSettings, log_path: Path) -> None:
        self.settings = settings
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.handle: ServerHandle | None = None

    def command(self, port: int) -> list[str]:
        s = self.settings
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(s.resolved_model()), "--model_alias", s.alias(),
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(s.n_ctx), "--n_threads", str(s.n_threads), "--n_threads_batch", str(s.n_threads),
            # No state cache: saving every state copies hundreds of MB per call (measured: +1.3 s a call,
            # +250 MB RSS a call). One server per role instead keeps each role's prompt prefix in its KV.
            "--cache", "false",
            "--interrupt_requests", "false", "--verbose", "false",
        ]

    def launch(self, port: int = 0) -> ServerHandle:
        """Start the process and return at once (port 0: any free one); users wait with :func:`wait_until_healthy`."""
        if self.handle is not None:
            return self.handle
        check_installed(self.settings.model_path)
        port = port or _free_port()
        command = self.command(port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.handle = ServerHandle(server_url(port), self.process.pid, str(self.log_path))
        return self.handle

    def stop(self) -> None:
        process, self.process, self.handle = self.process, None, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie - exited, not yet reaped by its parent - does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def server_url(port: int) -> str:
    """The OpenAI-compatible base URL of an embedded server on a loopback port."""
    return f"http://127.0.0.1:{port}/v1"


def wait_until_healthy(url: str, timeout_s: float, *, pid: int | None = None, log_path: str | None = None) -> None:
    """Poll ``GET {url}/models`` until it answers 200, the process dies, or time runs out (each poll takes at
    most HEALTH_POLL_S, its whole answer included)."""
    import httpx  # here: a run that starts no server (a replay, remote models) never loads an HTTP client

    from .transport import bounded_client

    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    client = bounded_client(timeout_s=HEALTH_POLL_S)
    while time.monotonic() < deadline:
        try:
            with timebox.deadline(HEALTH_POLL_S, "a health check's limit"):
                response = client.get(f"{url}/models")
            if response.status_code == 200:
                client.close()
                holder = listener_uid(url)
                if pid is not None and holder is not None and holder != os.geteuid():
                    raise ModelServerError(
                        f"{url} answers from a process of another user (uid {holder}), not the embedded server this "
                        "run started: refused (a process that took its port first - a bot under the gate?)",
                        model="local")
                return
            last = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        if pid is not None and not _alive(pid):
            raise ModelServerError(
                f"the embedded model server (pid {pid}) exited while starting; its log {log_path} ends: "
                f"{_log_tail(log_path)}", model="local",
            )
        time.sleep(0.2)
    client.close()
    raise ModelServerError(f"the model server at {url} was not healthy within {timeout_s:.0f} s ({last})", model="local")


def listener_uid(url: str) -> int | None:
    """The user id of the process listening on a loopback URL's port (Linux's /proc/net/tcp and tcp6; None where
    they cannot be read or nothing listens there)."""
    from urllib.parse import urlsplit

    port = urlsplit(url).port
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl local_address rem_address st ... uid timeout inode
            if len(fields) > 7 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return int(fields[7])
    return None


def _log_tail(path: str | None, lines: int = 5) -> str:
    if path is None or not Path(path).exists():
        return "(no log)"
    text = Path(path).read_text(errors="replace").strip().splitlines()[-lines:]
    return " | ".join(line.strip() for line in text) or "(empty)"


def server_key(settings: LocalServerSettings, role: str) -> str:
    """Identifies one embedded server: the GGUF file it serves and the role it serves it to."""
    return f"{settings.resolved_model()}#{role}"


class ServerPool:
    """The embedded servers of one pytest session, one per GGUF file and role, launched on first need."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._servers: dict[str, EmbeddedServer] = {}
        atexit.register(self.stop_all)

    def launch(self, settings: LocalServerSettings, role: str) -> ServerHandle:
        key = server_key(settings, role)
        server = self._servers.get(key)
        if server is None:
            log = self.log_dir / f"embedded-server-{settings.resolved_model().stem}-{role}.log"
            server = EmbeddedServer(settings, log)
            self._servers[key] = server
        return server.launch()

    def handles(self) -> dict[str, dict[str, object]]:
        return {key: server.handle.as_dict() for key, server in self._servers.items() if server.handle}

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
