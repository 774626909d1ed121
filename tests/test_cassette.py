"""Our cassette (replay/cassette.py) plays, refuses, records and stores what vcrpy's own Cassette does with the
same calls, in every record mode (compared call by call on generated cassettes and calls), and the model clients'
exchange with it records and replays real HTTP calls - patching nothing."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vcr.cassette import Cassette as VcrCassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.persisters.filesystem import CassetteNotFoundError
from vcr.request import Request as VcrRequest

from personalens_testkit.errors import CassetteMissError
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.replay.cassette import Cassette
from personalens_testkit.replay.matching import call_matcher
from personalens_testkit.replay.router import exchange
from personalens_testkit.replay.store import JsonBytesSerializer, XzPersister
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings

from .support.fake_llm import FakeLLM, Script

URI = "http://local/v1/chat/completions"
A = b'{"model":"m","messages":[{"role":"user","content":"a"}]}'
B = b'{"model":"m","messages":[{"role":"user","content":"b"}]}'


class VcrpyPersister(XzPersister):
    """Ours, with vcrpy's word for no file (its Cassette catches only its own)."""

    @staticmethod
    def load_cassette(cassette_path, serializer):
        try:
            return XzPersister.load_cassette(cassette_path, serializer)
        except FileNotFoundError:
            raise CassetteNotFoundError() from None


def _answer(text: str) -> dict:
    return {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["application/json"]},
            "body": {"string": text.encode()}}


def _ours(path, mode):
    return Cassette.open(path, record_mode=mode, persister=XzPersister, serializer=JsonBytesSerializer)


def _theirs(path, mode):
    return VcrCassette.load(path=str(path), serializer=JsonBytesSerializer, persister=VcrpyPersister,
                            record_mode=mode, match_on=(call_matcher,), drop_unused_requests=mode == "all")


BODIES = [A, B, b'{"model":"m","messages":[{"role":"user","content":"c"}]}',
          b'{"messages":[{"content":"a","role":"user"}], "model":"m"}']  # the last: A in other bytes


def _seed(path, bodies):
    """A cassette of these calls, each with its own answer, written by vcrpy's own Cassette (with our persister)."""
    cassette = _theirs(path, "all")
    for number, body in enumerate(bodies):
        cassette.append(VcrRequest("POST", URI, body, {}), _answer(f"recorded {number}"))
    cassette._save()  # vcrpy's own saving: what it writes, we read


def _drive(cassette, calls, ours: bool) -> list:
    """Each call as vcrpy's stubs decide it (ours: through the exchange): played, refused or sent and recorded."""
    outcomes = []
    for number, body in enumerate(calls):
        def send(number=number):
            return _answer(f"sent {number}")

        if ours:
            try:
                outcomes.append(("answer", cassette.exchange("POST", URI, body, None, send)))
            except CassetteMissError as miss:
                outcomes.append(("miss", miss.reason))
            continue
        request = VcrRequest("POST", URI, body, {"content-type": "application/json"})
        if cassette.can_play_response_for(request):
            outcomes.append(("answer", cassette.play_response(request)))
        elif cassette.write_protected:
            try:
                raise CannotOverwriteExistingCassetteException(cassette=cassette, failed_request=request)
            except CannotOverwriteExistingCassetteException as miss:
                outcomes.append(("miss", miss.reason))
        else:
            cassette.append(request, send())
            outcomes.append(("answer", send()))
    return outcomes


@settings(max_examples=300, deadline=None)
@given(recorded=st.none() | st.lists(st.sampled_from(BODIES[:3]), max_size=5),
       calls=st.lists(st.sampled_from(BODIES), max_size=8),
       mode=st.sampled_from(["none", "once", "new_episodes", "all"]))
