"""Secrets: which environment variables hold one, every form a value can take in a file, and redaction.

A variable is secret when its name looks like one (``*API_KEY*``, ``*_KEY``, ``*TOKEN*``,
``*SECRET*``, ``*PASSWORD*``, ``*PASSWD*``, ``*_PASS``, ``*_DSN``, ``*CREDENTIAL*``,
``AWS_ACCESS_KEY_ID``), when the project's config names it (``secret_env = [...]``,
registered by the run), or when its value is a URL with a password in it
(``DATABASE_URL=postgres://user:pw@host/db``: the URL and the password). Of any variable whose value is an
address (a URL with a host), what precedes its ``@`` is a secret, as written and decoded. Of each address the run
itself calls (:func:`register_addresses`: ``openai_base_url``, a model's or a bot's URL), what follows the host is a
secret too (``OPENAI_BASE_URL=https://gw/t/<token>/v1``: ``/t/<token>/v1``, shown as ``<openai_base_url:path>``),
so an address is scrubbed wherever it is written - a cassette's request URI, an error message, a body that echoes
it. Values shorter than 8 characters are left alone (they would match ordinary text).

Every file the testkit writes (cassettes, rows, transcripts, reports) and every line it
prints goes through :func:`redact` / :func:`redact_json` / :func:`scrub_text`, which replace
a value in each form a file can hold it: as it is, JSON-escaped (``\\"``, ``\\uXXXX``,
escaped twice for JSON inside JSON), URL-encoded, in base64 at any offset - and in any spelling that
the view of :mod:`.secret_spellings` sees through, in any mix: escapes character by character (a secret spelled
``\\u0073\\u006b...`` by a bot, ``%73k-...``, ``\\x73k-...``, ``\\/``, HTML's ``&#115;``), what
:mod:`.textview` folds for the injection check too (zero-width joiners, full-width letters, look-alikes), whitespace
cut into it (base64 wrapped at 76 columns).
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Iterable, Mapping
from urllib.parse import quote, quote_plus, unquote, urlsplit

from .secret_spellings import base64_cores, raw_bytes, respelled

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
    return list(_secret_values(_process_environment() if env is None else _environment(env), _extra_names,
                               _addresses))


def _environment(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables' (name, value), read safely while other threads set and delete variables (pytest sets
    and deletes PYTEST_CURRENT_TEST around every test phase): the names are copied at once, and a name
    deleted since is skipped. PYTEST_CURRENT_TEST is left out, so the memo holds across tests."""
    pairs = ((name, env.get(name)) for name in list(env))
    return tuple((name, value) for name, value in pairs if value is not None and name != "PYTEST_CURRENT_TEST")


def _process_environment() -> tuple[tuple[str, str], ...]:
    """:func:`_environment` of ``os.environ``, through its public mapping."""
    return _environment(os.environ)


def _address_credentials(name: str, value: str) -> list[tuple[str, str]]:
    """What precedes an address's ``@`` (a URL with a host: ``https://user:pw@host``) and its password, as written
    and decoded (``s3cr%40t`` is ``s3cr@t``), with their placeholder; nothing for any other value."""
    parts = _address(value)
    if parts is None or "@" not in parts.netloc:
        return []
    found = [parts.netloc.rsplit("@", 1)[0], parts.password or ""]
    return [(secret, f"<{name}>") for secret in found + [unquote(secret) for secret in found]]


#: variables that hold request headers (``name=value,...``, values URL-encoded): every value is a credential - an
#: OpenTelemetry collector's key (``x-honeycomb-team=KEY``, ``Authorization=Basic ...``)
HEADER_VARIABLES = re.compile(r"^OTEL_EXPORTER_OTLP(_TRACES|_LOGS|_METRICS)?_HEADERS$")


def _header_values(name: str, value: str) -> list[tuple[str, str]]:
    """Each header value of a headers variable, as written and decoded, and the credential after a scheme word
    (``Basic``, ``Bearer``); nothing for any other variable."""
    if not HEADER_VARIABLES.match(name):
        return []
    found = []
    for pair in value.split(","):
        _, _, header = pair.partition("=")
        for text in {header.strip(), unquote(header).strip()}:
            found += [text, text.split(" ", 1)[1].strip() if " " in text else text]
    return [(secret, f"<{name}>") for secret in found if secret]


def _address(value: str) -> Any:
    """``value`` split as a URL with a scheme and a host, or None."""
    if "://" not in value:
        return None
    try:
        parts = urlsplit(value.strip())
        parts.password  # noqa: B018 - a port or password urlsplit cannot read raises here
    except ValueError:
        return None
    return parts if parts.scheme and parts.hostname else None


