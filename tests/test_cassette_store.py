"""Cassette storage and hygiene: file names, the bytes-holding serializer, the atomic xz
persister, secret scrubbing, matching, and botocore's retries of a replay miss."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from personalens_testkit.replay.cassette import Request

from personalens_testkit.replay.matching import canonical_body
from personalens_testkit.replay.scrub import REDACTED, is_secret_name, normalise_uri, scrub_body
from personalens_testkit.secrets import redact, redact_json, secret_values
from personalens_testkit.replay.store import JsonBytesSerializer, XzPersister, assistant_folder, cassette_path
from personalens_testkit.replay.cassettes import Cassettes, CassetteSettings


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_assistant_folders_are_safe_and_never_shared(a, b):
    folder = assistant_folder(a)
    assert "/" not in folder and folder not in (".", "..") and not folder.startswith(".")
    if a != b:
        assert assistant_folder(a) != assistant_folder(b)


def test_cassette_paths_are_readable():
    assert cassette_path(Path("c"), "reference", "user7-SD-Alarm-task-1") == Path("c/reference/user7-SD-Alarm-task-1.json.xz")
    team = cassette_path(Path("c"), "team/bot v2", "user7-MD-task-3")
    assert team.parent.name.startswith("team-bot-v2-") and team.name == "user7-MD-task-3.json.xz"
    judged = cassette_path(Path("c"), "reference", "user7-MD-task-3", judge="bedrock:anthropic.claude")
    assert judged.parent.parent.name == "rejudged" and judged.parent.name.startswith("bedrock-anthropic.claude-")


@given(st.binary(max_size=300), st.text(max_size=300))
def test_the_serializer_holds_any_bytes_and_text(raw, text):
    data = {"interactions": [{"request": {"body": raw}, "response": {"body": {"string": text}}}], "version": 1}
    assert JsonBytesSerializer.deserialize(JsonBytesSerializer.serialize(data)) == data


def test_the_persister_writes_whole_xz_files_atomically(tmp_path):
    path = tmp_path / "deep" / "folder" / "s.json.xz"
    cassette = {"requests": [Request("POST", "http://local/v1/x", b'{"a": 1}', {})],
                "responses": [{"status": {"code": 200, "message": "OK"}, "headers": {}, "body": {"string": b"\xff\x00ok"}}]}
    XzPersister.save_cassette(path, cassette, JsonBytesSerializer)
    assert [p.name for p in path.parent.iterdir()] == ["s.json.xz"]  # no temporary file left
    assert json.loads(lzma.decompress(path.read_bytes()))["version"] == 1
    requests, responses, metadata = XzPersister.load_cassette(path, JsonBytesSerializer)
    assert requests[0].uri == "http://local/v1/x" and responses[0]["body"]["string"] == b"\xff\x00ok"
    assert metadata == {"scenario": "s"}  # the scenario it records, from its name
    path.write_bytes(b"not xz")
    from personalens_testkit.errors import CassetteError
    with pytest.raises(CassetteError, match="s.json.xz: not an xz file"):
        XzPersister.load_cassette(path, JsonBytesSerializer)


@pytest.mark.parametrize("uri, expected", [
    ("http://127.0.0.1:41234/v1/chat/completions", "http://local/v1/chat/completions"),
    ("http://localhost:8080/v1/chat/completions", "http://local/v1/chat/completions"),
    ("https://bedrock-runtime.eu-west-1.amazonaws.com/model/m/converse", "https://bedrock-runtime.amazonaws.com/model/m/converse"),
    ("https://gw.example.com/v1/chat?api-key=s3cr3t&api-version=2024", f"https://gw.example.com/v1/chat?api-key={REDACTED}&api-version=2024"),
    ("https://x.example.com/q?X-Amz-Signature=abc&key=k", f"https://x.example.com/q?X-Amz-Signature={REDACTED}&key={REDACTED}"),
])
def test_uris_lose_ports_regions_and_secrets(uri, expected):
    assert normalise_uri(uri).replace("%3C", "<").replace("%3E", ">") == expected


def test_secret_names_and_values_are_scrubbed_but_token_counts_are_not():
    assert is_secret_name("api_key") and is_secret_name("x-api-key") and is_secret_name("sessionToken".lower())
    assert not is_secret_name("max_tokens") and not is_secret_name("prompt_tokens") and not is_secret_name("monkey")
    secrets = secret_values({"TEAM_TOKEN": "tok-planted-1234", "SHORT_TOKEN": "abc", "HOME": "/root-planted-1234"})
    assert secrets == [("tok-planted-1234", "<TEAM_TOKEN>")]
    body = json.dumps({"max_tokens": 5, "api_key": "k-1", "messages": [{"content": "my tok-planted-1234"}]})
    scrubbed = json.loads(scrub_body(body, secrets))
    assert scrubbed == {"max_tokens": 5, "api_key": REDACTED, "messages": [{"content": "my <TEAM_TOKEN>"}]}


def test_bodies_match_as_canonical_json():
    assert canonical_body('{"b": 1, "a": [1, 2]}') == canonical_body(b'{"a":[1,2],"b":1}')
    assert canonical_body(b"\xff raw") == b"\xff raw"


def test_botocore_never_retries_a_replay_miss(tmp_path, monkeypatch):
    """A miss in botocore's ``before-send`` is raised as it is, once: never taken for a connection error and retried
    (vcrpy's was: 8 attempts)."""
    from personalens_testkit.errors import CassetteMissError
    from personalens_testkit.llm.bedrock import make_client
    from personalens_testkit.replay.router import exchange

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = make_client(None, replay_only=True, exchange=exchange)  # no credentials, no region: placeholders
    attempts = []
    client.meta.events.register_first("before-send.*", lambda **kwargs: attempts.append(1))
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference"))
    with cassettes.use(tmp_path / "empty.json.xz", "none"):
        with pytest.raises(CassetteMissError) as caught:
            client.converse(modelId="m", messages=[{"role": "user", "content": [{"text": "hi"}]}])
    assert caught.value.reason == "cassette_not_found"
    assert len(attempts) == 1


def test_recorded_calls_keep_no_secret_and_no_headers_but_the_harmless(tmp_path, monkeypatch):
    from personalens_testkit.replay.router import exchange

    monkeypatch.setenv("PLANTED_API_KEY", "planted-value-0001")
    cassettes = Cassettes(CassetteSettings(cassette_dir=tmp_path, assistant="reference", record_mode="all"))
    path = tmp_path / "h.json.xz"
    answer = {"status": {"code": 200, "message": "OK"}, "body": {"string": b'{"echo": "planted-value-0001"}'},
              "headers": {"content-type": ["application/json"], "set-cookie": ["s=planted-value-0001"],
                          "x-request-id": ["planted-value-0001"]}}
    with cassettes.use(path, "all"):
        got = exchange("POST", "http://127.0.0.1:8/v1/chat/completions?key=planted-value-0001",
                       b'{"messages": [{"role": "user", "content": "planted-value-0001"}]}', None, lambda: answer)
    assert got is answer and b"planted-value-0001" in got["body"]["string"]  # the caller reads what was sent
    stored = lzma.decompress(path.read_bytes()).decode()
    assert "planted-value-0001" not in stored
    (interaction,) = json.loads(stored)["interactions"]
    assert set(interaction["request"]["headers"]) == {"content-type"}
    assert set(interaction["response"]["headers"]) == {"content-type"}
    assert interaction["request"]["uri"].startswith("http://local/v1/chat/completions?key=")


@given(st.text(min_size=8, max_size=30).filter(lambda t: t.strip() == t and "<" not in t))
def test_rows_lose_secret_values_however_json_escapes_them(secret):
    """Rows are redacted as JSON text: a secret with quotes, backslashes or control characters is
    found in its escaped form, and the text parses back to the row with the placeholder."""
    secrets = [(secret, "<PLANTED_TOKEN>")]
    row = {"reply": f"the key is {secret}!", "calls": [{"label": secret}], "n": 3}
    text = redact_json(json.dumps(row, ensure_ascii=False), secrets)
    assert secret not in json.loads(text)["reply"] and secret not in json.loads(text)["calls"][0]["label"]
    assert json.loads(text) == redact(row, secrets) == {
        "reply": "the key is <PLANTED_TOKEN>!", "calls": [{"label": "<PLANTED_TOKEN>"}], "n": 3}


def test_a_rejudging_cassette_moved_to_another_judge_is_refused_naming_it(tmp_path):
    from personalens_testkit.errors import CassetteError

    cassette = {"requests": [Request("POST", "http://local/v1/x", b"{}", {})],
                "responses": [{"status": {"code": 200, "message": "OK"}, "headers": {}, "body": {"string": b"{}"}}]}
    recorded = tmp_path / "bot" / "rejudged" / "judge-a" / "s.json.xz"
    XzPersister.save_cassette(recorded, cassette, JsonBytesSerializer)
    assert XzPersister.load_cassette(recorded, JsonBytesSerializer)[2] == {"scenario": "s", "judge": "judge-a"}
    moved = tmp_path / "bot" / "rejudged" / "judge-b" / "s.json.xz"
    moved.parent.mkdir(parents=True)
    moved.write_bytes(recorded.read_bytes())
    with pytest.raises(CassetteError, match="holds the recording of judge 'judge-a', not of 'judge-b'"):
        XzPersister.load_cassette(moved, JsonBytesSerializer)
