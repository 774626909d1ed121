"""Peak memory per bound, for shapes that are cheap in bytes and dear once read (issue 43, item 3).

Each shape is read in a fresh process through the real reader, and that process's peak RSS printed next to the
bound it meets:

- cassettes (replay/store.py's XzPersister.load_cassette): a million tiny interactions (under the byte cap,
  over MAX_CASSETTE_VALUES: refused unread), the most tiny interactions the value bound lets through (read), and
  empty objects up to the value bound in the cassette's metadata (read);
- a model's answer (llm/openai_compat.py, as a replay hands it over): 16 MiB of ``[{},{},...]`` (refused unread),
  a key given twice (refused);
- an answer's head (llm/deadlines.py, a bounded connection): 64 KiB and more of fields in two parts, then a
  gzip body that decodes to --bomb-mib MiB (refused at the head, the body never read).

    python bench/bounds.py [--bomb-mib N] [--scale F]   # --scale: the shapes within the bounds at F times their size (a smoke run)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = textwrap.dedent("""
    import json, lzma, sys, time
    sys.path.insert(0, %r)
    started = time.perf_counter()
    def done(outcome):
        # VmHWM: this process's own peak since it began (ru_maxrss would count the parent's, copied at the fork)
        status = open("/proc/self/status").read()
        peak = int(status.split("VmHWM:")[1].split()[0]) >> 10
        print(json.dumps({"outcome": outcome[:160], "peak_mb": peak, "s": round(time.perf_counter() - started, 2)}))
""") % str(ROOT)

CASSETTE = PRELUDE + textwrap.dedent("""
    from personalens_testkit.replay.store import XzPersister, JsonBytesSerializer
    try:
        requests, responses = XzPersister.load_cassette(sys.argv[1], JsonBytesSerializer)[:2]
        done(f"read: {len(requests):,} interactions")
    except Exception as exc:
        done(f"refused: {type(exc).__name__}: {str(exc).split(': ', 1)[-1]}")
""")

ANSWER = PRELUDE + textwrap.dedent("""
    from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
    from personalens_testkit.llm.base import ChatRequest, Message
    body = open(sys.argv[1], "rb").read()
    chat = OpenAICompatibleChat(spec="openai:m", base_url="http://127.0.0.1:9/v1", model="m",
                                answers=lambda *a: {"status": {"code": 200}, "body": {"string": body}})
    try:
        chat.complete(ChatRequest(messages=(Message(role="user", content="x"),), temperature=0.0, max_tokens=5,
                                  purpose="judge"))
        done("read")
    except Exception as exc:
        done(f"refused: {type(exc).__name__}: {exc}")
""")

HEAD = PRELUDE + textwrap.dedent("""
    import zlib, httpcore
    from personalens_testkit.llm.deadlines import MAX_HEAD_BYTES, BoundedBackend
    mib = int(sys.argv[1])
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"x" * (1 << 20)
    bomb = squeeze.compress(b'{"choices": [{"message": {"content": "') + b"".join(
        squeeze.compress(block) for _ in range(mib)) + squeeze.flush()
    parts = [b"HTTP/1.1 200 OK\\r\\nX-Pad: " + b"a" * (MAX_HEAD_BYTES + 100),
             b"\\r\\nContent-Encoding: gzip\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(bomb), bomb]
    pool = httpcore.ConnectionPool(network_backend=BoundedBackend(httpcore.MockBackend(parts)))
    try:
        response = pool.request("GET", "http://model.test/")
        import gzip
        done(f"read: {len(gzip.decompress(response.content)):,} bytes decoded")
    except Exception as exc:
        done(f"refused: {type(exc).__name__}: {exc} (gzip body: {len(bomb):,} bytes for {mib:,} MiB)")
""")


def measure(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def cassette(folder: Path, name: str, value: dict) -> Path:
    import lzma

    path = folder / f"{name}.json.xz"
    path.write_bytes(lzma.compress(json.dumps(value, separators=(",", ":")).encode(), preset=0))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bomb-mib", type=int, default=1024)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from personalens_testkit.llm.deadlines import MAX_ANSWER_BYTES
    from personalens_testkit.replay.store import MAX_CASSETTE_BYTES, MAX_CASSETTE_VALUES
    from personalens_testkit.untrusted_json import MAX_ANSWER_VALUES

    one = {"request": {"method": "POST", "uri": "x", "body": None, "headers": {}},
           "response": {"status": {"code": 200}, "headers": {}, "body": {"string": ""}}}
    print(f"bounds: cassette {MAX_CASSETTE_BYTES >> 20} MiB / {MAX_CASSETTE_VALUES:,} values; answer "
          f"{MAX_ANSWER_BYTES >> 20} MiB / {MAX_ANSWER_VALUES:,} values")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        many = 1_000_000  # the member, at full size whatever the scale: refused in about a second
        fits = int(MAX_CASSETTE_VALUES * args.scale) // 25 - 10  # 25 values each
        shapes = [
            (f"cassette, {many:,} tiny interactions", CASSETTE,
             cassette(folder, "many", {"version": 1, "interactions": [one] * many})),
            (f"cassette, {fits:,} tiny interactions (within the value bound)", CASSETTE,
             cassette(folder, "fits", {"version": 1, "interactions": [one] * fits})),
            (f"cassette, {int(MAX_CASSETTE_VALUES * args.scale) // 2 - 20:,} empty objects in its metadata", CASSETTE,
             cassette(folder, "objects", {"version": 1, "interactions": [],
                                          "metadata": {"x": [{}] * (int(MAX_CASSETTE_VALUES * args.scale) // 2 - 20)}})),
        ]
        empties = folder / "empties.json"
        count = int((MAX_ANSWER_BYTES - 64) * args.scale) // 3
        empties.write_bytes(b'{"choices":[{"message":{"content":"4"}}],"x":[' + b"{}," * count + b"{}]}")
        twice = folder / "twice.json"
        twice.write_bytes(b'{"choices":[{"message":{"content":"4","content":"1"}}]}')
        shapes += [(f"answer, {empties.stat().st_size >> 20} MiB of empty objects", ANSWER, empties),
                   ("answer, \"content\" given twice", ANSWER, twice)]
        for name, script, path in shapes:
            found = measure(script, str(path))
            print(f"{name} ({path.stat().st_size:,} bytes on disk): {found['outcome']}; peak RSS {found['peak_mb']} MB, "
                  f"{found['s']} s")
        bomb_mib = args.bomb_mib
        found = measure(HEAD, str(bomb_mib))
        print(f"answer head of 64 KiB and more in two parts, then gzip of {bomb_mib:,} MiB: {found['outcome']}; "
              f"peak RSS {found['peak_mb']} MB, {found['s']} s")


if __name__ == "__main__":
    main()
