"""What a cassette may hold: requests made location-independent and stripped of every secret.

Applied by vcrpy to each request before it is matched and before it is recorded, and to
each response before it is recorded:

- loopback hosts and ports become ``local`` (an embedded or test server on another port
  still replays); Bedrock's regional host loses its region (a replay needs no region);
- headers are kept only if harmless (an allow-list: content type and our call label),
  so auth headers, SigV4 signatures, session tokens, cookies and API keys never land;
- query parameters and JSON body fields named like secrets are replaced by ``<redacted>``;
- the values of secret environment variables are replaced by ``<NAME>`` wherever they appear,
  in every form a file of ours can hold them: as they are, JSON-escaped (``\"``, ``\\uXXXX``,
  escaped twice for JSON inside JSON) and URL-encoded. A variable is secret when its name looks
  like one (``*API_KEY*``, ``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``,
  ``*_PASS``, ``*_DSN``, ``*CREDENTIAL*``, ``AWS_ACCESS_KEY_ID``), when the project's config names
  it (``secret_env = [...]``), or when its value is a URL with a password in it
  (``DATABASE_URL=postgres://user:pw@host/db``: the URL and the password). Values shorter
  than 8 characters are left alone (they would match ordinary text).

The same :func:`redact` cleans every message the testkit prints.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, quote, quote_plus, urlencode, urlsplit, urlunsplit

REDACTED = "<redacted>"
CALL_HEADER = "x-personalens-call"
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "[::1]"}
_BEDROCK_HOST = re.compile(r"^(bedrock-runtime)(?:-fips)?\.[a-z0-9-]+\.(amazonaws\.com(?:\.cn)?)$")
_KEEP_REQUEST_HEADERS = {"content-type", CALL_HEADER}
_KEEP_RESPONSE_HEADERS = {"content-type"}
_SECRET_NAME = re.compile(
    r"(^|[_-])(api[_-]?key|apikey|key|token|access[_-]?token|auth[_-]?token|session[_-]?token|secret|"
    r"client[_-]?secret|password|passwd|authorization|signature|sig|credential|x-amz-[a-z-]+)$",
    re.IGNORECASE,
)
#: how a JSON key that matches _SECRET_NAME ends (a cheap test on the raw bytes before parsing them)
_SECRET_KEY_ENDINGS = (b'key"', b'token"', b'secret"', b'password"', b'passwd"', b'authorization"', b'signature"',
                       b'sig"', b'credential"', b"x-amz-")
_SECRET_ENV = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY_ID|CREDENTIAL|(^|_)KEY$|(^|_)PASS$|(^|_)DSN$)", re.IGNORECASE)
#: the shortest value treated as a secret
MIN_SECRET_CHARS = 8
_extra_names: tuple[str, ...] = ()


def register_secret_names(names: Iterable[str]) -> None:
    """Also treat these environment variables as secrets (the config's ``secret_env``), in this process."""
    global _extra_names
    _extra_names = tuple(sorted(set(_extra_names) | set(names)))


def secret_values(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(value, placeholder) for every secret environment variable worth hiding, longest first."""
    env = os.environ if env is None else env
    # pytest sets PYTEST_CURRENT_TEST for every test phase: left out, so the memo holds across tests
    return list(_secret_values(tuple(item for item in env.items() if item[0] != "PYTEST_CURRENT_TEST"), _extra_names))


def _url_password(value: str) -> str | None:
    if "://" not in value or "@" not in value:
        return None
    try:
        return urlsplit(value.strip()).password
    except ValueError:
        return None


@functools.lru_cache(maxsize=8)
def _secret_values(items: tuple[tuple[str, str], ...], extra: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Memoised on the environment's contents: every transcript and row is redacted."""
    found: dict[str, str] = {}
    for name, value in items:
        password = _url_password(value)
        if _SECRET_ENV.search(name) or name in extra or password:
            for secret in (value, password):
                if secret and len(secret) >= MIN_SECRET_CHARS:
                    found.setdefault(secret, f"<{name}>")
    return tuple(sorted(found.items(), key=lambda item: -len(item[0])))


def _json_text(text: str, *, ascii_only: bool = False) -> str:
    """How a string's characters appear inside a JSON string (quotes, backslashes, controls escaped;
    with ``ascii_only``, every other non-ASCII character as ``\\uXXXX``)."""
    return json.dumps(text, ensure_ascii=ascii_only)[1:-1]


@functools.lru_cache(maxsize=8)
def secret_forms(secrets: tuple[tuple[str, str], ...], *, json_only: bool = False) -> tuple[tuple[str, str], ...]:
    """Every form a secret can take in a file of ours, with its placeholder, longest first: as it is,
    JSON-escaped (also as ASCII, and twice over), URL-encoded. ``json_only``: only forms that can
    stand inside a JSON string (for JSON text, where a raw quote would be syntax)."""
    forms: dict[str, str] = {}
    for value, placeholder in secrets:
        once = {_json_text(value), _json_text(value, ascii_only=True)}
        twice = {_json_text(form) for form in once}
        encoded = {quote(value, safe=""), quote_plus(value), quote(value)}
        candidates = once | twice | encoded | (set() if json_only else {value})
        for form in candidates:
            if json_only and form != _json_text(form) and form not in once | twice:
                continue
            forms.setdefault(form, placeholder)
    return tuple(sorted(forms.items(), key=lambda item: -len(item[0])))


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def normalise_uri(uri: str) -> str:
    parts = urlsplit(uri)
    host = (parts.hostname or "").lower()
    netloc = parts.netloc
    if host in _LOOPBACK:
        netloc = "local"
    elif (match := _BEDROCK_HOST.match(host)) is not None:
        netloc = f"{match.group(1)}.{match.group(2)}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if is_secret_name(k) else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_name(str(k)) and isinstance(v, (str, int)) else _redact_json(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v) for v in value]
    return value


def scrub_text(data: bytes, secrets: Iterable[tuple[str, str]]) -> bytes:
    """Bytes with every form of every secret replaced by its placeholder."""
    for form, placeholder in secret_forms(tuple(secrets)):
        encoded = form.encode("utf-8")
        if encoded in data:
            data = data.replace(encoded, placeholder.encode("utf-8"))
    return data


def scrub_body(body: bytes | str | None, secrets: Iterable[tuple[str, str]]) -> bytes | None:
    """A request body without secrets: JSON fields named like secrets redacted, known secret values replaced."""
    if body is None:
        return None
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    parsed = None
    lowered = data.lower()
    if any(ending in lowered for ending in _SECRET_KEY_ENDINGS):  # else no key is named like a secret
        try:
            parsed = json.loads(data)
        except ValueError:
            pass
    if isinstance(parsed, (dict, list)):
        redacted = _redact_json(parsed)
        if redacted != parsed:
            data = json.dumps(redacted, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return scrub_text(data, secrets)


def keep_headers(headers: Mapping[str, Any], allowed: set[str]) -> dict[str, Any]:
    return {k: v for k, v in headers.items() if k.lower() in allowed}


def canonical_body(body: bytes | str | None) -> bytes:
    """The body as matched: JSON re-serialised with sorted keys, anything else as its bytes."""
    if body is None:
        return b""
    return _canonical(body.encode("utf-8") if isinstance(body, str) else bytes(body))


@functools.lru_cache(maxsize=4096)
def _canonical(data: bytes) -> bytes:
    """Memoised: a replay compares each request with every recorded one, so recorded bodies recur."""
    try:
        parsed = json.loads(data)
    except ValueError:
        return data
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def call_matcher(r1: Any, r2: Any) -> None:
    """vcrpy matcher, one for the whole call: method, scheme, host, port, path and query (of the
    normalised URI) and the canonical JSON body. One matcher instead of seven: vcrpy evaluates
    every matcher against every recorded request; where a body differs is worked out only for
    a miss's message."""
    if not same_call(r1, r2):
        raise AssertionError("a different method or address" if (r1.method, r1.uri) != (r2.method, r2.uri)
                             else "the JSON bodies differ")


def same_call(r1: Any, r2: Any) -> bool:
    """What :func:`call_matcher` checks, as a yes or no."""
    return r1.method == r2.method and r1.uri == r2.uri and canonical_body(r1.body) == canonical_body(r2.body)


def body_difference(recorded: bytes | str | None, now: bytes | str | None, *, shown: int = 60) -> str:
    """Where two bodies first differ, compared canonically ("" when they match)."""
    a = canonical_body(recorded).decode("utf-8", "replace")
    b = canonical_body(now).decode("utf-8", "replace")
    if a == b:
        return ""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - 20)
    return f"differs at character {at}: recorded {a[start:at + shown]!r}, now {b[start:at + shown]!r}"


def scrub_response(response: dict[str, Any], secrets: Iterable[tuple[str, str]]) -> dict[str, Any]:
    response["headers"] = keep_headers(response.get("headers") or {}, _KEEP_RESPONSE_HEADERS)
    body = response.get("body") or {}
    if isinstance(body.get("string"), (bytes, str)):
        raw = body["string"]
        body["string"] = scrub_text(raw.encode("utf-8") if isinstance(raw, str) else raw, secrets)
    return response


def scrub_request_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    return keep_headers(headers, _KEEP_REQUEST_HEADERS)


def redact(value: Any, secrets: Iterable[tuple[str, str]] | None = None) -> Any:
    """Any JSON-like value (rows, messages, transcripts) with secret values replaced by their placeholders.

    A structure is searched as its JSON text and parsed back only if a secret is in it.
    """
    found = secret_values() if secrets is None else list(secrets)
    if not found:
        return value
    if isinstance(value, str):
        for form, placeholder in secret_forms(tuple(found)):
            if form in value:
                value = value.replace(form, placeholder)
        return value
    if not isinstance(value, (dict, list, tuple)):
        return value
    text = json.dumps(value, ensure_ascii=False)
    redacted = redact_json(text, found)
    return value if redacted is text else json.loads(redacted)


def redact_json(text: str, secrets: Iterable[tuple[str, str]] | None = None) -> str:
    """JSON text with every secret value, in every form JSON writes it (escaped, as ASCII, escaped
    twice, URL-encoded), replaced by its placeholder; the very same string if none is in it."""
    found = secret_values() if secrets is None else list(secrets)
    forms = secret_forms(tuple(found), json_only=True)
    if not any(form in text for form, _ in forms):
        return text
    for form, placeholder in forms:
        text = text.replace(form, placeholder)
    return text
