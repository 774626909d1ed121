"""A process's transcripts file (issue 48): every case's transcript appended to one file, found again whole at the
place its row names, from any number of threads, after a restarted worker, and never half of one."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.transcript_file import HEAD, TranscriptFile, read_transcript

#: what a transcript may hold: any text, line ends of every kind, and lines that look like a transcript's head
TEXTS = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(["USER: hi", "", "\r", "\u2028", "\x85", "=== user1-SD-Alarm-task-1 (3 lines) ===",
                              "# heading", "ASSISTANT: yes\r\nno"]), max_size=12).map("\n".join),
)
CASES = st.from_regex(r"user[0-9]{1,3}-(SD|MD)-[A-Za-z]{1,12}-task-[0-9]{1,2}(-r[0-9])?", fullmatch=True)


def _whole(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(CASES, TEXTS), min_size=1, max_size=20), st.integers(1, 4))
def test_every_transcript_reads_back_whole_at_the_place_it_was_given(tmp_path_factory, cases, threads):
    path = tmp_path_factory.mktemp("t") / "transcripts" / "gw0.txt"
    book = TranscriptFile(path)
    places: dict[int, object] = {}

    def write(share: list[int]) -> None:
        for index in share:
            places[index] = book.append(cases[index][0], cases[index][1])

    workers = [threading.Thread(target=write, args=(list(range(k, len(cases), threads)),)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    book.close()
    assert len(places) == len(cases)
    for index, (case, text) in enumerate(cases):
        assert read_transcript(places[index]) == _whole(text)
        assert str(places[index]).startswith(f"{path}:")
    heads = [line for line in path.read_bytes().split(b"\n") if line.startswith(b"=== ")]
    assert len(heads) >= len(cases)  # (a text may hold a line like a head: it is read by place, never by looking)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(CASES, TEXTS), min_size=1, max_size=6), st.binary(max_size=40), TEXTS)
def test_a_restarted_process_appends_after_its_earlier_self_even_one_killed_mid_write(tmp_path_factory, before, torn,
                                                                                       after):
    """xdist restarts a crashed worker under the same id: it appends to the same file, after whatever the crashed one
    left - a transcript cut short is never named by a row, and the next is found whole."""
    path = tmp_path_factory.mktemp("t") / "gw1.txt"
    first = TranscriptFile(path)
    places = [first.append(case, text) for case, text in before]
    first.close()
    with open(path, "ab") as handle:  # a write a kill cut short
        handle.write(torn)
    second = TranscriptFile(path)
    place = second.append("user1-SD-Alarm-task-1", after)
    second.close()
    assert read_transcript(place) == _whole(after)
    assert [read_transcript(p) for p in places] == [_whole(text) for _, text in before]


def test_a_place_where_no_transcript_opens_is_one_clear_error(tmp_path):
    book = TranscriptFile(tmp_path / "main.txt")
    place = book.append("user1-SD-Alarm-task-1", "# user1-SD-Alarm-task-1\nUSER: hi\n")
    book.close()
    assert str(place) == f"{tmp_path / 'main.txt'}:1"
    assert (tmp_path / "main.txt").read_text().startswith(HEAD.format(case="user1-SD-Alarm-task-1", lines=2))
    for wrong in (f"{tmp_path / 'main.txt'}:2", f"{tmp_path / 'main.txt'}:99", str(tmp_path / "main.txt")):
        with pytest.raises(ValueError, match="transcript"):
            read_transcript(wrong)


FULL_DISK = r'''
import resource, signal, sys
from pathlib import Path
from personalens_testkit.errors import StorageError
from personalens_testkit.transcript_file import TranscriptFile, read_transcript

path = Path(sys.argv[1])
book = TranscriptFile(path)
first = book.append("user1-SD-Alarm-task-1", "USER: hi\n")
before = path.read_bytes()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) after writing what fits
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + int(sys.argv[2]), hard))
try:
    book.append("user1-SD-Alarm-task-2", "USER: " + "x" * 5000 + "\n")
except StorageError as exc:
    print("refused:", exc)
assert path.read_bytes() == before, "half a transcript was left in the file"
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
third = book.append("user1-SD-Alarm-task-3", "USER: bye\n")
assert read_transcript(first) == "USER: hi\n" and read_transcript(third) == "USER: bye\n"
print("ok")
'''


@pytest.mark.parametrize("room", [0, 1, 30, 4000])
def test_a_transcript_that_does_not_fit_is_cut_back_off_the_file_and_the_next_one_is_found_whole(tmp_path, room):
    """A disk that fills mid-write (here: the file-size limit, which writes what fits and then fails): the
    transcript is refused with a StorageError, nothing of it stays, and the file goes on."""
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "gw0.txt"), str(room)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert "refused: cannot write" in done.stdout and done.stdout.rstrip().endswith("ok")


TORN_AND_FULL = r'''
import resource, signal, sys
from pathlib import Path
from personalens_testkit.errors import StorageError
from personalens_testkit.transcript_file import TranscriptFile, read_transcript

path = Path(sys.argv[1])
path.write_bytes(b"=== user1-SD-Alarm-task-1 (9 lines) ===\nUSER: cut sh")  # a kill cut the last write short
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size, hard))  # not a byte more fits
book = TranscriptFile(path)
try:
    book.append("user1-SD-Alarm-task-2", "USER: hi\n")
except StorageError as exc:
    print("refused:", exc)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
place = book.append("user1-SD-Alarm-task-3", "USER: bye\n")
assert read_transcript(place) == "USER: bye\n", read_transcript(place)
print("ok")
'''


def test_a_full_disk_while_opening_after_a_cut_transcript_leaves_the_next_one_found_whole(tmp_path):
    """The newline that closes what a killed process cut short does not fit: that transcript is refused, and the next
    one (the file opened again) is placed after the newline, found whole."""
    done = subprocess.run([sys.executable, "-c", TORN_AND_FULL, str(tmp_path / "gw0.txt")], capture_output=True,
                          text=True, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert "refused: cannot write" in done.stdout and done.stdout.rstrip().endswith("ok")
