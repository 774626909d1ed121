"""A command bounded by its progress, not by the clock (issue 48): an embedded-model test on a machine three times
slower, or busy with other tests, takes longer and still passes; one that hangs fails, naming how long nothing moved.

Progress is anything the command writes growing: its output, and the files in the folders it works in (a run's
rows, transcripts and cassettes, the embedded servers' logs - each call they answer adds a line). A single call of
the embedded model is bounded by its answer caps (``DEFAULT_LOCAL_CAPS``), so a stall far longer than any call is a
hang, whatever the machine's speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import pytest

#: how long nothing may move before the command counts as hung: many times the slowest embedded-model call (a judge's
#: capped answer, about 20 s on two quiet cores)
STALL_S = 600.0


def _state(paths: Sequence[Path]) -> tuple[int, int]:
    """The total size and the latest change of every file under ``paths``."""
    size = latest = 0
    for root in paths:
        for folder, _, names in os.walk(root):
            for name in names:
                try:
                    stat = os.stat(os.path.join(folder, name))
                except OSError:
                    continue  # gone between the listing and the look
                size, latest = size + stat.st_size, max(latest, stat.st_mtime_ns)
    return size, latest


def watch(command: Sequence[str], *, cwd: Path, watched: Sequence[Path], stall_s: float = STALL_S,
          env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """Run ``command`` until it ends, or until nothing under ``watched`` nor its output has changed for ``stall_s``
    (then it is stopped - SIGTERM, so that it stops its own servers - and the test fails). Its exit status, output
    and error output, and seconds."""
    out, err = cwd / f".watched-{time.monotonic_ns()}.out", cwd / f".watched-{time.monotonic_ns()}.err"
    started = time.monotonic()
    with open(out, "w") as out_file, open(err, "w") as err_file:
        process = subprocess.Popen(list(command), cwd=cwd, stdout=out_file, stderr=err_file, stdin=subprocess.DEVNULL,
                                   env=env)
        last, moved = None, time.monotonic()
        while process.poll() is None:
            now = _state([*watched, out, err])
            if now != last:
                last, moved = now, time.monotonic()
            elif time.monotonic() - moved > stall_s:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                pytest.fail(f"{' '.join(command[:6])} ...: nothing moved for {stall_s:.0f} s (after "
                            f"{time.monotonic() - started:.0f} s): hung\n{out.read_text()[-3000:]}\n"
                            f"{err.read_text()[-2000:]}")
            time.sleep(1.0)
    return process.returncode, out.read_text(), err.read_text(), time.monotonic() - started


def run_pytest_watched(pytester: pytest.Pytester, *args: str, stall_s: float = STALL_S,
                       env: dict[str, str] | None = None) -> pytest.RunResult:
    """``pytester.runpytest_subprocess(*args)`` bounded by its progress (:func:`watch`) instead of a time-out; ``env``:
    its environment (this process's by default)."""
    basetemp = pytester.path / f"watched-basetemp-{time.monotonic_ns()}"
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    status, out, err, seconds = watch([sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *args],
                                      cwd=pytester.path, watched=[pytester.path], stall_s=stall_s, env=env)
    return pytest.RunResult(status, out.splitlines(), err.splitlines(), seconds)
