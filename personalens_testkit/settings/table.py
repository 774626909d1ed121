"""The one table of settings: each option is declared once, here.

From this table come the pytest options and their help, the keys of the project config
(``[tool.personalens]`` / ``personalens.toml``) and their validation, the environment
variable a setting reads, and the checks of a value wherever it came from. Precedence, the
same for every setting: command-line option > environment variable > project config > default.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, StrictFloat, StrictInt

from ..errors import UsageError
from ..assistants.reference import PROMPT_VARIANTS
from ..llm.entries import OPENAI_DEFAULT_URL
from ..prompts.render import REPLY_CUTS
from ..report.outputs import FORMATS
from ..scales import COMPLETION_COUNTINGS

Kind = Literal["str", "int", "float", "flag", "path", "list", "csv", "count"]
#: the word a "count" setting takes instead of a number: the run picks the number (see the setting's help)
AUTO = "auto"
#: how the project config may write a value of each kind ("csv": ``"7,53"`` or ``[7, 53]``)
#: numbers strictly: a TOML true or "0.5" for a number is a mistake to name, never read as 1 or 0.5
_PY = {"str": str, "int": StrictInt, "float": StrictFloat, "flag": bool, "path": str, "list": list[str],
       "csv": Union[str, list[Union[int, str]]]}


@dataclass(frozen=True)
class Setting:
    name: str
    help: str
    kind: Kind = "str"
    #: the command-line option; None: config only
    flag: Optional[str] = ""
    #: whether the project config may set it
    config: bool = True
    default: Any = None
    metavar: Optional[str] = None
    #: bounds of a number, inclusive; ``above``: strictly greater than
    low: Optional[float] = None
    high: Optional[float] = None
    above: Optional[float] = None
    #: the environment variable read between the option and the config
    env: Optional[str] = None
    #: the config key, when it differs from the name
    key: Optional[str] = None
    #: what 0 means, for a number whose 0 switches something off
    zero_means: Optional[str] = None
    #: the values it may take (a str setting), checked for options, the environment and the config alike
    choices: Optional[tuple[str, ...]] = None

    @property
    def option(self) -> Optional[str]:
        if self.flag is None:
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def config_key(self) -> Optional[str]:
        return (self.key or self.name) if self.config else None

    @property
    def python_type(self) -> Any:
        if self.kind == "count":  # a whole number within the bounds, or "auto"
            return Annotated[Union[int, str], BeforeValidator(self._count)]
        return _PY[self.kind]

    def _count(self, value: Any) -> int | str:
        if isinstance(value, str) and value.strip().lower() == AUTO:
            return AUTO
        if isinstance(value, int) and not isinstance(value, bool):
            return self.check(value, "")  # type: ignore[no-any-return]
        raise ValueError(f"expected a whole number {self.range_text()}, or {AUTO}")

    def option_arguments(self) -> dict[str, Any]:
        """How its command-line option is declared (pytest's ``addoption`` and argparse take the same): not given
        is None, so the config and the environment can fill it."""
        if self.kind == "flag":
            return {"action": "store_true", "default": None, "help": self.help}
        metavar = self.metavar or ("{" + ",".join(self.choices) + "}" if self.choices else None)
        return {"type": {"int": int, "float": float, "count": count_value}.get(self.kind, str), "default": None,
                "metavar": metavar, "help": self.help}

    def add_to(self, parser: Any, *, help: Optional[str] = None) -> None:
        """Declare its option on an argparse parser - a ``personalens`` command borrowing the run's setting, its
        value checked as the run checks it - with the command's own ``help`` where it reads the setting its own way."""
        arguments = self.option_arguments()
        arguments["help"] = help or arguments["help"]
        parser.add_argument(self.option, dest=self.name, **arguments)

    def normalised(self, value: Any) -> Any:
        """A config value in the form an option gives it (a list of a "csv" setting joined with commas)."""
        if self.kind == "csv" and isinstance(value, list):
            return ",".join(str(item) for item in value)
        return value

    def pydantic_bounds(self) -> dict[str, float]:
        if self.kind == "count":  # a count's are checked by its validator (python_type)
            return {}
        bounds = {"ge": self.low, "le": self.high, "gt": self.above}
        return {k: v for k, v in bounds.items() if v is not None}

    def check(self, value: Any, where: str) -> Any:
        """The value, if it is in range; else a UsageError naming ``where`` it came from."""
        if value is None or value == AUTO or self.kind not in ("int", "float", "count"):
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{where}: must be a finite number, {self.range_text()} (got {value})")
        too_low = (self.low is not None and value < self.low) or (self.above is not None and value <= self.above)
        if too_low or (self.high is not None and value > self.high):
            if not where:  # a config value's, said by its validation
                raise ValueError(f"must be {self.range_text()}")
            raise UsageError(f"{where}: must be {self.range_text()} (got {value:g})")
        return value

    def range_text(self) -> str:
        unit = " seconds" if self.name.endswith("timeout") else ""
        if self.low is not None and self.high is not None:
            return f"from {self.low:g} to {self.high:g}"
        if self.above is not None:
            return f"more than {self.above:g}{unit}"
        if self.low == 0 and self.zero_means:
            return f"0 ({self.zero_means}) or more"
        return f"at least {self.low:g}" if self.low else "0 or more"


def count_value(text: str) -> int | str:
    """A "count" option's value: a whole number, or ``auto``."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or {AUTO}, got {text!r}") from None


#: the most retries of a failed call (each waits up to retry_max_s)
MAX_RETRIES = 10
#: cases in a row failing alike on one endpoint that stop a run (the circuit breaker)
DEFAULT_STOP_AFTER_ERRORS = 5
#: the most one scenario may take, by default: a backstop against a case that never ends, which a working scenario
#: never meets. The longest scenario - 30 turns of a multi-domain task, 66 calls with its six judge calls - takes
#: about 5 minutes on the embedded model at its slow 4.3 s a call (bench/README.md), and 11 at a remote model
#: answering in a slow 10 s: an hour is over 5 times that, and still ends a stuck case within a CI job's hour.
DEFAULT_SCENARIO_TIMEOUT_S = 3600.0

#: the setting that names each role's model (the reviewer's, unset: the judge's)
MODEL_SETTING = {"user_agent": "user_model", "judge": "judge_model", "assistant": "assistant_model",
                 "reviewer": "review_user_model"}

SETTINGS: tuple[Setting, ...] = (
    # what runs
    Setting("personalens_data", "an upstream PersonaLens checkout (or its data/ folder); default: the bundled 50-profile "
            "sample", "path", metavar="DIR"),
    Setting("sample", "the benchmark's published profile sample (default 50; 'all' = every profile in the data)",
            metavar="{30,50,100,all}"),
    Setting("profiles", "run these profiles only, e.g. 7,53 (replaces --sample)", "csv", metavar="IDS"),
    Setting("domains", "keep scenarios whose domains are all among these, e.g. Movies,Music", "csv", metavar="NAMES"),
    Setting("task_kind", "single-domain, multi-domain or both (default)", metavar="{sd,md,both}"),
    Setting("max_turns", "turn limit per dialogue (default: the benchmark's 20 single-domain, 30 multi-domain)", "int",
            metavar="N", low=1),
    Setting("repeat", "run each scenario K times (own cassettes; reports pass^k and each score's spread)", "int",
            metavar="K", low=1, default=1),
    # the parts
    Setting("preset", "a named set-up: paper (the paper's user agent, judge and reference assistant on Bedrock, its turn "
            "limits and sampling) or a [presets.NAME] table of the config; options given explicitly still win",
            metavar="NAME"),
    Setting("assistant", "the assistant under test (default: reference)", metavar="NAME"),
    Setting("bot_root", "the folder a bot entry's relative paths (a python entry's path, a command and its cwd) "
            "resolve in (default: the project folder; `personalens gate` gives the pull request's checkout)", "path",
            metavar="DIR", config=False),
    Setting("isolate_bot", "run a python bot in a process of its own (the command kind's JSON lines), so its code "
            "cannot reach the testkit's; `personalens gate` always does", "flag"),
    Setting("bot_sandbox", "set by `personalens gate`: the file naming the user id and environment a bot's processes "
            "run under", "path", metavar="FILE", config=False),
    Setting("assistant_model", "model of the reference assistant (default: local)", metavar="SPEC"),
    Setting("assistant_context", "user context the reference assistant sees: none (default) or any of "
            "demographics,interactions,situation (D,I,S)", metavar="PARTS"),
    Setting("assistant_prompt", "the reference assistant's prompt, one of the paper's variants: claude (acts as though it "
            "can carry out tasks) or llama / mistral (open about its limits); default: by the model's family",
            choices=PROMPT_VARIANTS),
    Setting("user_model", "user-agent model: local (default), local:FILE.gguf, openai:MODEL, bedrock:MODEL_ID, or a "
            "[models] name", metavar="SPEC"),
    Setting("judge_model", "judge model: local (default), local:FILE.gguf, openai:MODEL, bedrock:MODEL_ID, or a "
            "[models] name", metavar="SPEC"),
    Setting("judge_calibration", "the report of `personalens calibrate` for this run's judge: shown beside the scores",
            "path", metavar="REPORT"),
    Setting("require_calibrated_judge", "a run whose gates count fails at the start unless --judge-calibration names a "
            "passing calibration of this very judge model", "flag", flag=None, default=False),
    Setting("local_url", "use an already running embedded server (see `personalens serve-model`) instead of starting "
            "one", metavar="URL", config=False, env="PERSONALENS_LOCAL_URL"),
    Setting("openai_base_url", "the OpenAI-compatible endpoint of openai: specs", flag=None, env="OPENAI_BASE_URL",
            default=OPENAI_DEFAULT_URL),
    Setting("openai_api_key_env", "the environment variable holding that endpoint's key", flag=None,
            default="OPENAI_API_KEY"),
    # files
    Setting("thresholds", "thresholds file (default: ./thresholds.yaml)", "path", metavar="PATH"),
    Setting("results_dir", "where runs write results (default: personalens-results)", "path", metavar="DIR",
            default="personalens-results"),
    Setting("cassette_dir", "where cassettes are kept (default: ./cassettes)", "path", metavar="DIR", default="cassettes"),
    Setting("expectations", "each scenario's expected outcome (default: expectations.yaml beside the assistant's "
            "cassettes, if there is one): known failures are xfail, new failures regressions", "path", metavar="PATH"),
    Setting("record_mode", "cassettes, with vcrpy's meanings: none (default) replays offline and runs only the scenarios "
            "that have a cassette; once records the missing ones live; new_episodes adds unmatched calls; all re-records",
            metavar="{none,once,new_episodes,all}", default="none"),
    Setting("rejudge", "replay the recorded dialogues and judge them again (judge live, or from its own cassettes)",
            "flag", config=False),
    Setting("judge_batch", "judge on the provider's batch engine (OpenAI-compatible endpoints with the Batch API, "
            "Bedrock's batch inference): "
            "submit runs the dialogues and sends the judge's calls as batch jobs at the end of the run (their answers "
            "come within 24 h, at about half the price); collect reads the jobs' answers into the judge's cassettes and "
            "judges the recorded dialogues from them, as --rejudge does (default: off, the judge answers each call)",
            choices=("off", "submit", "collect"), default="off", config=False),
    Setting("batch_wait", "with --judge-batch collect: wait, with progress, until the jobs end (default: say how far they "
            "are and stop)", "flag", config=False),
    Setting("batch_poll_s", "with --batch-wait: seconds between two looks at the jobs (default 60)", "float",
            metavar="SECONDS", above=0, default=60.0),
    Setting("batch_resend", "with --judge-batch collect: the calls of each case a record of which the provider answered "
            "with an error (or not at all) are sent again as new batch jobs, to collect next time", "flag",
            config=False),
    Setting("otel_endpoint", "send each scenario's trace to this OpenTelemetry collector, over OTLP/HTTP (e.g. "
            "http://localhost:4318; the [otel] extra; OTEL_EXPORTER_OTLP_HEADERS for its credentials); default: none",
            metavar="URL", env="PERSONALENS_OTEL_ENDPOINT"),
    Setting("otel_content", "with --otel-endpoint: the dialogue's messages and the judge's explanations in the traces too "
            "(they may hold personal data; default: ids, models, tokens, times, scores and errors only)", "flag"),
    Setting("turn_level", "also judge personalization after every assistant turn (the paper's turn-level curve)", "flag",
            config=False),
    Setting("turn_level_method", "how --turn-level judges: chain (default: the paper's one call that scores every prefix "
            "of the dialogue) or per-turn (one call per assistant reply)", choices=("chain", "per-turn"), default="chain"),
    Setting("completion_counting", "how the task-completion rate counts a verdict the judge's answer left unreadable: "
            "ours (default: left out, nothing guessed) or paper (not completed, as the paper's code counts it; "
            "--preset paper); the other count is reported beside it", choices=COMPLETION_COUNTINGS, default="ours"),
    Setting("reply_cut", "how the user agent's and the reference assistant's replies are kept when their model writes on "
            "past its own message: speaker (default: cut where it starts another speaker's turn) or none (whole, as "
            "the paper's code keeps them; --preset paper)", choices=REPLY_CUTS, default="speaker"),
    Setting("leak_check", "also judge whether the user agent's opening states preferences it should leave implicit",
            "flag", config=False),
    Setting("review_user", "also have a model review the user agent's turns against its profile, task and the "
            "protocol: each fault with its turn and whether it hindered or helped the bot (one more call a dialogue, "
            "on --review-user-model)", "flag", config=False),
    Setting("rerun_user_faults", "run a scenario again once, with a fresh dialogue, when the checks that cost nothing "
            "find its user agent hindered or helped the bot (within --max-cost; the dialogue kept is the second, the "
            "first is on the row); a replay follows its recording", "flag"),
    Setting("review_user_model", "the model of --review-user's review: local, local:FILE.gguf, openai:MODEL, "
            "bedrock:MODEL_ID, or a [models] name; default: the judge's model", metavar="SPEC"),
    *(Setting(form.setting, f"{form.what} (default: <run folder>/{form.default_name}) {form.also}".strip(), "path",
              metavar="PATH", config=False) for form in FORMATS),
    Setting("baseline", "an earlier run's report.json or results.jsonl: fail if a score drops significantly on the "
            "shared scenarios", "path", metavar="REPORT", config=False),
    Setting("baseline_margin", "the drop --baseline tolerates, on every metric: green only when the interval of the "
            "difference is shown above -X (default: thresholds.yaml's margin per metric); red is shown below the "
            "judge's drift (thresholds.yaml's, or what --judge-retest measures, never above the margin)", "float",
            metavar="X", low=0, config=False),
    Setting("judge_retest", "judge this share (0-1) of the cases a second time, chosen by case id, and report the "
            "judge's test-retest agreement per dimension; the second judgement never counts in a score (default 0)",
            "float", metavar="SHARE", low=0, high=1, default=0.0),
    Setting("resume", "finish an interrupted run: keep the scored cases of its results.jsonl, run only the others",
            "path", metavar="RESULTS", config=False),
    Setting("resume_mismatch", "--resume rows that another set-up produced (assistant, a model, the data, the floors, "
            "the testkit): refuse (default: stop with one line naming what differs) or rerun (drop them, run those "
            "cases again)", choices=("refuse", "rerun"), default="refuse", config=False),
    Setting("shard", "run the I-th of N deterministic slices of the cases (a CI matrix); `personalens merge` joins them",
            metavar="I/N", config=False),
    # reliability and speed
    Setting("retries", f"retries of a call that failed in a retryable way: 429, 5xx, timeout, dropped connection "
            f"(default 3, at most {MAX_RETRIES})", "int", metavar="N", low=0, high=MAX_RETRIES, default=3),
    Setting("retry_initial_s", "the first wait before a retry, doubling up to retry_max_s", "float", flag=None, above=0,
            high=60, default=1.0),
    Setting("retry_max_s", "the longest wait between retries", "float", flag=None, above=0, high=600, default=20.0),
    Setting("scenario_timeout", f"the most time one scenario may take; a call under way is given up when it runs out "
            f"(default {DEFAULT_SCENARIO_TIMEOUT_S:g}: a backstop no working scenario meets; 0: no limit)", "float",
            metavar="SECONDS", low=0, key="scenario_timeout_s", default=DEFAULT_SCENARIO_TIMEOUT_S,
            zero_means="no limit"),
    Setting("concurrency", "evaluate K scenarios at once in threads of each process (remote models; with -n N, K in "
            "each worker); auto: 16 a core across the run's processes, at most 64, no more than --max-concurrency, "
            "and 1 when no model is called live or an embedded one is", "count", metavar="K|auto", low=1, high=256,
            default=1),
    Setting("max_rps", "at most R calls per second to each model endpoint, across all xdist workers", "float",
            metavar="R", above=0),
    Setting("max_concurrency", "at most N calls in flight to each model endpoint, across all xdist workers", "int",
            metavar="N", low=1),
    Setting("stop_after_errors", f"stop the run after N cases in a row fail with the same error from one model or bot "
            f"(default {DEFAULT_STOP_AFTER_ERRORS}; 0: never)", "int", metavar="N", low=0,
            default=DEFAULT_STOP_AFTER_ERRORS, zero_means="never"),
    Setting("max_cost", "stop starting cases once the spend (live calls, priced from the price table) plus the running "
            "cases' expected spend would pass USD; cases not started are reported as not run because of the budget, "
            "and --resume continues (default: no limit)", "float", metavar="USD", above=0),
    Setting("stop_when_decided", "run the cases in a stratified random order and stop starting cases once the verdict "
            "(the enforced gates and the baseline's differences) is decided at the thresholds' confidence, by a "
            "confidence sequence valid at every look; the cases not needed are reported as such", "flag"),
    Setting("order_seed", "the seed of --stop-when-decided's stratified random order (default 0; printed)", "int",
            metavar="N", low=0, default=0),
    Setting("secret_env", "names of environment variables whose values are secrets, beyond those named like one",
            "list", flag=None, default=()),
)
SETTING = {s.name: s for s in SETTINGS}
#: the settings a case's scores do not depend on, and why: every other setting's resolved value is part of the identity
#: of the rows a run writes (results/identity.py), so a ``--resume`` adopts no row another value produced - and a new
#: setting is part of it unless it is named here
NOT_IN_IDENTITY: dict[str, str] = {
    "personalens_data": "the data is in the identity by its content, wherever it is",
    **dict.fromkeys(("sample", "profiles", "domains", "task_kind", "repeat", "shard"), "which cases run"),
    "preset": "its values are the other settings'",
    **dict.fromkeys(("assistant", "assistant_model", "assistant_context", "assistant_prompt", "user_model",
                     "judge_model"), "in the identity resolved"),
    "thresholds": "its per-scenario floors are in the identity; its other gates judge the run, not a case",
    **dict.fromkeys(("bot_root", "isolate_bot", "bot_sandbox"), "where and how the same bot runs"),
    **dict.fromkeys(("judge_calibration", "require_calibrated_judge"), "a check before the run"),
    "openai_api_key_env": "the name of a key", "secret_env": "what is redacted",
    **dict.fromkeys(("results_dir", "cassette_dir", "resume", *(form.setting for form in FORMATS)), "where files are"),
    "expectations": "a case's verdict", "completion_counting": "how the report counts, not a case's scores",
    **dict.fromkeys(("record_mode", "rejudge"), "whether calls are replayed or made"),
    **dict.fromkeys(("baseline", "baseline_margin"), "what the run is compared with"),
    "judge_retest": "a second judgement beside a case's, never its score",
    **dict.fromkeys(("judge_batch", "batch_wait", "batch_poll_s", "batch_resend"), "where the judge's answers are made (online or "
                    "by the provider's batch engine), not what they mean"),
    "resume_mismatch": "what a resume does with other rows",
    **dict.fromkeys(("otel_endpoint", "otel_content"), "where the run's traces go, not what it scores"),
    **dict.fromkeys(("retries", "retry_initial_s", "retry_max_s", "scenario_timeout"),
                    "whether a case errs, not its scores"),
    **dict.fromkeys(("concurrency", "max_rps", "max_concurrency"), "parallelism"),
    **dict.fromkeys(("stop_after_errors", "max_cost", "stop_when_decided", "order_seed"), "when the run stops, "
                    "in which order its cases run"),
}
#: the options of the pytest plugin, by their destination name
OPTION_NAMES = tuple(s.name for s in SETTINGS if s.option)


def option_default(name: str) -> Any:
    return SETTING[name].default
