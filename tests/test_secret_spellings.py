"""Secrets in every spelling and in addresses (issue 43, item 5): the redaction reads text through the view the
injection check reads it through (textview: zero-width and format characters dropped, full-width and look-alike
letters folded), escapes of any kind decoded (``\\uXXXX``, ``\\xXX``, ``%XX``, ``&#N;``, JSON's ``\\/`` and
``\\n``), whitespace cut into it ignored; an address's path is a secret (a gateway token in OPENAI_BASE_URL).

Generated both ways (tests/support/secret_corpus.py): thousands of spellings, each read back by every redactor
as the placeholder; the shipped data and dialogues, under random secrets, touched nowhere.
"""

from __future__ import annotations

import base64
import glob
import json
import lzma
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.replay.scrub import scrub_uri
from personalens_testkit.secret_spellings import respelled
from personalens_testkit import secrets
from personalens_testkit.secrets import redact, redact_json, scrub_text, secret_values

from .support import secret_corpus
from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project
from .test_reliability import ALARM, LIVE, assert_rows_are_cases, run_rows

ROOT = Path(__file__).resolve().parent.parent


def redactors(text: str, secrets: list[tuple[str, str]]) -> dict[str, str]:
    return {"redact": redact(text, secrets), "scrub_text": scrub_text(text.encode(), secrets).decode(),
            "redact_json": json.loads(redact_json(json.dumps({"t": text}), secrets))["t"]}


def leftover(out: str, before: str, after: str) -> str | None:
    """What is left of a spelling between its context once redacted (None: the context itself was changed)."""
    if not (out.startswith(before) and out.endswith(after)) or "<K>" not in out:
        return None
    return out[len(before):len(out) - len(after)].replace("<K>", "", 1)


@settings(max_examples=3000, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(["Your key is ", "token=", '{"auth": "', ""]),
       st.sampled_from([" - keep it.", '"}', "&x=1", ""]))
def test_every_generated_spelling_is_redacted_by_every_redactor(rng, before, after):
    value = secret_corpus.secret(rng)
    spelled = secret_corpus.spelling(rng, value)
    for name, out in redactors(before + spelled + after, [(value, "<K>")]).items():
        left = leftover(out, before, after)
        assert left is not None, (name, value, spelled, out)
        # all of it, or all but the base64 characters that also hold the bits of the bytes around it
        assert len(re.sub(r"\s|\\", "", left)) <= 10, (name, value, spelled, out)


def shipped_texts() -> list[str]:
    """Benign text: every profile and task of the bundled sample, every message of the shipped dialogues."""
    texts = []
    data = ROOT / "personalens_testkit" / "data"
    for path in sorted(data.rglob("*.json")) + sorted(data.rglob("*.jsonl")):
        texts.append(path.read_text(encoding="utf-8"))
    for path in sorted(glob.glob(str(ROOT / "cassettes" / "reference" / "*.json.xz"))):
        for item in json.loads(lzma.decompress(Path(path).read_bytes()))["interactions"]:
            texts.append(item["request"]["body"] or "")
    return texts


def test_benign_text_is_touched_by_no_generated_secret():
    texts = shipped_texts()
    assert len(texts) > 500 and sum(map(len, texts)) > 5_000_000
    rng = random.Random(43)
    secrets = [(secret_corpus.secret(rng), f"<S{i}>") for i in range(40)]
    joined = "\n".join(texts)
    assert redact(joined, secrets) == joined
    assert scrub_text(joined.encode(), secrets) == joined.encode()


@pytest.mark.parametrize("spelled", [
    "sk-ab\u200dcdef\u200b123456", "\uff53\uff4b\uff0d\uff41\uff42cdef123456", "sk-\u0430bcdef123456",
    base64.b64encode(b"sk-abcdef123456").decode().replace("/", "\\/"),
    "sk-abcdef\n123456", "sk-abcdef\\n123456", "sk-abc&#100;ef%31%323456", "sk\u2010abcdef123456",
    "sk-abc\ufe0fdef\u034f123\u3164456", "sk-abc%E2%80%8Bdef123456", "sk-abc\\u{64}ef\\061\\0623456",
    "\uff53\uff4b-abc".encode().hex("%", 1).upper().join(["%", ""]) + "def123456",
])
def test_the_issues_spellings_are_redacted(spelled):
    assert "<K>" in redact(f"x {spelled} y", [("sk-abcdef123456", "<K>")]), spelled


def test_a_slash_written_as_json_writes_it_in_a_secret_is_redacted():
    secret = "ab/cd+ef/gh12345678"  # an AWS secret access key holds slashes
    assert redact_json(json.dumps({"k": secret}).replace("/", "\\/"), [(secret, "<AWS>")]) == '{"k": "<AWS>"}'


