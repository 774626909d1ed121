"""``bedrock:<model id>``: a model on Amazon Bedrock (the Converse API, through boto3; region and credentials
from the AWS chain, checked before a live run's first call)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from . import BackendEntry, GateModels, ModelBackend, ModelContext

if TYPE_CHECKING:
    from ..base import ChatModel

#: the geographic prefixes of Bedrock's cross-region inference profiles
PROFILE_PREFIXES = ("us.", "us-gov.", "eu.", "apac.", "jp.", "au.", "ca.", "global.")


class BedrockModel(BackendEntry):
    kind: Literal["bedrock"] = "bedrock"
    #: a model id or an inference profile id / ARN
    model: str = Field(min_length=1)
    #: None: the AWS chain's region (AWS_DEFAULT_REGION, ~/.aws/config)
    region: Optional[str] = None
    #: how a judge's JSON schema is asked for: "tool" forces a tool whose input is the schema (Claude, Nova),
    #: "any" forces the only tool offered (Mistral Large), "none" asks in the prompt; None: by model family
    json_mode: Optional[Literal["tool", "any", "none"]] = None
    #: the read timeout of one call, in seconds (retries are the run's own: --retries)
    timeout_s: float = Field(default=300.0, gt=0)
    #: another bedrock-runtime endpoint (a VPC endpoint, a proxy); None: the region's
    endpoint_url: Optional[str] = Field(default=None, pattern=r"^https?://")
    #: mark each prompt's fixed part for Bedrock prompt caching; None: on for model families that support it
    prompt_cache: Optional[bool] = None
    #: --judge-batch: the service role Bedrock's batch inference assumes to read and write ``batch_s3``
    batch_role_arn: Optional[str] = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]+$",
                                          max_length=2048)
    #: --judge-batch: where the batch jobs' records and results go, ``s3://BUCKET/PREFIX``
    batch_s3: Optional[str] = Field(default=None, pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")

    def spec(self) -> str:
        return f"bedrock:{self.model}"


def build(label: str, entry: BedrockModel, ctx: ModelContext, role: str) -> ChatModel:
    from ..bedrock import BedrockChat

    replay_only = role in ctx.replay_only_roles
    return BedrockChat(spec=label, model_id=entry.model, region=entry.region, json_mode=entry.json_mode,
                       read_timeout_s=entry.timeout_s, endpoint_url=entry.endpoint_url, replay_only=replay_only,
                       prompt_cache=entry.prompt_cache, exchange=ctx.exchange)


def check(entry: BedrockModel) -> None:
    from ..bedrock import check_aws

    check_aws(entry.region)


def _price_keys(spec: str, model: str) -> list[str]:
    """The id as written, then the model of an inference profile's ARN or id (its region prefix dropped)."""
    base = model.rsplit("/", 1)[-1] if model.startswith("arn:") else model
    return [spec, model, base, *(base[len(p):] for p in PROFILE_PREFIXES if base.startswith(p))]


GATE = GateModels(
    config_lines="""# The benchmark's own models: the paper's set-up on Amazon Bedrock (user agent Claude 3 Sonnet, judge
# Claude 3.5 Sonnet v2; AWS credentials from the environment).
preset = "paper\"""",
    comment=('# Models: preset = "paper" in personalens.toml (Amazon Bedrock), with the AWS_ROLE_ARN secret: an\n'
             "# IAM role that trusts GitHub's OIDC token for this repository and may call Bedrock (no stored\n"
             "# keys; the region from an AWS_REGION variable, default us-east-1)."),
    secret="AWS_ROLE_ARN",
    permissions="  id-token: write   # the OIDC token for Amazon Bedrock (AWS_ROLE_ARN)\n",
    step="""      - name: Model credentials (Amazon Bedrock, through GitHub's OIDC token)
        if: env.HAS_MODELS == 'true'
        uses: aws-actions/configure-aws-credentials@v4
        with:
          role-to-assume: ${{ secrets.AWS_ROLE_ARN }}
          aws-region: ${{ vars.AWS_REGION || 'us-east-1' }}
""")

# Bedrock's inputTokens leave out the tokens read from the prompt cache (OpenAI's prompt_tokens count them)
BACKEND = ModelBackend("bedrock", BedrockModel, lambda rest: BedrockModel(model=rest), build, order=2,
                       example="bedrock:anthropic.claude-3-5-sonnet-20241022-v2:0", check=check,
                       price_keys=_price_keys, counts_cached_in_prompt=False, gate=GATE)
