"""CPU per recorded live call: one model call through the testkit's own path, recorded to a cassette, against a
bare httpx call of the same bytes to the same server.

    python bench/call_overhead.py [--calls 240] [--turns 12] [--repeat 5] [--max-concurrency 4]

- ours: ``OpenAICompatibleChat.complete`` through ``make_call`` (the call site, the retry policy, the scenario's
  deadline) behind the run's ``--max-concurrency`` limit (its slot files; 0: no limit), inside a cassette that
  records every call (``all``: the body scrubbed, the request keyed, the exchange above the client's transport),
  the cassette written (xz) when each dialogue of ``--turns`` calls ends, as a scenario's is;
- bare: ``httpx.Client.post`` of the same payload, its JSON body encoded in the call as a client's is, the JSON
  answer decoded; and beside it the same with the bodies encoded before the timing (this script's only bare
  call until 2026-11-27).

The requests grow as a dialogue's do (each prompt holds the messages before it). The server is the tests'
loopback server, answering at once, in this process: the CPU measured is the calling thread's
(``time.thread_time``), so the server's is not counted. Runs alternate (ours, bare, bare pre-encoded, ...); the medians of
``--repeat`` runs and their ratio are printed (the issue's goal: <= 1.5x).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from personalens_testkit.callsite import CallSite  # noqa: E402
from personalens_testkit.llm.base import ChatRequest, Message  # noqa: E402
from personalens_testkit.llm.calling import make_call  # noqa: E402
from personalens_testkit.llm.limits import LimitedChat, Limits, SharedLimiter  # noqa: E402
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat  # noqa: E402
from personalens_testkit.llm.retry import RetryPolicy  # noqa: E402
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings  # noqa: E402
from personalens_testkit.replay.router import exchange  # noqa: E402
from tests.support.fake_llm import FakeLLM, Script  # noqa: E402  (the tests' loopback server)

SENTENCE = "I would like to plan something for the weekend that suits my preferences and my schedule. "


def requests(turns: int) -> list[ChatRequest]:
    """A dialogue's requests: a system prompt, then one more user and assistant message at each turn."""
    system = Message("system", SENTENCE * 40)
    messages: list[Message] = []
    made = []
    for turn in range(turns):
        messages.append(Message("user", f"turn {turn}: " + SENTENCE * 3))
        made.append(ChatRequest(messages=(system, *messages), purpose="assistant", temperature=0.0))
        messages.append(Message("assistant", f"answer {turn}: " + SENTENCE * 2))
    return made


def ours(url: str, folder: Path, dialogues: list[list[ChatRequest]], limit: int) -> float:
    """CPU-s of the calling thread for every call of every dialogue, each dialogue recorded to its cassette, behind
    ``limit`` slots (0: none)."""
    cassettes = Cassettes(CassetteSettings(cassette_dir=folder, assistant="reference", record_mode="all"))
    model = OpenAICompatibleChat(spec="openai:fake-bot", base_url=url, model="fake-bot", answers=exchange)
    if limit:
        model = LimitedChat(model, SharedLimiter(folder / ".limits", url, Limits(max_concurrency=limit)))
    policy = RetryPolicy(attempts=4)
    started = time.thread_time()
    for number, dialogue in enumerate(dialogues):
        with cassettes.use(folder / f"d{number}.json.xz", "all"):
            for turn, request in enumerate(dialogue):
                make_call(lambda r=request: model.complete(r), CallSite("assistant", "reply", turn + 1),
                          policy=policy, deadline=time.monotonic() + 3600)
    spent = time.thread_time() - started
    model.close()
    return spent


def bare(url: str, dialogues: list[list[ChatRequest]], *, encoded: bool = False) -> float:
    """CPU-s of the calling thread for the same calls as plain httpx posts of the same bytes: the JSON body
    encoded in the call, as a client posting its payload does (``encoded``: before the timing, as this script
    measured until 2026-11-27)."""
    model = OpenAICompatibleChat(spec="openai:fake-bot", base_url=url, model="fake-bot")
    payloads = [[model.payload(r) for r in d] for d in dialogues]
    model.close()

    def body(payload: dict) -> bytes:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()

    ready = [[body(p) for p in d] for d in payloads] if encoded else None
    client = httpx.Client(base_url=url)
    started = time.thread_time()
    for number, dialogue in enumerate(payloads):
        for turn, payload in enumerate(dialogue):
            content = ready[number][turn] if ready is not None else body(payload)
            answer = client.post("/chat/completions", content=content, headers={"content-type": "application/json"})
            json.loads(answer.content)["choices"][0]["message"]["content"]
    spent = time.thread_time() - started
    client.close()
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=240)
    parser.add_argument("--turns", type=int, default=12, help="calls per dialogue (one cassette each)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-concurrency", type=int, default=4, help="the limit our calls go through (0: none)")
    args = parser.parse_args()
    dialogues = [requests(args.turns) for _ in range(max(1, args.calls // args.turns))]
    calls = sum(len(d) for d in dialogues)
    runs: dict[str, list[float]] = {"ours": [], "bare": [], "pre": []}
    with FakeLLM(Script()) as fake, tempfile.TemporaryDirectory() as tmp:
        ours(fake.url, Path(tmp) / "warm", dialogues[:1], args.max_concurrency)  # imports and first connections, not counted
        bare(fake.url, dialogues[:1])
        for attempt in range(args.repeat):
            runs["ours"].append(ours(fake.url, Path(tmp) / f"r{attempt}", dialogues, args.max_concurrency))
            runs["bare"].append(bare(fake.url, dialogues))
            runs["pre"].append(bare(fake.url, dialogues, encoded=True))
    per_call = {name: statistics.median(values) / calls * 1000 for name, values in runs.items()}
    limit = f"--max-concurrency {args.max_concurrency}" if args.max_concurrency else "no limit"
    print(f"{calls} calls in {len(dialogues)} dialogues, {args.repeat} runs each, ours behind {limit}: CPU per call (median) "
          f"ours {per_call['ours']:.2f} ms, bare {per_call['bare']:.2f} ms: ratio {per_call['ours'] / per_call['bare']:.2f}x "
          f"(goal <= 1.5x); against a bare call of a body encoded before it ({per_call['pre']:.2f} ms): "
          f"{per_call['ours'] / per_call['pre']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
