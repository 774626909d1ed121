"""The indexed cassette and the model clients' exchange with it give the answers, play counts, misses and
stored entries of vcrpy's own matching and recording."""

from __future__ import annotations

import json

import httpx
import pytest
from vcr.cassette import Cassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.request import Request

from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.replay.indexed import IndexedCassette
from personalens_testkit.replay.matching import call_matcher
from personalens_testkit.replay.router import exchange
from personalens_testkit.replay.store import JsonBytesSerializer, XzPersister
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings

from .support.fake_llm import FakeLLM, Script

URI = "http://local/v1/chat/completions"
A = b'{"model":"m","messages":[{"role":"user","content":"a"}]}'
B = b'{"model":"m","messages":[{"role":"user","content":"b"}]}'


def _answer(text: str) -> dict:
    return {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["application/json"]},
            "body": {"string": text.encode()}}


def _cassette(path, cls, mode):
    return cls.load(path=str(path), serializer=JsonBytesSerializer, persister=XzPersister, record_mode=mode,
                    match_on=(call_matcher,))


@pytest.fixture
def recorded(tmp_path):
    """A cassette of A, B, A (the same request twice: a retried call), each with its own answer."""
    path = tmp_path / "c.json.xz"
    cassette = _cassette(path, Cassette, "all")
    for body, text in ((A, "first a"), (B, "b"), (A, "second a")):
        cassette.append(Request("POST", URI, body, {}), _answer(text))
    cassette._save()
    return path


def test_the_index_plays_what_vcrpy_plays_in_the_same_order(recorded):
    ours, theirs = _cassette(recorded, IndexedCassette, "none"), _cassette(recorded, Cassette, "none")
    for body in (A, B, A, A, B):
        request = Request("POST", URI, body, {})
        assert ours.can_play_response_for(request) == theirs.can_play_response_for(request)
        if theirs.can_play_response_for(request):
            assert ours.play_response(request) == theirs.play_response(request)
    assert ours.play_counts == theirs.play_counts


def test_the_short_cut_finds_a_call_in_other_bytes_and_explains_a_miss(recorded):
    cassette = _cassette(recorded, IndexedCassette, "none")
    reordered = b'{"messages":[{"content":"a","role":"user"}], "model":"m"}'
    assert cassette.replay_answer("POST", URI, reordered)["body"]["string"] == b"first a"
    assert cassette.replay_answer("POST", URI, A)["body"]["string"] == b"second a"
    with pytest.raises(CannotOverwriteExistingCassetteException) as caught:
        cassette.replay_answer("POST", URI, A)  # both recorded answers are used up
    assert caught.value.reason == "already_played"
    with pytest.raises(CannotOverwriteExistingCassetteException) as caught:
        cassette.replay_answer("POST", URI, b'{"model":"other"}')
    assert caught.value.reason == "nothing_similar"  # one matcher for the whole call: vcrpy's word for it


def test_the_short_cut_stands_aside_while_recording(recorded):
    assert _cassette(recorded, IndexedCassette, "all").replay_answer("POST", URI, A) is None


def test_a_replay_answers_what_was_recorded_over_http_in_order_then_misses(tmp_path):
    """Recorded live over HTTP through the run's exchange; replayed with the server gone: each recorded answer once,
    in order, then vcrpy's miss."""
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference"))
    path = tmp_path / "live.json.xz"
    request = ChatRequest(messages=(Message("user", "hello"),), purpose="assistant", temperature=0.0)
    with FakeLLM() as fake:
        live = OpenAICompatibleChat(spec="openai:m", base_url=fake.url, model="m", answers=exchange)
        with cassettes.use(path, "all"):
            recorded = []
            for text in ("first answer", "second answer"):
                fake.script.assistant_text = text
                recorded.append(live.complete(request))
        live.close()
    assert recorded[0].text != recorded[1].text
    gone = "http://127.0.0.1:9/v1"  # nothing listens: only the cassette can answer
    client = OpenAICompatibleChat(spec="openai:m", base_url=gone, model="m", answers=exchange)
    with cassettes.use(path, "none"):
        assert [client.complete(request), client.complete(request)] == recorded
        with pytest.raises(CannotOverwriteExistingCassetteException):
            client.complete(request)
    client.close()


def test_threads_recording_boto3_calls_at_once_each_record_theirs(tmp_path, monkeypatch):
    """A judge's calls (and --concurrency scenarios) record from several threads at once. vcrpy puts
    the real connection classes back process-wide while a call is sent; under threads that lost
    calls (a connection opened meanwhile was never patched) and could unpatch for good."""
    import threading

    from personalens_testkit.llm.bedrock import make_client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTTEST0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret-value-0001")
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference", record_mode="all"))
    with FakeLLM(Script(delay_s=0.05)) as fake:
        client = make_client("us-east-1", endpoint_url=fake.url.removesuffix("/v1"))

        def call(i: int) -> None:
            with cassettes.use(tmp_path / f"{i}.json.xz", "all"):
                client.converse(modelId="m", messages=[{"role": "user", "content": [{"text": f"call {i}"}]}])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with cassettes.use(tmp_path / "after.json.xz", "all"):  # the patches are still in place afterwards
            client.converse(modelId="m", messages=[{"role": "user", "content": [{"text": "after"}]}])
    for i in range(8):
        (request, _), = _cassette(tmp_path / f"{i}.json.xz", IndexedCassette, "none").data
        assert f"call {i}".encode() in request.body
    assert len(_cassette(tmp_path / "after.json.xz", IndexedCassette, "none").data) == 1