# -- addresses ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, found", [
    ("https://user:pass-0123@gw.example/v1", [("user:pass-0123", "<GW_URL>"), ("pass-0123", "<GW_URL>")]),
    ("postgres://app:s3cr%40t-pass@db/app", [("app:s3cr%40t-pass", "<GW_URL>"), ("app:s3cr@t-pass", "<GW_URL>"),
                                            ("s3cr%40t-pass", "<GW_URL>"), ("s3cr@t-pass", "<GW_URL>")]),
    ("https://x-access-token@gw.example", [("x-access-token", "<GW_URL>")]),
    ("https://gw.example/t/tok-0123456789/v1", []), ("https://api.github.com/graphql", []),
    ("http://127.0.0.1:8080/v1", []), ("not a url /t/tok-0123456789", []),
])
def test_an_addresss_credentials_are_secrets_and_a_variables_path_is_not(value, found, monkeypatch):
    """What precedes an address's @ is a credential, as written and decoded; the path of a variable's address is
    ordinary text (GITHUB_GRAPHQL_URL's /graphql), unless the run calls that address (below)."""
    monkeypatch.setattr(secrets, "_addresses", ())  # none the run calls (an in-process run registers its own)
    values = secret_values({"GW_URL": value})
    assert sorted(secret for secret, _ in values if secret != value) == sorted(secret for secret, _ in found)
    assert all(placeholder == "<GW_URL>" for _, placeholder in values)


def test_the_path_of_an_address_the_run_calls_is_a_secret(monkeypatch):
    monkeypatch.setattr(secrets, "_addresses", ())
    secrets.register_addresses({"openai_base_url": "https://gw.example/t/tok-0123456789/v1", "local_url": ""})
    values = secret_values({})
    assert ("/t/tok-0123456789/v1", "<openai_base_url:path>") in values
    assert scrub_uri("https://gw.example/t/tok-0123456789/v1/chat/completions", values) == \
        "https://gw.example<openai_base_url:path>/chat/completions"
    # the token echoed in a JSON body with its slashes escaped: cut whole, the JSON still valid
    body = b'{"see": "https:\\/\\/gw.example\\/t\\/tok-0123456789\\/v1"}'
    assert json.loads(scrub_text(body, values)) == {"see": "https://gw.example<openai_base_url:path>"}


def test_a_gateway_token_in_openai_base_url_reaches_no_file(pytester, monkeypatch):
    token = "gwtok-7d1e93c5b2a84f60"
    with FakeLLM(Script(terminate_after=1)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url.removesuffix("/v1") + f"/t/{token}/v1")
        suite_project(pytester, 'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                'assistant_model = "openai:fake-bot"\nretry_initial_s = 0.01\n')
        result, rows = run_rows(pytester, *ALARM, *LIVE, "-k", "task-1")
        assert_rows_are_cases(result, rows)
        assert [row["status"] for row in rows] == ["passed"], [row.get("error") for row in rows]
        assert fake.requests  # the calls went through the gateway's address
    texts = {}
    for path in pytester.path.rglob("*"):
        if path.is_file():
            data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
            texts[str(path.relative_to(pytester.path))] = data.decode("utf-8", "replace")
    assert any(name.endswith(".json.xz") for name in texts)
    cassette = next(text for name, text in texts.items() if name.endswith(".json.xz"))
    assert "<openai_base_url:path>/chat/completions" in cassette
    for name, text in texts.items():
        assert respelled(text, ((token, "<T>"),)) == text, name  # in no spelling the view sees through
    # and the recording replays, offline, where the gateway's token is not set at all
    monkeypatch.delenv("OPENAI_BASE_URL")
    result, rows = run_rows(pytester, *ALARM, "-k", "task-1")
    assert [row["status"] for row in rows] == ["passed"], [row.get("error") for row in rows]


def test_a_recording_that_holds_a_spelled_secret_replays(pytester, tmp_path, monkeypatch):
    """A replay looks a call up by a quick key (the secrets' plain forms only); a prompt that holds a secret spelled
    otherwise - a bot's reply quoted to the user agent - misses it and is found the full way, never a miss."""
    from .test_reliability import python_entry
    from .test_untrusted_text import SPELLER, TOKEN

    monkeypatch.setenv("TEAM_API_KEY", TOKEN)
    with FakeLLM(Script(terminate_after=2)) as fake:
        suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                f'openai_base_url = "{fake.url}"\nretry_initial_s = 0.01\n'
                                + python_entry("speller", SPELLER, tmp_path))
        result, rows = run_rows(pytester, "--assistant", "speller", *ALARM, *LIVE, "-k", "task-1")
        assert [row["status"] for row in rows] == ["passed"], [row.get("error") for row in rows]
        recorded = len(fake.requests)
    result, rows = run_rows(pytester, "--assistant", "speller", *ALARM, "-k", "task-1")  # the model server is gone
    assert_rows_are_cases(result, rows)
    assert [row["status"] for row in rows] == ["passed"], [row.get("error") for row in rows]
    assert recorded and "<TEAM_API_KEY>" in rows[0]["transcript"][1]["content"]
