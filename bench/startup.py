"""Start-up cost: the CPU a pytest process spends before its first case, and ``--collect-only`` of one case,
each against a bare pytest process (the same interpreter and installed plugins, without ours; deepeval's
plugin is off in both, as the project's own pytest settings turn it off).

    python bench/startup.py [--repeat 5] [--case user7-SD-Alarm-task-1]

- before the first case: ``pytest suites/ -k CASE`` replaying the shipped recording, measured by a probe
  plugin that reads the process's CPU (user + system) when the first case starts, and exits there;
  the bare process runs one empty test the same way;
- collect-only: the whole process, ``pytest suites/ --collect-only -k CASE`` against a bare
  ``pytest --collect-only`` of one empty test (CPU of the process, from wait4);
- the stack's floor: the same bare collection with a conftest.py that imports yaml and pydantic and builds one
  model, as any plugin on this project's stack must before a line of its own.

Runs alternate (ours, bare, ours, ...) and the medians are printed with their ratio. Bytecode caching is
on, as in a user's runs (a PYTHONDONTWRITEBYTECODE=1 shell would compile every module every time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = '''
import os, resource
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["STARTUP_PROBE_OUT"], "w") as out:
        out.write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
    os._exit(0)
'''

#: what any pytest plugin that reads YAML and validates with pydantic (this project's stack) pays before its own code:
#: the imports, and pydantic's first model (it loads the schema builder then)
STACK_FLOOR = "import yaml\nfrom pydantic import BaseModel\n\n\nclass Floor(BaseModel):\n    x: int\n"


def run(args: list[str], cwd: Path, env: dict[str, str], probe_out: Path | None) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB): at the first case when ``probe_out`` is given, else of the whole process."""
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        out.seek(0)
        text = out.read()
    if probe_out is not None:
        if not probe_out.exists():
            raise SystemExit(f"no case started: {' '.join(args)}\n{text[-2000:]}")
        cpu, rss = probe_out.read_text().split()
        probe_out.unlink()
        return float(cpu), int(rss) / 1024
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{text[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--case", default="user7-SD-Alarm-task-1", help="a scenario of the shipped recording")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "probe").mkdir()
        (tmp / "probe" / "startup_probe.py").write_text(PROBE)
        for folder in ("bare", "stack"):  # the bare process's, and the stack's floor (its conftest.py below)
            (tmp / folder).mkdir()
            (tmp / folder / "test_empty.py").write_text("def test_empty():\n    pass\n")
        probe_out = tmp / "probe.out"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp / "probe"), env.get("PYTHONPATH")) if p)
        env["STARTUP_PROBE_OUT"] = str(probe_out)
        common = ["-q", "-p", "no:cacheprovider", "-p", "no:deepeval"]
        ours_first = [*common, "-p", "startup_probe", "suites/", "-k", args.case, "--results-dir", str(tmp / "results")]
        bare_first = [*common, "-p", "no:personalens", "-p", "startup_probe", "test_empty.py"]
        ours_collect = [*common, "suites/", "--collect-only", "-k", args.case]
        bare_collect = [*common, "-p", "no:personalens", "--collect-only", "test_empty.py"]
        (tmp / "stack" / "conftest.py").write_text(STACK_FLOOR)
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in ("of", "bf", "oc", "bc", "sc")}
        run(ours_first, ROOT, env, probe_out)  # warm the bytecode caches once
        for _ in range(args.repeat):
            figures["of"].append(run(ours_first, ROOT, env, probe_out))
            figures["bf"].append(run(bare_first, tmp / "bare", env, probe_out))
            figures["oc"].append(run(ours_collect, ROOT, env, None))
            figures["bc"].append(run(bare_collect, tmp / "bare", env, None))
            figures["sc"].append(run(bare_collect, tmp / "stack", env, None))
    cpu = {name: statistics.median(c for c, _ in values) for name, values in figures.items()}
    rss = {name: statistics.median(r for _, r in values) for name, values in figures.items()}
    print(f"before the first case (CPU-s, median of {args.repeat}): ours {cpu['of']:.3f} "
          f"(runs {', '.join(f'{c:.3f}' for c, _ in figures['of'])}), bare {cpu['bf']:.3f}, "
          f"ours - bare {cpu['of'] - cpu['bf']:.3f}; peak RSS ours {rss['of']:.0f} MB, bare {rss['bf']:.0f} MB")
    print(f"--collect-only of one case (CPU-s of the process): ours {cpu['oc']:.3f}, bare {cpu['bc']:.3f}: "
          f"ratio {cpu['oc'] / cpu['bc']:.2f}x")
    print(f"the stack's floor: a bare --collect-only whose conftest.py imports yaml and pydantic and builds one "
          f"model: {cpu['sc']:.3f} CPU-s, ratio {cpu['sc'] / cpu['bc']:.2f}x of bare; ours above it "
          f"{cpu['oc'] - cpu['sc']:.3f} CPU-s (the 1.3x goal leaves {1.3 * cpu['bc'] - cpu['sc']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
