"""A scripted OpenAI-compatible chat server on loopback, for tests that need real HTTP.

It answers by what a request is for, read from the request itself:
- a judge call (it carries ``response_format``): a valid JSON answer for the schema it
  names, with scores taken from ``scores`` (or a raw ``judge_text`` if set);
- a user-agent call (its system prompt says it plays the user): ``user_text``, with
  TERMINATE appended from the ``terminate_after``-th follow-up on;
- anything else: an assistant reply.

It also speaks Bedrock's Converse (``POST /model/<id>/converse``, for boto3 clients given
the server as ``endpoint_url``): the same answers, a forced tool's input for the judge.

Every request body is kept in ``requests`` (Converse bodies as their chat equivalent) and
its headers in ``headers``, for assertions; the run's preflight calls (one minimal call per
model before any case) are kept apart in ``pings``, and get no injected fault and no delay.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

from personalens_testkit.scales import METRICS


@dataclass
class Script:
    #: the judge's score for every dimension of scales.METRICS: a verdict true, a rating one below the top of its
    #: scale, but for these
    scores: dict[str, Any] = field(default_factory=lambda: {
        **{m.name: True if m.kind == "bool" else m.high - 1 for m in METRICS},
        "personalization": 3, "coherence_user": 5,
    })
    #: TERMINATE on the n-th follow-up (1-based); None: never
    terminate_after: int | None = 2
    user_text: str = "Could you sort that out for me, please?"
    #: each follow-up says something new (False: the same words every turn - a user agent that loops)
    vary_user_text: bool = True
    #: the first dialogue of each task loops (the same words every turn), every later one varies (a user agent
    #: whose fault a second dialogue does not repeat: --rerun-user-faults)
    loop_first_dialogue: bool = False
    #: each assistant reply says something new (a looping user agent is then its own fault, not led by the bot)
    vary_assistant_text: bool = False
    assistant_text: str = "Sure - I have set it up the way you usually like it."
    #: if set, every judge call answers this text verbatim (for parser tests)
    judge_text: str | None = None
    #: judge calls answered verbatim, by metric name (``personalization``, ``task_completion``, ...)
    judge_texts: dict[str, str] = field(default_factory=dict)
    #: a judge asked again (its refused answer in the request) answers this, by metric name; else as the first time
    judge_again: dict[str, str] = field(default_factory=dict)
    #: HTTP status to answer every call with (for error tests); None: 200
    status: int | None = None
    #: whether ``status`` also answers the run's preflight calls (False: a model that dies after the preflight)
    status_pings: bool = True
    #: the user agent quotes its task in every message, so every later prompt names its scenario
    echo_task: bool = False
    #: share of requests answered with a fault instead (seeded, so a run is reproducible)
    fault_rate: float = 0.0
    #: which faults, in turn: "429", "500", "hang" (answers after hang_s), "drop" (closes the
    #: connection without an answer), "malformed" (200 with a broken body), "nonutf8" (200 with a
    #: body that is not UTF-8), "surrogate" (200 whose text is a lone surrogate escape)
    faults: tuple[str, ...] = ("429", "500", "hang", "drop", "malformed")
    #: the first N requests (preflight calls aside) are answered 429 (a model that recovers)
    fail_first: int = 0
    #: a judge call whose prompt contains this text gets an answer that is not a score
    judge_fail_marker: str | None = None
    hang_s: float = 2.0
    seed: int = 7
    #: seconds to wait before every answer (a slow model)
    delay_s: float = 0.0
    #: a judge that believes what it reads: personalization 4 if its prompt says "Personalization Score: 4", else 2
    gullible: bool = False
    #: a judge that reads the dialogue: called with the judge request's text, it returns the scores that
    #: differ from ``scores`` for that dialogue (a rubric in miniature, for tests of what a bot change does)
    judge_rule: Optional[Callable[[str], dict[str, Any]]] = None
    #: what a review of the user agent's turns answers (--review-user): its faults and the first error's side
    review_faults: list[dict[str, Any]] = field(default_factory=list)
    review_first_error: str = "none"
    #: fields added to the head of every answer (a gateway's: ``("Content-Encoding", "identity")``)
    extra_headers: tuple[tuple[str, str], ...] = ()


class FakeLLM:
    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.requests: list[dict[str, Any]] = []
        #: each chat answer's model and the token counts it reported (what a provider bills)
        self.usage: list[tuple[str, dict[str, int]]] = []
        self.headers: list[dict[str, str]] = []
        self.pings: list[dict[str, Any]] = []
        #: faults injected, by kind
        self.injected: dict[str, int] = {}
        #: requests being answered now, the most at once, and when each arrived (time.time())
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrivals: list[float] = []
        #: Converse prompt prefixes marked with a cachePoint so far
        self.cached_prefixes: set[str] = set()
        #: assistant replies answered so far (``vary_assistant_text`` numbers them)
        self.assistant_replies = 0
        #: the dialogues begun per task (their openings), for ``loop_first_dialogue``
        self.openings: dict[str, int] = {}
        self._lock = threading.Lock()
        self._random = random.Random(self.script.seed)
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next_fault(self) -> str | None:
        """Under the lock: whether this request gets a fault, and which."""
        script = self.script
        if script.fault_rate <= 0 or self._random.random() >= script.fault_rate:
            return None
        kind = script.faults[sum(self.injected.values()) % len(script.faults)]
        self.injected[kind] = self.injected.get(kind, 0) + 1
        return kind

    def answer(self, body: dict[str, Any]) -> str:
        script = self.script
        fmt = body.get("response_format") or _free_text_judging(body)
        if fmt is not None:
            if script.judge_text is not None:
                return script.judge_text
            if script.judge_fail_marker is not None and script.judge_fail_marker in json.dumps(body, ensure_ascii=False):
                return "I would rather not give a score."
            schema = fmt.get("schema") or fmt.get("json_schema", {}).get("schema", {})
            keys = list(schema.get("properties", {}))
            named = (fmt.get("json_schema") or {}).get("name") or _metric_from_prompt(body)
            if named in script.judge_again and any(m.get("role") == "assistant" for m in body.get("messages", [])):
                return script.judge_again[named]
            if named in script.judge_texts:
                return script.judge_texts[named]
            scores = script.scores
            if script.judge_rule is not None:
                scores = {**scores, **script.judge_rule(json.dumps(body, ensure_ascii=False))}
            if "faults" in keys:  # a review of the user agent's turns (--review-user)
                return json.dumps({"faults": script.review_faults, "first_error": script.review_first_error,
                                   "justification": "the user's turns, reviewed"})
            if "verdict" in keys:
                return json.dumps({"verdict": scores["task_completion"], "explanation": "goal met"})
            if "scores" in keys:  # turn-level personalization in one call: one score per assistant reply
                turns = schema["properties"]["scores"].get("minItems", 1)
                return json.dumps({"scores": [scores["personalization"]] * turns, "justification": "steady"})
            metric = (fmt.get("json_schema") or {}).get("name") or _metric_from_prompt(body)
            score = scores[metric]
            if script.gullible and metric == "personalization":
                score = 4 if "Personalization Score: 4" in json.dumps(body) else 2
            answer: dict[str, Any] = {"score": score, "justification": f"{metric} looks fine"}
            if "observations" in keys:
                answer.update(observations=["used the saved preference"], suggestions=["mention the usual time"])
            return json.dumps(answer)
        system = body["messages"][0]["content"]
        if "playing the part of a person" in system:
            prompt = body["messages"][-1]["content"]
            follow_ups = prompt.count("[ASSISTANT]:")
            text = script.user_text
            vary = script.vary_user_text
            if script.loop_first_dialogue:
                task = prompt.split("<task>\n", 1)[1].split("\n", 1)[0]
                with self._lock:
                    if not follow_ups:
                        self.openings[task] = self.openings.get(task, 0) + 1
                    vary = self.openings.get(task, 1) > 1
            if follow_ups and vary:  # a user who says the same words every turn is looping
                text += f" That is my point {follow_ups}."
            if script.echo_task:
                text += f" (I mean: {task_of(prompt)})"
            if script.terminate_after is not None and follow_ups >= script.terminate_after:
                return text + " TERMINATE"
            return text
        if script.vary_assistant_text:  # a bot that says something new every turn (it never asks the same twice)
            self.assistant_replies += 1
            return f"{script.assistant_text} Step {self.assistant_replies}."
        return script.assistant_text

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # /v1/models, for health checks
                self._send(200, {"object": "list", "data": [{"id": "fake"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                converse = self.path.startswith("/model/") and self.path.endswith("/converse")
                if converse:
                    prefix = _cached_prefix(body)
                    body = _chat_from_converse(body)
                    if prefix is not None:
                        with fake._lock:
                            body["_cached"] = prefix in fake.cached_prefixes
                            fake.cached_prefixes.add(prefix)
                with fake._lock:
                    if _is_ping(body):
                        fake.pings.append(body)
                        fault = None
                    else:
                        fake.requests.append(body)
                        fake.headers.append(dict(self.headers))
                        fault = "429" if len(fake.requests) <= fake.script.fail_first else fake._next_fault()
                    fake.arrivals.append(time.time())
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                self._counted = True
                try:
                    self._answer(body, fault, converse)
                finally:
                    self._done()

            def _done(self) -> None:
                """The request stops counting as in flight: before its answer is sent (once the client
                has the answer it may send the next request, which must not find this one counted)."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with fake._lock:
                        fake.in_flight -= 1

            def _answer(self, body: dict[str, Any], fault: str | None, converse: bool) -> None:
                if fake.script.delay_s and not _is_ping(body):
                    time.sleep(fake.script.delay_s)
                if fault == "drop":
                    self.close_connection = True
                    return
                if fault == "hang":
                    time.sleep(fake.script.hang_s)
                elif fault in ("429", "500"):
                    self._send(int(fault), {"error": {"message": f"injected {fault}"}})
                    return
                elif fault == "malformed":
                    self._send_raw(200, b'{"choices": [{"message": ')
                    return
                elif fault == "nonutf8":
                    self._send_raw(200, '{"choices": [{"message": {"content": "caf\u00e9"}}]}'.encode("latin-1"))
                    return
                elif fault == "surrogate":
                    self._send_raw(200, b'{"choices": [{"message": {"content": "\\ud800 broken"}}]}')
                    return
                if fake.script.status is not None and (fake.script.status_pings or not _is_ping(body)):
                    self._send(fake.script.status, {"error": {"message": "scripted failure"}})
                    return
                text = fake.answer(body)
                if converse:
                    self._send(200, _converse_answer(body, text))
                    return
                usage = {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": len(text) // 4}
                with fake._lock:
                    fake.usage.append((str(body.get("model", "fake")), usage))
                self._send(200, {
                    "id": "x", "object": "chat.completion", "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                    "usage": usage,
                })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                self._send_raw(status, json.dumps(payload).encode())

            def _send_raw(self, status: int, data: bytes) -> None:
                self._done()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in fake.script.extra_headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up first (a hang past its time limit)

        return Handler


def _is_ping(body: dict[str, Any]) -> bool:
    from personalens_testkit.llm.retry import PING_TEXT

    messages = body.get("messages") or []
    return bool(messages) and messages[-1].get("content") == PING_TEXT


def task_of(prompt: str) -> str:
    """The user intent quoted in a user-agent prompt (first 40 characters)."""
    return prompt.split("<task>\n", 1)[1].split("\n", 1)[0][:40]


def _free_text_judging(body: dict[str, Any]) -> dict[str, Any] | None:
    """A judge call asked without a schema (a model whose answer is read as free text, a batch job's): the format its
    rubric asks for, as a schema would name it; None for any other call."""
    messages = body.get("messages") or []
    if not messages or "impartial evaluator" not in str(messages[0].get("content")):
        return None
    prompt = str(messages[-1].get("content"))
    if "meets the GOAL" in prompt:
        return {"json_schema": {"name": "task_completion", "schema": {"properties": {"verdict": {}, "explanation": {}}}}}
    metric = _metric_from_prompt(body)
    keys = ["score", "justification", *(["observations"] if metric == "personalization" else [])]
    return {"json_schema": {"name": metric, "schema": {"properties": dict.fromkeys(keys, {})}}}


def _metric_from_prompt(body: dict[str, Any]) -> str:
    """The rated metric of a judge prompt, when the backend did not send the schema's name."""
    prompt = body["messages"][-1]["content"]
    side = "user" if "the USER's messages" in prompt else "assistant"
    if "Rate the naturalness" in prompt:
        return f"naturalness_{side}"
    if "Rate the coherence" in prompt:
        return f"coherence_{side}"
    return "personalization"


def _chat_from_converse(body: dict[str, Any]) -> dict[str, Any]:
    """A Converse request as the chat-completions body :meth:`FakeLLM.answer` reads."""
    messages = [{"role": "system", "content": block["text"]} for block in body.get("system", []) if "text" in block]
    messages += [{"role": m["role"], "content": "".join(b.get("text", "") for b in m["content"])} for m in body["messages"]]
    chat: dict[str, Any] = {"model": body.get("modelId", "bedrock"), "messages": messages}
    tools = body.get("toolConfig", {}).get("tools", [])
    if tools:
        spec = tools[0]["toolSpec"]
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": spec["name"], "schema": spec["inputSchema"]["json"]}}
    return chat


def _cached_prefix(body: dict[str, Any]) -> str | None:
    """Everything before the last cachePoint of a Converse request, or None without one."""
    blocks = [*body.get("system", []), *(b for m in body["messages"] for b in m["content"])]
    cuts = [i for i, block in enumerate(blocks) if "cachePoint" in block]
    return json.dumps(blocks[: cuts[-1]]) if cuts else None


def _converse_answer(chat: dict[str, Any], text: str) -> dict[str, Any]:
    if "response_format" in chat:
        name = chat["response_format"]["json_schema"]["name"]
        content: list[dict[str, Any]] = [{"toolUse": {"toolUseId": "t1", "name": name, "input": json.loads(text)}}]
    else:
        content = [{"text": text}]
    tokens: dict[str, int] = {"inputTokens": len(json.dumps(chat)) // 4, "outputTokens": len(text) // 4}
    cached = chat.pop("_cached", None)  # a prompt cache: the first request with a prefix writes it, later ones read it
    if cached is not None:
        tokens["cacheReadInputTokens" if cached else "cacheWriteInputTokens"] = 500
    return {
        "output": {"message": {"role": "assistant", "content": content}}, "stopReason": "end_turn",
        "usage": {**tokens, "totalTokens": sum(tokens.values())}, "metrics": {"latencyMs": 1},
    }