def test_our_cassette_answers_refuses_records_and_saves_what_vcrpys_does(tmp_path_factory, recorded, calls, mode):
    """Generated cassettes (none on disk, or some calls recorded, some twice) and generated calls (some in other
    bytes), in every record mode: the same answers in the same order, the same misses with the same reason, the
    same cassette saved. One rule differs, by design: an answer recorded in this run never plays back in it (vcrpy's
    new_episodes plays it to the same call asked again; ours sends it again, so that the replay later plays both
    answers in order) - the generated calls keep clear of it there."""
    folder = tmp_path_factory.mktemp("c")
    if mode == "new_episodes":
        asked = [_canonical(body) for body in calls]
        if any(asked.count(body) > [_canonical(b) for b in recorded or []].count(body) + 1 for body in asked):
            return  # a call sent, then asked again
    for name in ("ours", "theirs"):
        if recorded is not None:
            _seed(folder / f"{name}.json.xz", recorded)
    ours, theirs = _ours(folder / "ours.json.xz", mode), _theirs(folder / "theirs.json.xz", mode)
    assert _drive(ours, calls, True) == _drive(theirs, calls, False)
    ours.save()
    theirs._save()
    for name in ("ours", "theirs"):
        if not (folder / f"{name}.json.xz").exists():
            assert not (folder / "ours.json.xz").exists() and not (folder / "theirs.json.xz").exists()
            return
    saved_ours = XzPersister.load_cassette(folder / "ours.json.xz", JsonBytesSerializer)
    saved_theirs = XzPersister.load_cassette(folder / "theirs.json.xz", JsonBytesSerializer)
    assert [(r.body, a) for r, a in zip(*saved_ours[:2])] == [(r.body, a) for r, a in zip(*saved_theirs[:2])]


def _canonical(body: bytes) -> str:
    return json.dumps(json.loads(body), sort_keys=True)


def test_a_miss_says_why(tmp_path):
    _seed(tmp_path / "c.json.xz", [A, B, A])
    cassette = _ours(tmp_path / "c.json.xz", "none")
    reordered = BODIES[3]
    assert cassette.exchange("POST", URI, reordered, None, _never)["body"]["string"] == b"recorded 0"
    assert cassette.exchange("POST", URI, A, None, _never)["body"]["string"] == b"recorded 2"
    with pytest.raises(CassetteMissError) as caught:
        cassette.exchange("POST", URI, A, None, _never)  # both recorded answers are used up
    assert caught.value.reason == "already_played"
    with pytest.raises(CassetteMissError) as caught:
        cassette.exchange("POST", URI, b'{"model":"other"}', None, _never)
    assert caught.value.reason == "nothing_similar"
    with pytest.raises(CassetteMissError) as caught:
        _ours(tmp_path / "none.json.xz", "none").exchange("POST", URI, A, None, _never)
    assert caught.value.reason == "cassette_not_found"


def _never():
    raise AssertionError("a replay sent a call")


def test_a_request_the_filter_drops_is_sent_and_kept_nowhere(tmp_path):
    cassette = Cassette.open(tmp_path / "c.json.xz", record_mode="all", persister=XzPersister,
                             filter_request=lambda request: None if b"bot" in request.body else request)
    sent = cassette.exchange("POST", URI, b'{"bot": 1}', None, lambda: _answer("live"))
    assert sent["body"]["string"] == b"live" and len(cassette) == 0 and not cassette.dirty
    cassette.save()
    assert not (tmp_path / "c.json.xz").exists()


def test_mode_all_records_afresh_and_saves_only_what_it_recorded(tmp_path):
    path = tmp_path / "c.json.xz"
    _seed(path, [A, B])
    cassette = _ours(path, "all")
    assert cassette.exchange("POST", URI, A, None, lambda: _answer("new a"))["body"]["string"] == b"new a"
    cassette.save()
    requests, answers, _ = XzPersister.load_cassette(path, JsonBytesSerializer)
    assert [r.body for r in requests] == [A] and answers[0]["body"]["string"] == b"new a"


def test_a_cassette_not_dirty_is_not_written(tmp_path):
    path = tmp_path / "c.json.xz"
    cassette = _ours(path, "all")
    cassette.exchange("POST", URI, A, None, lambda: _answer("a"))
    cassette.dirty = False  # a scenario that failed keeps what was on disk
    cassette.save()
    assert not path.exists()