LATE_IMPORTS = r'''
import http.client, json, sys
from pathlib import Path
from personalens_testkit.replay import router
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings

folder, url, before = Path(sys.argv[1]), sys.argv[2], [n for n in sys.argv[3:] if not n.startswith("@")]
for name in before:  # imported before any cassette (botocore itself, without its HTTP module)
    __import__(name)
kept = dict(sys.modules), list(sys.meta_path)  # as pytester's in-process run keeps them, to put them back after
cassettes = Cassettes(CassetteSettings(cassette_dir=folder, assistant="reference", record_mode="all"))
with cassettes.use(folder / "first.json.xz", "all"):
    pass  # vcrpy imported and its patches installed
if "@inside" in sys.argv:  # botocore imported (and patched) during the in-process run, then forgotten with it
    import botocore.awsrequest
if "@restore" in sys.argv:  # everything imported since, vcrpy and botocore among them, gone; finders added, gone
    for name in set(sys.modules) - set(kept[0]):
        del sys.modules[name]
    sys.meta_path[:] = kept[1]
imported = sorted({"aiohttp", "requests", "urllib3", "botocore"} & {name.partition(".")[0] for name in sys.modules}
                  - {name.partition(".")[0] for name in before} - ({"urllib3"} if before else set()))
from personalens_testkit.llm.bedrock import make_client  # botocore imported only now, after the patches

client = make_client("us-east-1", endpoint_url=url)
with cassettes.use(folder / "bedrock.json.xz", "all"):
    live = client.converse(modelId="m", messages=[{"role": "user", "content": [{"text": "late"}]}])
replayer = make_client("us-east-1", endpoint_url="http://127.0.0.1:9")  # nothing listens there
with cassettes.use(folder / "bedrock.json.xz", "none"):
    replayed = replayer.converse(modelId="m", messages=[{"role": "user", "content": [{"text": "late"}]}])
print(json.dumps({"imported": imported, "http_client": http.client.HTTPConnection.__module__,
                  "live": live["output"], "replayed": replayed["output"]}))
'''


@pytest.mark.parametrize("before", [[], ["botocore"], ["botocore.exceptions"], ["@restore"], ["@restore", "@inside"]],
                         ids=["nothing", "botocore-alone", "botocore-exceptions", "after-an-in-process-run",
                              "botocore-imported-in-an-in-process-run"])
