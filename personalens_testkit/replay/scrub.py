"""What a cassette may hold: requests made location-independent and stripped of every secret.

Applied by vcrpy to each request before it is matched and before it is recorded, and to
each response before it is recorded:

- loopback hosts and ports become ``local`` (an embedded or test server on another port
  still replays); Bedrock's regional host loses its region (a replay needs no region);
- headers are kept only if harmless (an allow-list: content type and our call label),
  so auth headers, SigV4 signatures, session tokens, cookies and API keys never land;
- query parameters and JSON body fields named like secrets are replaced by ``<redacted>``;
- an address is scrubbed like a body (:func:`scrub_uri`): a token in its path is a secret value (see
  :mod:`personalens_testkit.secrets`), in whatever spelling;
- the values of secret environment variables are replaced by ``<NAME>`` wherever they appear,
  in every form a file of ours can hold them (see :mod:`personalens_testkit.secrets`).

Matching a request with a recorded one is :mod:`.matching`.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..secrets import scrub_text

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
#: how a JSON key that matches _SECRET_NAME ends (a cheap test on the raw bytes before parsing them; substring
#: searches: a case-insensitive regex with these alternatives cost nine times as much on a prompt)
_SECRET_KEY_ENDINGS = (b'key"', b'token"', b'secret"', b'password"', b'passwd"', b'authorization"', b'signature"',
                       b'sig"', b'credential"', b"x-amz-")
#: and what else a body whose JSON has a key named like a secret may hold instead of such an ending: an escape (a
#: key may be written with escapes), a line break before a closing quote (``$`` matches before a last line break),
#: or a character that a case-insensitive match reads as an ASCII letter (dotted and dotless I, long S, Kelvin)
_SECRET_KEY_HINTS = _SECRET_KEY_ENDINGS + (b"\\u", b'\\n"', *(c.encode("utf-8") for c in "\u0130\u0131\u017f\u212a"))


@functools.lru_cache(maxsize=1024)
def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


@functools.lru_cache(maxsize=256)  # a run calls a few addresses, each many times
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


def scrub_uri(uri: str, secrets: Iterable[tuple[str, str]]) -> str:
    """A request's address as a cassette keeps it: :func:`normalise_uri`, and every secret in it (a token in its
    path or query, a password before its host) replaced like a body's."""
    return _scrub_uri(uri, tuple(secrets))


@functools.lru_cache(maxsize=256)  # a run calls a few addresses, each many times
def _scrub_uri(uri: str, secrets: tuple[tuple[str, str], ...]) -> str:
    return scrub_text(normalise_uri(uri).encode("utf-8"), secrets).decode("utf-8")


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if _secret_field(k, v) else _redact_json(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple: as json.dumps writes it (a list)
        return [_redact_json(v) for v in value]
    return value


def _secret_field(key: Any, value: Any) -> bool:
    # a str key as json.dumps writes it (a str subclass's own __str__ may say another name)
    return isinstance(value, (str, int)) and is_secret_name(key if isinstance(key, str) else str(key))


_NESTED = (dict, list, tuple)


def _has_secret_field(value: Any) -> bool:
    """Whether :func:`_redact_json` would redact anything in ``value`` (a walk without building a copy)."""
    waiting = [value]
    while waiting:
        item = waiting.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(inner, _NESTED):
                    waiting.append(inner)
                elif _secret_field(key, inner):
                    return True
        elif isinstance(item, (list, tuple)):
            waiting += [inner for inner in item if isinstance(inner, _NESTED)]
    return False


_UNPARSED = object()


def _may_name_a_secret(data: bytes) -> bool:
    """False only for a body whose JSON cannot have a key named like a secret (:data:`_SECRET_KEY_HINTS`)."""
    lowered = data.lower()
    return any(hint in lowered for hint in _SECRET_KEY_HINTS)


def scrub_body(body: bytes | str | None, secrets: Iterable[tuple[str, str]], *, parsed: Any = _UNPARSED,
               spellings: bool = True) -> bytes | None:
    """A request body without secrets: JSON fields named like secrets redacted, known secret values replaced.
    ``parsed``: the JSON value the caller encoded ``body`` from (a client's payload), so that it is not parsed again;
    its keys are read as they are (a walk of a prompt's payload costs a sixth of the byte test, which every prompt
    passes anyway: a message ending in a line break holds ``\\n"``). ``spellings``: see
    :func:`~personalens_testkit.secrets.scrub_text`."""
    if body is None:
        return None
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if parsed is _UNPARSED:
        parsed = None
        if _may_name_a_secret(data):  # else no key is named like a secret
            try:
                parsed = json.loads(data)
            except ValueError:
                pass
    if isinstance(parsed, (dict, list)) and _has_secret_field(parsed):
        redacted = _redact_json(parsed)
        if redacted != parsed:
            data = json.dumps(redacted, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return scrub_text(data, secrets, spellings=spellings)


def keep_headers(headers: Mapping[str, Any], allowed: set[str]) -> dict[str, Any]:
    return {k: v for k, v in headers.items() if k.lower() in allowed}


def scrub_response(response: dict[str, Any], secrets: Iterable[tuple[str, str]]) -> dict[str, Any]:
    response["headers"] = keep_headers(response.get("headers") or {}, _KEEP_RESPONSE_HEADERS)
    body = response.get("body") or {}
    if isinstance(body.get("string"), (bytes, str)):
        raw = body["string"]
        body["string"] = scrub_text(raw.encode("utf-8") if isinstance(raw, str) else raw, secrets)
    return response


def scrub_request_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    return keep_headers(headers, _KEEP_REQUEST_HEADERS)
