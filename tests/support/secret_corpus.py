"""Generated spellings of a secret, for the redaction's tests and bench/secret_spellings.py.

A spelling composes, character by character, a form of each character (as it is, ``\\uXXXX`` behind one or two
backslashes, ``\\u{X}``, ``\\xXX``, octal ``\\NNN``, ``%XX``, HTML's ``&#N;`` / ``&#xH;``, full-width - as it is or
its UTF-8 escaped -, a look-alike letter or hyphen, ``\\/`` for a slash) with what may be cut in between (a
zero-width space or joiner, a soft hyphen, a bidi mark, a BOM, a variation selector, a Hangul filler - as they
are or escaped -, a line break, spaces, JSON's ``\\n``); or the whole secret in base64 (standard or URL-safe, after 0-2 other bytes, wrapped at any width, its
slashes written ``\\/``), or JSON-escaped once or twice. Every spelling is one a reader - a person, a decoder, a
model - reads back as the secret. Seeded: the same seed gives the same corpus.
"""

from __future__ import annotations

import base64
import json
import random
import string

#: characters a writer may cut into a secret that a reader does not see
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u200e", "\u202a", "\u2066",
             "\ufe0f", "\u034f", "\u3164", "\U000e0041"]
#: the same, written with escapes
ESCAPED_INVISIBLE = ["%E2%80%8B", "\\u200b", "&#8203;", "&zwj;", "\\xe2\\x80\\x8b"]
CUTS = [*INVISIBLE, *ESCAPED_INVISIBLE, "\n", " ", "\r\n", "\t", "\\n"]
#: Cyrillic and Greek letters that read as these Latin ones
LOOKALIKES = {"-": "\u2010", "a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441", "x": "\u0445",
              "y": "\u0443", "i": "\u0456", "s": "\u0455", "A": "\u0391", "B": "\u0392", "E": "\u0395",
              "K": "\u039a", "M": "\u039c", "T": "\u03a4", "H": "\u0397", "O": "\u039f"}
ALPHABET = string.ascii_letters + string.digits + "-_/+="


def secret(rng: random.Random) -> str:
    """A token of the kinds keys and gateway paths have: 16-40 characters, letters, digits and -_/+=."""
    head = rng.choice(["sk-", "ghp_", "AKIA", "", "/t/", "xoxb-"])
    return head + "".join(rng.choice(ALPHABET) for _ in range(rng.randint(16, 40)))


def _char(rng: random.Random, char: str) -> str:
    forms = [char, char, f"\\u{ord(char):04x}", f"\\\\u{ord(char):04X}", f"%{ord(char):02X}", f"&#{ord(char)};",
             f"&#x{ord(char):x};", f"\\u{{{ord(char):x}}}"]
    if ord(char) < 0x80:
        forms += [f"\\x{ord(char):02x}", f"\\{ord(char):03o}"]
    if "!" <= char <= "~":
        wide = chr(ord(char) + 0xFEE0)  # full-width, as it is or as its UTF-8 escaped
        forms += [wide, "".join(f"%{byte:02X}" for byte in wide.encode()), "".join(f"\\x{b:02x}" for b in wide.encode())]
    if char in LOOKALIKES:
        forms.append(LOOKALIKES[char])
    if char == "/":
        forms.append("\\/")
    return rng.choice(forms)


def by_character(rng: random.Random, value: str) -> str:
    out = []
    for index, char in enumerate(value):
        out.append(_char(rng, char) if rng.random() < 0.5 else char)
        if index < len(value) - 1 and rng.random() < 0.15:
            out.append(rng.choice(CUTS))
    return "".join(out)


def in_base64(rng: random.Random, value: str) -> str:
    data = bytes(rng.randint(0, 2)) + value.encode("utf-8") + bytes(rng.randint(0, 2))
    text = (base64.urlsafe_b64encode if rng.random() < 0.3 else base64.b64encode)(data).decode("ascii")
    if rng.random() < 0.4:
        width = rng.choice([8, 19, 64, 76])
        text = rng.choice(["\n", "\r\n"]).join(text[i:i + width] for i in range(0, len(text), width))
    if rng.random() < 0.4:
        text = text.replace("/", "\\/")
    return text


def spelling(rng: random.Random, value: str) -> str:
    """One spelling of ``value`` (see the module's text)."""
    kind = rng.random()
    if kind < 0.6:
        return by_character(rng, value)
    if kind < 0.85:
        return in_base64(rng, value)
    once = json.dumps(value, ensure_ascii=rng.random() < 0.5)[1:-1]
    return json.dumps(once)[1:-1] if rng.random() < 0.5 else once


def context(rng: random.Random, spelled: str) -> str:
    """The spelling inside text a bot, a model or a log line might write around it."""
    before = rng.choice(["Your key is ", "token=", '{"auth": "', "Authorization: Bearer ", "see https://gw/", ""])
    after = rng.choice([" - keep it safe.", '"}', "&x=1", "\n", ""])
    return before + spelled + after
