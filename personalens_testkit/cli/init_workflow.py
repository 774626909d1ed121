"""The pull-request gate workflow ``personalens init`` writes, made from what init was told: the bot's kind,
the command that starts its server and the URL that says it is up (kinds ``http`` and ``openai``; the
testkit starts a ``python`` or ``command`` bot itself), and where the user agent's and the judge's models
come from (``local``: no credentials, the gate replays offline; ``openai``: the OPENAI_API_KEY secret;
``bedrock``: an IAM role through GitHub's OIDC token). Every step works in a repository that is not a
Python project, and no ``${{ }}`` expression reaches a ``run:`` script: values come in through ``env:``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

from ..assistants.kinds import SERVER_ADDRESSES
from ..errors import UsageError
from ..llm.backends import BACKENDS

#: kinds whose bot is a server the workflow starts (through the gate) before the run
SERVER_KINDS = frozenset(SERVER_ADDRESSES)
#: where the user agent's and the judge's models come from: the backends init offers (llm/backends/)
_GATES = {name: backend.gate for name, backend in BACKENDS.items() if backend.gate is not None}
PROVIDERS = tuple(_GATES)
#: the secret whose presence means "CI has model credentials", by provider
CREDENTIAL_SECRET = {name: gate.secret for name, gate in _GATES.items() if gate.secret}
#: the personalens.toml lines that choose the models, by provider
MODEL_LINES = {name: gate.config_lines for name, gate in _GATES.items()}
_MISSING_START = ("::error::set BOT_START in .github/workflows/personalens-pr-gate.yml to the command that starts "
                  "your bot's server (and BOT_HEALTH_URL to a URL that answers once it is up): the gate cannot "
                  "start the bot without it")


@dataclass(frozen=True)
class GateSetup:
    """What the workflow is made from."""

    kind: str
    models: str = "local"
    start: str | None = None
    health_url: str | None = None

    def check(self) -> None:
        if self.models not in PROVIDERS:
            raise UsageError(f"--models: {self.models!r}: one of {', '.join(PROVIDERS)}")
        given = [flag for flag, value in (("--start", self.start), ("--health-url", self.health_url)) if value is not None]
        if given and self.kind not in SERVER_KINDS:
            raise UsageError(f"{' and '.join(given)}: only for a bot that is a server (--kind http or openai); "
                             f"the testkit starts a --kind {self.kind} bot itself")
        for flag, value in (("--start", self.start), ("--health-url", self.health_url)):
            if value is not None and (not value.strip() or any(ord(c) < 32 and c != "\t" for c in value)):
                raise UsageError(f"{flag}: {value!r}: one line, not empty")
        if self.health_url is not None and urlsplit(self.health_url.strip()).scheme not in ("http", "https"):
            raise UsageError(f"--health-url: {self.health_url!r}: an http:// or https:// URL")


def bot_address(health_url: str | None, default: str) -> str:
    """The bot entry's address with the scheme, host and port of ``--health-url`` (its path kept)."""
    if not health_url:
        return default
    told, entry = urlsplit(health_url.strip()), urlsplit(default)
    return entry._replace(scheme=told.scheme, netloc=told.netloc).geturl()


def _models_comment(models: str) -> str:
    gate = _GATES[models]
    if gate.secret is None:
        return gate.comment
    return f"""#
{gate.comment}
# With it, a case whose bot answers a recorded turn differently is scored live from that turn
# (--record-mode new_episodes); without it (a pull request from a fork gets no secrets) every call replays
# offline and such a case is reported "not scored", with the command that scores it: the gate is red.
"""


def _pieces(setup: GateSetup) -> dict[str, str]:
    gate = _GATES[setup.models]
    secret = gate.secret
    server = setup.kind in SERVER_KINDS
    env = list(gate.env)
    if server:
        env += ["# the command that starts your bot's server, run from the repository's root by the gate (what",
                "# it needs is installed by a step of yours before this one), and a URL that answers 2xx once the",
                "# bot is up (the gate waits for it; without it, it does not wait)"]
        env += [f"BOT_START: {_scalar(setup.start)}",
                f"BOT_HEALTH_URL: {json.dumps(setup.health_url.strip() if setup.health_url else '')}"]
    return {
        "MODELS_COMMENT": _models_comment(setup.models),
        "PERMISSIONS": gate.permissions,
        "JOB_ENV": f"    env:\n      HAS_MODELS: ${{{{ secrets.{secret} != '' }}}}\n" if secret else "",
        "CREDENTIALS": gate.step,
        "GATE_ENV": "".join(["        env:\n", *(f"          {line}\n" for line in env)]) if env else "",
        "GATE_RUN": "".join(f"          {line}\n" if line else "\n" for line in _gate_script(setup)),
    }


def _scalar(value: str | None) -> str:
    """A YAML value that is exactly ``value``: a literal block (no quoting or escaping to get wrong), or ""."""
    if value is None:
        return '""'
    return "|-\n            " + value.strip()


def _gate_script(setup: GateSetup) -> list[str]:
    lines = []
    gate = _GATES[setup.models]
    if gate.secret is None:
        lines.append("record_mode=none   # no model credentials: the gate replays offline")
    else:
        lines += ["# model credentials: a changed reply is scored live from the turn where it differs; none: offline",
                  'if [ "${HAS_MODELS:-}" = true ]; then record_mode=new_episodes; else record_mode=none; fi']
    lines += gate.script
    bot = ""
    if setup.kind in SERVER_KINDS:
        lines += ['if [ -z "${BOT_START:-}" ]; then', f'  echo "{_MISSING_START}"', "  exit 2", "fi",
                  'bot=(--start "$BOT_START")',
                  'if [ -n "${BOT_HEALTH_URL:-}" ]; then bot+=(--health-url "$BOT_HEALTH_URL"); fi']
        bot = ' "${bot[@]}"'
    else:
        lines.append(f"# a {setup.kind} bot: the testkit starts the bot itself, from its entry in personalens.toml")
        lines.append("# (what the bot needs - its packages, its runtime - is installed by a step of yours before this one)")
    lines.append(f'personalens gate --target "$GITHUB_BASE_REF"{bot} --record-mode "$record_mode" --out personalens-gate')
    return lines


def render_workflow(setup: GateSetup) -> str:
    """The workflow's text: the scaffold's template with each ``#@PIECE`` line replaced by its piece."""
    setup.check()
    pieces = _pieces(setup)
    template = (resources.files("personalens_testkit.scaffold") / "personalens-pr-gate.yml").read_text(encoding="utf-8")
    out = []
    for line in template.splitlines(keepends=True):
        out.append(pieces[line[2:].strip()] if line.startswith("#@") else line)
    return "".join(out)
