"""A time limit bounds a call as a whole - connecting to its answer's last byte - not each read: a bot or a
judge that trickles its answer (a byte a second) is given up at ``timeout_s``, and a port that accepts
connections and never answers fails the preflight in seconds, with one line. The runs go through the real
path (pytest in a subprocess, loopback servers that trickle, the transport of every client) and keep the
invariants of tests/test_reliability.py; the deadline rule itself is tried piece by piece first."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator

import httpx
import pytest

from personalens_testkit import timebox
from personalens_testkit.errors import DeadlineReached, ModelError
from personalens_testkit.llm import retry
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.transport import bounded_client
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.timebox import TimeLimit, call_by_deadline, deadline, nearest_deadline, time_left

from .support.fake_llm import FakeLLM, Script
from .support.project import read_rows
from .test_reliability import ALARM, LIVE, assert_rows_are_cases, project

SECRET = "sk-trickle-0123456789abcdef"  # an API key: never in a message, a row or a printed line

# -- loopback servers ---------------------------------------------------------------------------------

#: (method, path, request body or None) -> (answer body, whether to trickle it)
Answer = Callable[[str, str, "dict | None"], "tuple[bytes, bool]"]


class Trickle:
    """A loopback HTTP server that sends its status line and headers at once, then the body ``per_s`` bytes a
    second (or at once, where ``answer`` says so)."""

    def __init__(self, answer: Answer, per_s: float) -> None:
        self.stopped = threading.Event()
        self.requests: list[tuple[str, str]] = []
        #: trickled bodies sent whole: a client that gives up at its deadline stops reading before any is
        self.whole = 0
        trickle = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer(None)

            def do_POST(self) -> None:
                self._answer(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null"))

            def _answer(self, request: dict | None) -> None:
                trickle.requests.append((self.command, self.path))
                body, slowly = answer(self.command, self.path, request)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if not slowly:
                        self.wfile.write(body)
                        return
                    for i in range(len(body)):
                        if trickle.stopped.wait(1 / per_s):
                            break
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                    else:
                        trickle.whole += 1
                except OSError:  # the client gave up: what the limit is for
                    pass
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Trickle:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def chat_answer(text: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [{
        "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 9}}).encode()


def is_ping(request: dict | None) -> bool:
    return bool(request) and request["messages"][-1]["content"] == retry.PING_TEXT  # type: ignore[index]


def slow_model(method: str, path: str, request: dict | None) -> tuple[bytes, bool]:
    """An OpenAI-compatible model that answers its preflight at once and trickles every other answer."""
    if method == "GET":
        return b'{"object": "list", "data": []}', False
    return chat_answer("OK" if is_ping(request) else '{"score": 3, "justification": "it was fine, all in all"}'), \
        not is_ping(request)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes them) and never reads or answers anything."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


def request() -> ChatRequest:
    return ChatRequest(messages=(Message("user", "hello"),), purpose="judge", max_tokens=20)


# -- the rule: deadlines in force, the nearest wins -------------------------------------------------------

def test_the_nearest_deadline_in_force_bounds_every_wait_and_names_its_limit():
    assert nearest_deadline() is None and time_left() is None and time_left(5.0) == 5.0
    with deadline(None, "nothing"):
        assert nearest_deadline() is None
    with deadline(60, "timeout_s") as own:
        assert nearest_deadline() is own and 59 < time_left() <= 60 and time_left(2.0) == 2.0
        with deadline(1.5, "the scenario's time limit", final=True) as scenario:
            assert nearest_deadline() is scenario and time_left(30.0) <= 1.5
            assert scenario.describe() == "the time limit of 1.5 s (the scenario's time limit)"
            # a thread started under a deadline keeps it (a judge's parallel calls, a bot's own thread)
            assert timebox.call_within(nearest_deadline, 5.0) is scenario
        assert nearest_deadline() is own
    assert nearest_deadline() is None


def test_a_deadline_is_in_force_from_its_blocks_start_to_its_end_however_the_block_ends():
    later = deadline(0.5, "timeout_s")
    time.sleep(0.2)  # made before its block: it counts from the block's start
    with later as own:
        assert 0.3 < time_left() <= 0.5 and nearest_deadline() is own  # not 0.3 or less: from the block's start
        with pytest.raises(RuntimeError, match="already entered"):
            later.__enter__()
    with pytest.raises(ValueError, match="inside"):
        with deadline(1.0, "timeout_s"):
            raise ValueError("raised inside")
    assert nearest_deadline() is None
    with later as again:  # entered again once its block has ended
        assert nearest_deadline() is again and again is not own
    assert nearest_deadline() is None


def test_a_call_that_hangs_is_given_up_at_the_nearest_deadline_which_the_error_names():
    done = threading.Event()
    with pytest.raises(TimeLimit) as caught:
        call_by_deadline(lambda: time.sleep(30) or done.set(), 0.3, "timeout_s")
    assert caught.value.deadline.name == "timeout_s" and not done.is_set()  # given up while the call still ran
    with deadline(0.2, "the scenario's time limit", final=True), pytest.raises(TimeLimit) as caught:
        call_by_deadline(lambda: time.sleep(30), 60, "timeout_s")
    assert caught.value.deadline.final and caught.value.deadline.limit_s == 0.2
    assert call_by_deadline(lambda: 42, 1, "timeout_s") == 42


def test_an_http_call_ends_at_its_deadline_however_slowly_its_body_comes():
    with Trickle(lambda *_: (b"x" * 100, True), per_s=10) as server:  # 10 s for the whole body
        client = bounded_client(timeout_s=30)  # no single read waits even 0.2 s: only the deadline ends it
        started = time.monotonic()
        with deadline(1.0, "timeout_s"), pytest.raises(httpx.ReadTimeout):
            client.post(server.url, content=b"{}")
        assert time.monotonic() - started > 0.9 and server.whole == 0  # the deadline ended it, not a read's time-out
        with deadline(30, "timeout_s"), deadline(0.5, "the scenario's time limit"), pytest.raises(httpx.ReadTimeout):
            with client.stream("POST", server.url, content=b"{}") as response:
                for _ in response.iter_bytes():  # a streamed body too, read after the headers came
                    pass
        assert server.whole == 0  # given up long before the body's 10 s: the nearer deadline
        # without a deadline in force it is an ordinary client: per-read time-outs, the whole body read
        assert len(bounded_client(timeout_s=5).post(server.url, content=b"{}", timeout=5).content) == 100


def test_the_deadline_holds_through_the_environments_proxy(monkeypatch):
    """A proxy the environment names is used (the request reaches it, in a proxy's absolute form) and its connection
    is bounded as a direct one is: the trickle ends at the deadline."""
    with Trickle(lambda *_: (b"y" * 100, True), per_s=10) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.rstrip("/"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = bounded_client(timeout_s=30)
        with deadline(1.0, "timeout_s"), pytest.raises(httpx.ReadTimeout):
            client.post("http://model.invalid/v1/chat", content=b"{}")
        assert proxy.whole == 0
        assert proxy.requests == [("POST", "http://model.invalid/v1/chat")]


@pytest.mark.parametrize(("env", "url", "proxy"), [
    ({"HTTPS_PROXY": "http://p:1"}, "https://api.example.com/v1", "http://p:1"),
    ({"HTTPS_PROXY": "http://p:1"}, "http://api.example.com/v1", None),
    ({"ALL_PROXY": "socks5://p:2"}, "http://api.example.com/v1", "socks5://p:2"),
    ({"HTTP_PROXY": "http://p:1", "ALL_PROXY": "http://q:2"}, "http://a.example/v1", "http://p:1"),
    ({"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}, "https://api.example.com/v1", None),
    ({"HTTPS_PROXY": "http://p:1", "NO_PROXY": "other.org"}, "https://api.example.com/v1", "http://p:1"),
    ({}, "https://api.example.com/v1", None),
])
def test_the_environments_proxy_is_chosen_as_the_standard_library_reads_it(monkeypatch, env, url, proxy):
    from personalens_testkit.llm.transport import environment_proxy

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment_proxy(httpx.URL(url)) == proxy


def test_the_scenarios_deadline_reaches_every_wait_of_a_call_without_a_thread_per_call():
    from personalens_testkit.agents.calls import CallLog
    from personalens_testkit.llm.retry import RetryPolicy

    log = CallLog(retry=RetryPolicy(attempts=3, initial_s=0.01), deadline=time.monotonic() + 0.4, time_limit_s=0.4)
    assert log.run(threading.current_thread, role="judge", label="x", turn=0) is threading.current_thread()
    done, calls = threading.Event(), []
    with pytest.raises(DeadlineReached, match=r"^assistant \(reply, turn 2\) given up while it ran: the scenario's "
                                              r"time limit of 0.4 s ran out$"):
        log.run(lambda: calls.append(1) or call_by_deadline(lambda: time.sleep(30) or done.set(), 60, "timeout_s"),
                role="assistant", label="reply", turn=2)  # a bot's own limit is a minute: the scenario's, nearer,
    assert not done.is_set() and calls == [1]  # cuts it while the call still runs - and it is not retried


def test_a_wait_for_the_endpoints_limits_ends_at_the_deadline(tmp_path):
    from personalens_testkit.llm.limits import LimitedChat, Limits, SharedLimiter

    class Instant:
        spec = "openai:m"

        def complete(self, request: ChatRequest) -> str:
            return "answered"

    limiter = SharedLimiter(tmp_path, "http://x", Limits(max_concurrency=1))
    chat = LimitedChat(Instant(), limiter)  # type: ignore[arg-type]
    with limiter.slot():  # another call holds the only slot, until after the wait ended: the deadline ended it
        with deadline(0.3, "timeout_s"), pytest.raises(ModelError, match=r"no turn at the endpoint's limits "
                                                                         r".* within the time limit of 0.3 s"):
            chat.complete(request())
    assert chat.complete(request()) == "answered"


# -- each backend: a whole call within timeout_s, the error naming the limit ------------------------------

def test_an_openai_compatible_model_that_trickles_is_given_up_at_timeout_s():
    with Trickle(slow_model, per_s=8) as server:
        chat = OpenAICompatibleChat(spec="openai:m", base_url=f"{server.url}/v1", model="m", api_key=SECRET,
                                    timeout_s=1.0)
        with pytest.raises(ModelError) as caught:
            chat.complete(request())
        assert server.whole == 0  # given up within the answer's trickle (about 8 s)
        assert str(caught.value) == "call to openai:m failed: no answer within the time limit of 1 s (timeout_s)"
        assert caught.value.retryable and SECRET not in repr(caught.value)
        with deadline(0.4, "the scenario's time limit", final=True), pytest.raises(DeadlineReached):
            chat.complete(request())  # the scenario's limit came first: not retried


def test_a_bedrock_model_that_trickles_is_given_up_at_timeout_s(aws_env):
    from personalens_testkit.llm.bedrock import BedrockChat

    converse = json.dumps({"output": {"message": {"role": "assistant", "content": [{"text": "fine " * 40}]}},
                           "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1}}).encode()
    with Trickle(lambda *_: (converse, True), per_s=8) as server:
        chat = BedrockChat(spec="bedrock:m", model_id="anthropic.claude-3-haiku", read_timeout_s=1.0,
                           endpoint_url=server.url)
        with pytest.raises(ModelError, match=r"^call to bedrock:m failed: no answer within the time limit of 1 s "
                                             r"\(timeout_s\)$") as caught:
            chat.complete(request())
        assert server.whole == 0 and caught.value.retryable  # given up within the answer's trickle
        assert server.requests == [("POST", "/model/anthropic.claude-3-haiku/converse")]


# -- the preflight: a dead endpoint in seconds, a slow live one not failed -------------------------------------

def test_the_preflight_reports_a_port_that_never_answers_in_seconds(silent_port, monkeypatch):
    monkeypatch.setattr(retry, "PROBE_S", 1.0)
    chat = OpenAICompatibleChat(spec="openai:m", base_url=f"http://127.0.0.1:{silent_port}/v1", model="m")
    with pytest.raises(ModelError, match=rf"no HTTP answer from http://127.0.0.1:{silent_port}/v1 within the time "
                                         r"limit of 1 s \(preflight\)$"):  # the port never answers: the limit ends it
        retry.ping(chat, "judge")


def test_the_preflight_waits_for_a_model_that_is_slow_to_answer_its_first_call(monkeypatch):
    def loading(method: str, path: str, body: dict | None) -> tuple[bytes, bool]:
        if method == "POST":
            time.sleep(3)  # loads the model on its first call, as an Ollama-style server does
        return (chat_answer("OK") if method == "POST" else b"{}"), False

    with Trickle(loading, per_s=1) as server:
        chat = OpenAICompatibleChat(spec="openai:m", base_url=f"{server.url}/v1", model="m")
        retry.ping(chat, "judge")  # its HTTP answer came at once: the one-token call may take its time
    assert server.requests == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    assert retry.PROBE_S <= 10 and retry.PING_S >= 30  # what docs/reliability.md promises


# -- the real path: a run against each fault ------------------------------------------------------------------

def run_rows(pytester: pytest.Pytester, *args: str, timeout: float = 120) -> tuple[pytest.RunResult, list[dict], float]:
    started = time.monotonic()
    result = pytester.runpytest_subprocess(*args, timeout=timeout)
    took = time.monotonic() - started
    found = list(pytester.path.glob("personalens-results/*/results.jsonl"))
    return result, read_rows(found[0]) if found else [], took


def test_an_http_bot_that_trickles_its_reply_is_an_error_at_its_time_limit(pytester):
    reply = json.dumps({"reply": "a reply that comes one byte a second"}).encode()
    with Trickle(lambda *_: (reply, True), per_s=1) as bot, FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, f'[assistants.trickle-bot]\nkind = "http"\nurl = "{bot.url}/reply"\ntimeout_s = 2\n')
        result, rows, took = run_rows(pytester, "--assistant", "trickle-bot", *ALARM, *LIVE, "-k", "task-1",
                                      "--retries", "0")
    assert_rows_are_cases(result, rows)
    (row,) = rows
    assert row["status"] == "error" and row["error"]["source"] == "assistant", row["error"]
    assert f"no reply from {bot.url}/reply within the time limit of 2 s (timeout_s)" in row["error"]["message"]
    assert 2 <= row["seconds"] < 6, row["seconds"]  # about the limit (before: one second a byte of the reply)
    print(f"http bot trickling 1 B/s, timeout_s = 2: the case took {row['seconds']:.2f} s, the run {took:.1f} s")


def test_a_judge_that_trickles_its_answer_is_an_error_at_its_time_limit(pytester, monkeypatch):
    monkeypatch.setenv("TRICKLE_API_KEY", SECRET)
    with Trickle(slow_model, per_s=8) as judge, FakeLLM(Script(terminate_after=1)) as fake:
        project(pytester, fake, f'[models.slow-judge]\nkind = "openai"\nmodel = "j"\nbase_url = "{judge.url}/v1"\n'
                                f'api_key_env = "TRICKLE_API_KEY"\ntimeout_s = 2\n')
        result, rows, took = run_rows(pytester, "--judge-model", "slow-judge", *ALARM, *LIVE, "-k", "task-1",
                                      "--retries", "0")
    assert_rows_are_cases(result, rows)
    (row,) = rows
    assert row["status"] == "error" and row["error"]["source"] == "judge", row["error"]
    assert "no answer within the time limit of 2 s (timeout_s)" in row["error"]["message"]
    # cut at its limit (2 s), not at a multiple of it (6 s: three limits) nor when the body ends (minutes); the dialogue
    # before it is a loopback fake's (hundredths of a second: a machine three times slower stays far inside the 4 s)
    assert 2 <= row["seconds"] < 6, row["seconds"]
    assert SECRET not in result.stdout.str() + result.stderr.str() + json.dumps(rows)
    print(f"judge trickling 8 B/s, timeout_s = 2: the case took {row['seconds']:.2f} s, the run {took:.1f} s")


def test_a_judge_port_that_never_answers_fails_the_run_before_any_case_in_seconds(pytester, silent_port, monkeypatch):
    monkeypatch.setenv("TRICKLE_API_KEY", SECRET)
    with FakeLLM() as fake:
        project(pytester, fake, f'[models.silent]\nkind = "openai"\nmodel = "j"\n'
                                f'base_url = "http://127.0.0.1:{silent_port}/v1"\napi_key_env = "TRICKLE_API_KEY"\n')
        result, rows, took = run_rows(pytester, "--judge-model", "silent", *ALARM, *LIVE, timeout=60)
    assert took < 20, took  # the default timeout_s (120 s) and --retries 3 took 493 s
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR")]
    assert errors == [f"ERROR: judge model, --judge-model silent ([models.silent] in personalens.toml): call to silent "
                      f"(openai:j) failed: no HTTP answer from http://127.0.0.1:{silent_port}/v1 within the time limit "
                      f"of 10 s (preflight)"], result.stderr.lines
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and SECRET not in text
    assert fake.requests == [] and rows == []  # no case ran
    print(f"judge on a port that never answers: the run failed in {took:.1f} s")


def test_every_client_of_a_process_verifies_servers_with_one_tls_context():
    """Made once (reading the certificate store costs about 40 ms a context), and it verifies: certificate and host."""
    import ssl

    from personalens_testkit.llm.transport import tls_context

    context = tls_context()
    assert context is tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
