"""Peak resident memory of a command and of every process it starts, sampled from /proc.

    python bench/rss.py -- pytest suites/ --profiles 7 --domains Alarm -n 2 --max-turns 2 --record-mode all

Prints the command's wall seconds and its exit status, then the peak RSS (VmHWM) of each
process of its tree by kind: the command itself, pytest-xdist workers, embedded model
servers, others. Processes are sampled every 0.2 s while the command runs, so one that
lives less than that may be missed. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Mapping

#: how a process's command line tells its kind (execnet starts xdist workers with ``-c import sys;exec(...)``)
KINDS = (("xdist worker", re.compile(r"exec\(eval\(sys\.stdin\.readline\(\)\)\)|xdist")),
         ("embedded model server", re.compile(r"llama_cpp\.server|llama-server")))


def _parent(pid_dir: Path) -> int | None:
    try:
        return int((pid_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int) -> list[int]:
    """Every living process under ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for pid_dir in Path("/proc").glob("[0-9]*"):
        parent = _parent(pid_dir)
        if parent is not None:
            children.setdefault(parent, []).append(int(pid_dir.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def peak_kb(pid: int) -> int:
    """The process's peak resident set so far (VmHWM), 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def run_sampled(command: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                ) -> tuple[int, str, float, dict[int, tuple[str, int]]]:
    """Run ``command``; returns (exit status, its output, wall seconds, {pid: (command line, peak kB)})."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    captured: list[str] = []  # read meanwhile, so a full pipe never stalls the command
    reader = threading.Thread(target=lambda: captured.append(process.stdout.read()), daemon=True)
    reader.start()
    peaks: dict[int, tuple[str, int]] = {}
    while process.poll() is None:
        for pid in [process.pid, *descendants(process.pid)]:
            kb = peak_kb(pid)
            # read again at each sample: a child seen between its fork and its exec still shows its parent's
            # command line (an xdist worker would be counted as "other"); once gone, it keeps the last one read
            line = _cmdline(pid) or (peaks[pid][0] if pid in peaks else "")
            peaks[pid] = (line, max(kb, peaks.get(pid, ("", 0))[1]))
        time.sleep(0.2)
    wall = time.perf_counter() - started
    reader.join()
    return process.returncode, "".join(captured), wall, peaks


def kind_of(pid: int, line: str, root: int) -> str:
    if pid == root:
        return "the command"
    return next((name for name, pattern in KINDS if pattern.search(line)), "other")


def describe(peaks: Mapping[int, tuple[str, int]], root: int) -> list[str]:
    """A line per kind of process: how many, and each one's peak RSS in MB."""
    by_kind: dict[str, list[float]] = {}
    for pid, (line, kb) in peaks.items():
        if kb:
            by_kind.setdefault(kind_of(pid, line, root), []).append(kb / 1024)
    return [f"{name}: {len(sizes)} process{'es' if len(sizes) > 1 else ''}, peak RSS "
            + ", ".join(f"{size:.0f}" for size in sorted(sizes, reverse=True)) + " MB"
            for name, sizes in sorted(by_kind.items())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     usage="python bench/rss.py -- COMMAND [ARGS...]")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    status, output, wall, peaks = run_sampled(command)
    print(output[-3000:], end="" if output.endswith("\n") else "\n")
    print(f"exit status {status}; wall {wall:.1f} s")
    for line in describe(peaks, next(iter(peaks), 0)):
        print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