def test_a_replay_answers_what_was_recorded_over_http_in_order_then_misses(tmp_path):
    """Recorded live over HTTP through the run's exchange; replayed with the server gone: each recorded answer once,
    in order, then the miss."""
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
        with pytest.raises(CassetteMissError):
            client.complete(request)
    client.close()


def test_threads_recording_boto3_calls_at_once_each_record_theirs(tmp_path, monkeypatch):
    """A judge's calls (and --concurrency scenarios) record from several threads at once, each into the cassette
    active in its own thread, through one boto3 client's ``before-send`` event; and replay with nothing listening."""
    import threading

    from personalens_testkit.llm.bedrock import make_client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTTEST0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret-value-0001")
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference", record_mode="all"))

    def call(client, i: int, mode: str) -> dict:
        with cassettes.use(tmp_path / f"{i}.json.xz", mode):
            return client.converse(modelId="m", messages=[{"role": "user", "content": [{"text": f"call {i}"}]}])

    with FakeLLM(Script(delay_s=0.05)) as fake:
        client = make_client("us-east-1", endpoint_url=fake.url.removesuffix("/v1"), exchange=exchange)
        answers: dict[int, dict] = {}
        threads = [threading.Thread(target=lambda i=i: answers.__setitem__(i, call(client, i, "all"))) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(fake.requests) == 8
    for i in range(8):
        (request, _), = _ours(tmp_path / f"{i}.json.xz", "none").data
        assert f"call {i}".encode() in request.body
    replayer = make_client("us-east-1", endpoint_url="http://127.0.0.1:9", exchange=exchange)  # nothing listens
    assert [call(replayer, i, "none")["output"] for i in range(8)] == [answers[i]["output"] for i in range(8)]


PATCHES_NOTHING = r'''
import http.client, json, socket, ssl, sys
from pathlib import Path

before = {"meta_path": list(sys.meta_path), "http_client": vars(http.client).copy(), "socket": socket.socket,
          "ssl": ssl.SSLContext.wrap_socket}
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings
from personalens_testkit.replay.router import exchange
from personalens_testkit.llm.bedrock import make_client
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.llm.base import ChatRequest, Message

folder, url = Path(sys.argv[1]), sys.argv[2]
cassettes = Cassettes(CassetteSettings(cassette_dir=folder, assistant="reference", record_mode="all"))
with cassettes.use(folder / "c.json.xz", "all"):
    make_client("us-east-1", endpoint_url=url, exchange=exchange).converse(
        modelId="m", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    OpenAICompatibleChat(spec="openai:m", base_url=url + "/v1", model="m", answers=exchange).complete(
        ChatRequest(messages=(Message("user", "hello"),), purpose="assistant"))
changed = [name for name, value in before["http_client"].items() if vars(http.client).get(name) is not value]
print(json.dumps({"vcr": sorted(n for n in sys.modules if n == "vcr" or n.startswith("vcr.")),
                  "meta_path": sorted(type(f).__module__ for f in sys.meta_path if f not in before["meta_path"]),
                  "http_client": changed,
                  "socket": socket.socket is before["socket"], "ssl": ssl.SSLContext.wrap_socket is before["ssl"],
                  "recorded": len(json.loads(__import__("lzma").decompress((folder / "c.json.xz").read_bytes()))["interactions"])}))
'''


def test_recording_patches_nothing_and_imports_no_vcrpy(tmp_path, monkeypatch):
    """In a fresh process, a Bedrock call and an OpenAI-compatible call recorded through the exchange: both land in
    the cassette, with no module of vcrpy imported, no import hook added, and the standard library's HTTP, socket
    and TLS classes as they were."""
    import subprocess
    import sys

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTTEST0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret-value-0001")
    with FakeLLM(Script(assistant_text="recorded")) as fake:
        done = subprocess.run([sys.executable, "-c", PATCHES_NOTHING, str(tmp_path), fake.url.removesuffix("/v1")],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert not [name for name in found.pop("meta_path") if name.startswith("personalens_testkit")]
    assert found == {"vcr": [], "http_client": [], "socket": True, "ssl": True, "recorded": 2}


@pytest.mark.parametrize("mode", ["all", "once", "new_episodes"])
def test_a_recording_stores_what_vcrpys_own_recording_stores(tmp_path, monkeypatch, mode):
    """A call recorded through the exchange is stored as vcrpy's own ``use_cassette`` stores the same call sent by
    a plain httpx client, with the same filters - the request scrubbed of its key and keeping only harmless
    headers, the answer decoded and scrubbed - and the caller reads the answer it was sent; vcrpy's own Cassette
    then plays our recording."""
    import vcr
    from vcr.patch import PATCHER_NAMES

    monkeypatch.setenv("OPENAI_API_KEY", "sk-recording-secret-0001")
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference", record_mode=mode))
    request = ChatRequest(messages=(Message("user", "hello sk-recording-secret-0001"),), purpose="assistant")
    theirs = vcr.VCR(before_record_request=cassettes.before_record_request,
                     before_record_response=cassettes.before_record_response, match_on=["method"])
    theirs.register_serializer("ours", JsonBytesSerializer)
    theirs.register_persister(VcrpyPersister)
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
    ((ours, our_answer),) = _ours(tmp_path / "ours.json.xz", "none").data
    ((stub, stub_answer),) = _ours(tmp_path / "theirs.json.xz", "none").data
    assert json.loads(ours.body) == json.loads(stub.body) and ours.uri == stub.uri and ours.headers == stub.headers
    assert {**our_answer, "headers": None} == {**stub_answer, "headers": None}
    assert set(our_answer["headers"]) == set(stub_answer["headers"]) == {"content-type"}
    assert b"sk-recording-secret-0001" not in ours.body and b"<OPENAI_API_KEY>" in ours.body
    assert b"sk-recording-secret-0001" not in our_answer["body"]["string"]
    vcrpys = _theirs(tmp_path / "ours.json.xz", "none")
    assert vcrpys.play_response(VcrRequest("POST", ours.uri, ours.body, {})) == our_answer


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
            assert model.complete(other).text == new  # recorded in this run: sent again, never played back in it
            assert len(fake.requests) == sent + 2
        model.close()
    with cassettes.use(path, "none") as cassette:
        assert [json.loads(r["body"]["string"])["choices"][0]["message"]["content"] for _, r in cassette.data] == [
            first, new, new] == ["first", "new", "new"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "x-gzip"])
def test_an_answer_recorded_compressed_is_stored_decoded_and_one_without_encoding_as_it_is(encoding):
    import gzip
    import zlib

    cassettes = Cassettes(CassetteSettings(cassette_dir=".", assistant="reference"), secrets=[])
    packed = zlib.compress(b'{"a": 1}') if encoding == "deflate" else gzip.compress(b'{"a": 1}')
    compressed = {"status": {"code": 200, "message": "OK"}, "body": {"string": packed},
                  "headers": {"Content-Type": ["application/json"], "Content-Encoding": [encoding]}}
    plain = _answer('{"a": 1}')
    assert cassettes.before_record_response(compressed)["body"]["string"] == b'{"a": 1}'
    assert cassettes.before_record_response(compressed)["headers"] == {"Content-Type": ["application/json"]}
    assert cassettes.before_record_response(plain) == _answer('{"a": 1}')


def test_an_answer_that_does_not_decompress_within_the_bound_is_stored_as_it_came(monkeypatch):
    import gzip

    from personalens_testkit.replay import cassettes as module
    from personalens_testkit.replay import store

    monkeypatch.setattr(store, "MAX_CASSETTE_BYTES", 1000)
    bomb = gzip.compress(b"0" * 100_000)
    answer = {"status": {"code": 200, "message": "OK"}, "body": {"string": bomb},
              "headers": {"Content-Encoding": ["gzip"]}}
    assert module.decoded(answer) is answer
    broken = {**answer, "body": {"string": b"not gzip"}}
    assert module.decoded(broken) is broken
    other = {**answer, "headers": {"Content-Encoding": ["br"]}}
    assert module.decoded(other) is other