def register_addresses(addresses: Mapping[str, str]) -> None:
    """Also treat as secrets, in this process, what follows the host of each address the run calls (by the setting
    that gives it: ``{"openai_base_url": "https://gw/t/<token>/v1"}``) - a gateway's token in its path, shown as
    ``<openai_base_url:path>`` - and what precedes its ``@``. Only the run's own endpoints: a variable such as
    ``GITHUB_GRAPHQL_URL`` is no address of ours, and its path (``/graphql``) is ordinary text."""
    global _addresses
    _addresses = tuple(sorted(set(_addresses) | {(name, url) for name, url in addresses.items() if url}))


_addresses: tuple[tuple[str, str], ...] = ()


def _address_secrets(addresses: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    found = []
    for name, url in addresses:
        parts = _address(url)
        if parts is not None:
            found += _address_credentials(name, url)
            tail = url.strip()[len(f"{parts.scheme}://{parts.netloc}"):]
            found += [(tail, f"<{name}:path>"), (unquote(tail), f"<{name}:path>")]
    return found


@functools.lru_cache(maxsize=8)
def _secret_values(items: tuple[tuple[str, str], ...], extra: tuple[str, ...],
                   addresses: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Memoised on the environment's contents: every transcript and row is redacted."""
    found: dict[str, str] = {}
    for name, value in items:
        credentials = _address_credentials(name, value) + _header_values(name, value)
        if credentials or _SECRET_ENV.search(name) or name in extra:
            credentials.insert(0, (value, f"<{name}>"))
        for secret, placeholder in credentials:
            if len(secret) >= MIN_SECRET_CHARS:
                found.setdefault(secret, placeholder)
    for secret, placeholder in _address_secrets(addresses):
        if len(secret) >= MIN_SECRET_CHARS:
            found.setdefault(secret, placeholder)
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
        raw = raw_bytes(value)
        encoded = {quote(raw, safe=""), quote_plus(raw), quote(raw), *base64_cores(value)}
        candidates = once | twice | encoded | (set() if json_only else {value})
        for form in candidates:
            if json_only and form != _json_text(form) and form not in once | twice:
                continue
            forms.setdefault(form, placeholder)
    return tuple(sorted(forms.items(), key=lambda item: -len(item[0])))


def scrub_text(data: bytes, secrets: Iterable[tuple[str, str]], *, spellings: bool = True) -> bytes:
    """Bytes with every form of every secret replaced by its placeholder; JSON sent as UTF-16 or UTF-32 (which a
    JSON reader reads) is read and written back in its own encoding. ``spellings=False``: the plain forms only, not
    the spellings :mod:`.secret_spellings` finds (a quick look-up key, whose miss is looked up the full way)."""
    found = tuple(secrets)
    if found and b"\x00" in data:
        encoding = json.detect_encoding(data)
        if encoding != "utf-8":
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                pass
            else:
                redacted = redact(text, found)
                return data if redacted is text else redacted.encode(encoding, "surrogatepass")
    for form, placeholder in secret_forms(found):
        encoded = raw_bytes(form)
        if encoded in data:
            data = data.replace(encoded, raw_bytes(placeholder))
    return respelled(data, found) if spellings else data


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
        return respelled(value, tuple(found))
    if not isinstance(value, (dict, list, tuple)):
        return value
    text = json.dumps(value, ensure_ascii=False)
    redacted = redact_json(text, found)
    return value if redacted is text else json.loads(redacted)


def redact_json(text: str, secrets: Iterable[tuple[str, str]] | None = None) -> str:
    """JSON text with every secret value, in every form JSON writes it (escaped, as ASCII, escaped
    twice, URL-encoded), replaced by its placeholder; the very same string if none is in it."""
    found = tuple(secret_values() if secrets is None else secrets)
    forms = secret_forms(found, json_only=True)
    redacted = text
    if any(form in redacted for form, _ in forms):
        for form, placeholder in forms:
            redacted = redacted.replace(form, placeholder)
    redacted = respelled(redacted, found)
    if redacted is text or redacted == text:
        return text
    try:
        json.loads(redacted)
    except ValueError:  # a secret made of digits matched inside a number: redact the strings, one by one
        try:
            data = json.loads(text)
        except ValueError:
            return redacted  # it was not JSON to begin with
        return json.dumps(_strings_redacted(data, found), ensure_ascii=False, separators=(",", ":"))
    return redacted


def _strings_redacted(value: Any, secrets: tuple[tuple[str, str], ...]) -> Any:
    """A parsed JSON value with every string (keys too) redacted; numbers, booleans and nulls as they are."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_strings_redacted(item, secrets) for item in value]
    if isinstance(value, dict):
        return {redact(key, secrets): _strings_redacted(item, secrets) for key, item in value.items()}
    return value

