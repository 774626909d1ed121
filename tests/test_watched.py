"""The bound of the embedded-model tests (issue 48): a command is stopped when nothing it writes has moved for the
stall bound, never for being slow while it moves."""

from __future__ import annotations

import sys

import pytest

from .support.watched import watch

#: writes a line every PAUSE seconds for STEPS steps, then exits with status 3
SLOW = ("import sys, time\nfor i in range(int(sys.argv[1])):\n    print(i, flush=True)\n    time.sleep(float(sys.argv[2]))\n"
        "sys.exit(3)")
#: writes one line, then never again (a hung call)
HUNG = "import time\nprint('started', flush=True)\ntime.sleep(600)"


@pytest.mark.parametrize("steps, pause", [(5, 0.2), (5, 1.5)])
def test_a_command_that_keeps_writing_runs_to_its_end_however_long(tmp_path, steps, pause):
    """Pauses shorter than the bound, a run several times longer than it: slow, not hung."""
    status, out, _, _ = watch([sys.executable, "-c", SLOW, str(steps), str(pause)], cwd=tmp_path, watched=[tmp_path],
                              stall_s=2.5)
    assert status == 3 and out.split() == [str(i) for i in range(steps)]


def test_a_command_whose_files_keep_growing_is_not_hung(tmp_path):
    """Progress in a watched folder counts as much as output (an embedded server's log, a run's rows)."""
    script = ("import pathlib, sys, time\nlog = pathlib.Path(sys.argv[1]) / 'server.log'\n"
              "for i in range(15):\n    log.open('a').write('request\\n')\n    time.sleep(0.2)")
    (tmp_path / "work").mkdir()
    status, out, _, _ = watch([sys.executable, "-c", script, str(tmp_path / "work")], cwd=tmp_path,
                              watched=[tmp_path / "work"], stall_s=2.0)
    assert status == 0 and (tmp_path / "work" / "server.log").read_text().count("request") == 15


def test_a_command_that_stops_moving_is_stopped_and_fails_naming_the_stall(tmp_path):
    with pytest.raises(pytest.fail.Exception, match=r"nothing moved for 2 s .*hung[\s\S]*started"):
        watch([sys.executable, "-c", HUNG], cwd=tmp_path, watched=[tmp_path], stall_s=2.0)
