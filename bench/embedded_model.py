"""Embedded-model speed: cold calls, calls that reuse a cached prompt prefix, tokens/s, a whole scenario.

    python bench/embedded_model.py [--scenario user7-SD-Alarm-task-1] [--max-turns 20]

Part 1 sends one role's prompts to a fresh embedded server: a cold user-agent call, then
the next follow-up on the same server (the way a run uses its per-role servers), each
prompt-only (max_tokens=1) so prompt processing is timed apart from generation, then a
generation of 96 tokens. Part 2 runs the whole scenario (reference assistant, user agent
and judge all on the embedded model, one server per role, as a pytest run does) and
prints seconds per call by role and seconds per scenario.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from personalens_testkit.agents.judge import Judge
from personalens_testkit.prompts.render import dialogue_block, fill
from personalens_testkit.agents.user_agent import UserAgent
from personalens_testkit.assistants.reference import ReferenceAssistant
from personalens_testkit.data import open_dataset
from personalens_testkit.data.context import build_context
from personalens_testkit.evaluation import Evaluator
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.embedded import EmbeddedServer, wait_until_healthy
from personalens_testkit.llm.local_settings import DEFAULT_LOCAL_CAPS, LocalServerSettings
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start(settings: LocalServerSettings, log: Path) -> tuple[EmbeddedServer, OpenAICompatibleChat]:
    server = EmbeddedServer(settings, log)
    handle = server.launch()
    wait_until_healthy(handle.url, 120, pid=handle.pid, log_path=handle.log_path)
    chat = OpenAICompatibleChat(spec="local", base_url=handle.url, model=settings.alias(), json_dialect="llama_cpp",
                                timeout_s=900, max_tokens_cap=DEFAULT_LOCAL_CAPS)
    return server, chat


def prefix_reuse(settings: LocalServerSettings, scenario_id: str, tmp: Path) -> None:
    dataset = open_dataset()
    scenario = next(s for s in dataset.scenarios_for(int(scenario_id.split("-")[0][4:])) if s.scenario_id == scenario_id)
    ctx = build_context(dataset, scenario)
    prefix = UserAgent(None).prompt_prefix(ctx)  # type: ignore[arg-type]
    turns = [Message("user", "Hey, can you set an alarm for tomorrow morning?"),
             Message("assistant", "Sure! What time would you like it, and which sound?"),
             Message("user", "The usual, 7:30 with birdsong please."),
             Message("assistant", "Done: 7:30 tomorrow with birdsong. Make it recurring on weekdays?")]

    def follow_up(n: int) -> tuple[Message, ...]:
        return (Message("system", fill("user_system")),
                Message("user", prefix + fill("user_followup", dialogue=dialogue_block(turns[:n]))))

    t0 = time.perf_counter()
    server, chat = start(settings, tmp / "prefix.log")
    print(f"server start: {time.perf_counter() - t0:.1f} s (n_ctx {settings.n_ctx}, threads {settings.n_threads})")
    steps = [("cold: user-agent follow-up, fresh server", follow_up(2), 1),
             ("reused prefix: the next follow-up on the same server", follow_up(4), 1),
             ("generation: same prompt again + up to 96 new tokens", follow_up(4), 96)]
    print(f"{'call':56} {'prompt':>7} {'gen':>5} {'seconds':>8} {'tok/s':>7} {'rss MB':>7}")
    seconds = []
    try:
        for label, messages, max_tokens in steps:
            request = ChatRequest(messages=messages, purpose="user_agent", temperature=0.0, max_tokens=max_tokens)
            began = time.perf_counter()
            response = chat.complete(request)
            took = time.perf_counter() - began
            seconds.append(took)
            tokens = response.completion_tokens if max_tokens > 1 else response.prompt_tokens
            print(f"{label:56} {response.prompt_tokens:>7} {response.completion_tokens:>5} {took:>8.2f} "
                  f"{(tokens or 0) / took:>7.0f} {rss_mb(server.handle.pid):>7.0f}")  # type: ignore[union-attr]
    finally:
        chat.close()
        server.stop()
    print(f"a follow-up with a reused prefix costs {seconds[1] / seconds[0]:.2f} of a cold call "
          f"({seconds[1]:.2f} s vs {seconds[0]:.2f} s)")


def whole_scenario(settings: LocalServerSettings, scenario_id: str, max_turns: int | None, tmp: Path) -> None:
    dataset = open_dataset()
    scenario = next(s for s in dataset.scenarios_for(int(scenario_id.split("-")[0][4:])) if s.scenario_id == scenario_id)
    servers, chats = {}, {}
    for role in ("user_agent", "assistant", "judge"):
        servers[role], chats[role] = start(settings, tmp / f"{role}.log")
    try:
        evaluator = Evaluator(dataset=dataset, user_agent=UserAgent(chats["user_agent"]),
                              assistant=ReferenceAssistant(chats["assistant"]), judge=Judge(chats["judge"]),
                              max_turns=max_turns)
        evaluation = evaluator.evaluate(scenario)
        peak = {role: rss_mb(server.handle.pid) for role, server in servers.items()}  # type: ignore[union-attr]
    finally:
        for role in servers:
            chats[role].close()
            servers[role].stop()
    records = evaluation.dialogue.log.records
    print(f"\nscenario {scenario_id}: {evaluation.dialogue.turns} turns, ended by "
          f"{evaluation.dialogue.termination.value if evaluation.dialogue.termination else '?'}, "
          f"{len(records)} calls, {evaluation.seconds:.1f} s in all"
          + (f" (error: {evaluation.error.describe()})" if evaluation.error else ""))
    print(f"{'role':12} {'calls':>5} {'first s':>8} {'later mean s':>13} {'mean prompt tok':>16} {'mean gen tok':>13}")
    for role in ("user_agent", "assistant", "judge"):
        mine = [r for r in records if r.role == role]
        if not mine:
            continue
        later = [r.seconds for r in mine[1:]] or [float("nan")]
        print(f"{role:12} {len(mine):>5} {mine[0].seconds:>8.2f} {statistics.mean(later):>13.2f} "
              f"{statistics.mean(r.prompt_tokens or 0 for r in mine):>16.0f} "
              f"{statistics.mean(r.completion_tokens or 0 for r in mine):>13.0f}")
    print("server RSS after the scenario (MB): " + ", ".join(f"{k} {v:.0f}" for k, v in peak.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="user7-SD-Alarm-task-1")
    parser.add_argument("--max-turns", type=int, default=None, help="default: the benchmark's limit")
    parser.add_argument("--n-ctx", type=int, default=LocalServerSettings().n_ctx)
    parser.add_argument("--threads", type=int, default=LocalServerSettings().n_threads)
    parser.add_argument("--skip-scenario", action="store_true", help="only the prefix-reuse measurement")
    args = parser.parse_args()
    settings = LocalServerSettings(n_ctx=args.n_ctx, n_threads=args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        prefix_reuse(settings, args.scenario, Path(tmp))
        if not args.skip_scenario:
            whole_scenario(settings, args.scenario, args.max_turns, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