def test_vcrpy_loads_without_unused_http_libraries_and_botocore_imported_later_still_records(tmp_path, monkeypatch,
                                                                                           before):
    """vcrpy imports every HTTP library it can patch (aiohttp alone costs 0.12 CPU-s a process); the testkit's
    calls go through httpx and botocore only. In a fresh process, opening a cassette imports none of the
    others nor botocore, leaves http.client unpatched, and a Bedrock client made afterwards records and
    replays through the real boto3 client as before - also when some of botocore was imported before, without
    its HTTP module (botocore alone, or its exceptions, which bring its vendored requests: vcrpy's own check
    would take that for a botocore too old for it), and after an in-process pytester run put sys.modules and
    sys.meta_path back (vcrpy, and botocore if imported then, load afresh; a finder added meanwhile is gone:
    wrapt's post-import hooks lost botocore's patch that way, and Bedrock calls went unrecorded)."""
    import json
    import subprocess
    import sys

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTTEST0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret-value-0001")
    with FakeLLM(Script(assistant_text="recorded late")) as fake:
        done = subprocess.run([sys.executable, "-c", LATE_IMPORTS, str(tmp_path), fake.url.removesuffix("/v1"), *before],
                              capture_output=True, text=True, timeout=120)
        calls = len(fake.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["imported"] == [] and found["http_client"] == "http.client"
    assert calls == 1 and found["replayed"] == found["live"]
    assert "recorded late" in json.dumps(found["live"])


@pytest.mark.parametrize("mode", ["all", "once", "new_episodes"])
def test_a_recording_stores_what_vcrpys_own_recording_stores(tmp_path, monkeypatch, mode):
    """A call recorded through the exchange is stored as vcrpy's own ``use_cassette`` stores the same call sent by
    a plain httpx client, with the same filters - the request scrubbed of its key and keeping only harmless
    headers, the answer decoded and scrubbed - and the caller reads the answer it was sent."""
    import vcr
    from vcr.patch import PATCHER_NAMES

    monkeypatch.setenv("OPENAI_API_KEY", "sk-recording-secret-0001")
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference", record_mode=mode))
    request = ChatRequest(messages=(Message("user", "hello sk-recording-secret-0001"),), purpose="assistant")
    theirs = vcr.VCR(before_record_request=cassettes.before_record_request,
                     before_record_response=cassettes.before_record_response, match_on=["method"])
    theirs.register_serializer("ours", JsonBytesSerializer)
    theirs.register_persister(XzPersister)
    with FakeLLM(Script(assistant_text="stored the same sk-recording-secret-0001")) as fake:
        model = OpenAICompatibleChat(spec="openai:fake-bot", base_url=fake.url, model="fake-bot", answers=exchange)
        with cassettes.use(tmp_path / "ours.json.xz", mode):
            answer = model.complete(request).text
        with theirs.use_cassette(str(tmp_path / "theirs.json.xz"), serializer="ours", record_mode=mode,
                                 skip_patchers=[name for name in PATCHER_NAMES if name != "httpx"]):
            with httpx.Client(transport=httpx.HTTPTransport()) as plain:
                plain.post(f"{fake.url}/chat/completions", content=json.dumps(model.payload(request)).encode(),
                           headers={"content-type": "application/json", "Accept-Encoding": "identity"})
        model.close()
    assert answer == "stored the same sk-recording-secret-0001"  # the caller's answer: never the scrubbed copy
    ((ours, our_answer),) = _cassette(tmp_path / "ours.json.xz", IndexedCassette, "none").data
    ((stub, stub_answer),) = _cassette(tmp_path / "theirs.json.xz", IndexedCassette, "none").data
    assert json.loads(ours.body) == json.loads(stub.body) and ours.uri == stub.uri and ours.headers == stub.headers
    assert {**our_answer, "headers": None} == {**stub_answer, "headers": None}
    assert set(our_answer["headers"]) == set(stub_answer["headers"]) == {"content-type"}
    assert b"sk-recording-secret-0001" not in ours.body and b"<OPENAI_API_KEY>" in ours.body
    assert b"sk-recording-secret-0001" not in our_answer["body"]["string"]


def test_new_episodes_plays_what_is_recorded_and_records_what_is_new(tmp_path):
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference"))
    path = tmp_path / "seeded.json.xz"
    hello, other = (ChatRequest(messages=(Message("user", text),), purpose="assistant") for text in ("hello", "other"))
    with FakeLLM(Script(assistant_text="first")) as fake:
        model = OpenAICompatibleChat(spec="openai:m", base_url=fake.url, model="m", answers=exchange)
        with cassettes.use(path, "all"):
            first = model.complete(hello).text
        fake.script.assistant_text = "new"
        sent = len(fake.requests)
        with cassettes.use(path, "new_episodes"):
            assert model.complete(hello).text == first  # played: the server is not asked
            assert len(fake.requests) == sent
            new = model.complete(other).text  # not recorded: sent, and recorded
            assert len(fake.requests) == sent + 1
        model.close()
    with cassettes.use(path, "none") as cassette:
        assert [json.loads(r["body"]["string"])["choices"][0]["message"]["content"] for _, r in cassette.data] == [
            first, new] == ["first", "new"]


def test_an_answer_recorded_compressed_is_stored_decoded_and_one_without_encoding_as_it_is():
    import gzip

    cassettes = Cassettes(CassetteSettings(cassette_dir=".", assistant="reference"), secrets=[])
    compressed = {"status": {"code": 200, "message": "OK"}, "body": {"string": gzip.compress(b'{"a": 1}')},
                  "headers": {"Content-Type": ["application/json"], "Content-Encoding": ["gzip"]}}
    plain = _answer('{"a": 1}')
    assert cassettes.before_record_response(compressed)["body"]["string"] == b'{"a": 1}'
    assert cassettes.before_record_response(compressed)["headers"] == {"Content-Type": ["application/json"]}
    assert cassettes.before_record_response(plain) == _answer('{"a": 1}')


def test_when_imported_calls_back_on_each_load_through_whichever_finder_finds_the_module(tmp_path, monkeypatch):
    """The finder that patches botocore once it loads: the module found by any other finder (here one of our own
    after it in sys.meta_path), the callback run on every load (pytester's runs make a module load afresh), and a
    callback of the same name registered again (its module imported afresh) replacing the stale one."""
    import importlib.abc
    import importlib.util
    import sys

    from personalens_testkit.replay import vcr_imports

    class InMemory(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            return importlib.util.spec_from_loader(fullname, self) if fullname == "personalens_probe_mod" else None

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.loads = getattr(module, "loads", 0) + 1

    seen: list[str] = []

    def make(tag):
        def probe_loaded(module):
            seen.append(tag)
        return probe_loaded

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, InMemory()])
    monkeypatch.setattr(vcr_imports, "_after", {})
    vcr_imports.when_imported("personalens_probe_mod", make("stale"))
    vcr_imports.when_imported("personalens_probe_mod", make("fresh"))  # the same qualified name: replaces it
    import personalens_probe_mod  # noqa: F401
    del sys.modules["personalens_probe_mod"]
    import personalens_probe_mod  # noqa: F401,F811
    del sys.modules["personalens_probe_mod"]
    assert seen == ["fresh", "fresh"]
