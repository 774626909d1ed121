"""thresholds.yaml: its schema, loading with one-line errors, and per-scenario checks.

    version: 1
    scenario:                   # floors every single scenario must reach
      task_completion: true     # true: the judge must find the task completed; false/null: not gated
      personalization: 2        # 1-4, or null for no floor
      naturalness_assistant: 3  # 1-5, or null
      coherence_assistant: 3    # 1-5, or null
      naturalness_user: null    # the user side rates the simulator, not your assistant
      coherence_user: null
    aggregate:                  # gates on the whole run, evaluated once at the end over every worker's rows
      confidence: 0.95          # of the intervals (Agresti-Coull for rates, Student-t for means, over scenarios)
      min_n: 10                 # a gate on fewer scenarios is not evaluated, and not passed
      fail_when_not_evaluated: false
      max_infrastructure_errors: 0.05   # share of cases the user agent, judge or setup may fail
      margin:                   # per metric, a drop that does not matter: green is shown at or above the bar less it
        personalization: 0.2    # (metrics left out keep their defaults: 0.05 task completion, 0.2 the ratings)
      drift:                    # per metric, what the judge alone may move a score: red only when shown below the
        personalization: 0.03   # bar less it (at most the margin; defaults 0.01 task completion, 0.03 the ratings)
      gates:
        - metric: personalization   # task_completion (a rate, 0-1) or any rated dimension
          scope: overall            # overall | sd | md | each_domain | domain:<Name>
          statistic: lower_bound    # mean | lower_bound (the interval's low end)
          min: 1.8
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from ..data.models import DOMAINS
from ..errors import ConfigError, dotted
from ..scales import (
    COHERENCE_ASSISTANT, METRIC_BY_NAME, METRIC_NAMES, METRICS, NATURALNESS_ASSISTANT, PERSONALIZATION, TASK_COMPLETION,
    Metric,
)



#: The floors a team starts from: completion required, "basic" personalization, replies at least "somewhat"
#: natural and coherent; the user side rates the simulator, not the assistant, so it is not gated.
DEFAULT_FLOORS: dict[str, Any] = {TASK_COMPLETION.name: True, PERSONALIZATION.name: 2,
                                  NATURALNESS_ASSISTANT.name: 3, COHERENCE_ASSISTANT.name: 3}


def _floor(metric: Metric) -> tuple[Any, Any]:
    default = DEFAULT_FLOORS.get(metric.name)
    if metric.kind == "bool":
        return Optional[bool], default
    return Optional[int], Field(default=default, ge=metric.low, le=metric.high)


#: The floors every single scenario must reach (a field per metric; null: not gated).
ScenarioFloors = create_model("ScenarioFloors", __config__=ConfigDict(extra="forbid", strict=True),
                              **{m.name: _floor(m) for m in METRICS})


SCOPES = ("overall", "sd", "md", "each_domain") + tuple(f"domain:{d}" for d in DOMAINS)


class Gate(BaseModel):
    """A gate on an aggregate: the mean, or the lower bound of its confidence interval, must reach ``min``."""

    model_config = ConfigDict(extra="forbid")

    metric: Literal[METRIC_NAMES]  # type: ignore[valid-type]
    scope: str = "overall"
    #: the gated statistic ("on" would be read as a boolean by YAML)
    statistic: Literal["mean", "lower_bound"] = "mean"
    min: float

    @field_validator("scope")
    @classmethod
    def _known_scope(cls, value: str) -> str:
        if value not in SCOPES:
            raise ValueError(f"must be overall, sd, md, each_domain or domain:<Name> with a benchmark domain (got {value!r})")
        return value

    @model_validator(mode="after")
    def _on_the_scale(self) -> Gate:
        metric = METRIC_BY_NAME[self.metric]
        low, high = (0.0, 1.0) if metric.kind == "bool" else (float(metric.low), float(metric.high))
        if not low <= self.min <= high:
            what = "a rate" if metric.kind == "bool" else f"{metric.title} is rated"
            raise ValueError(f"min: {what} from {low:g} to {high:g} (got {self.min:g})")
        return self


#: a drop that does not matter, per metric (green: shown at or above the bar less it): 5 points of completion,
#: 0.2 of a level on the rated scales - a fifth of the step from "basic" to "strong" personalization
DEFAULT_MARGINS: dict[str, float] = {m.name: 0.05 if m.kind == "bool" else 0.2 for m in METRICS}
#: how far the judge alone moves a score between two runs (a model update, a provider's drift): red is shown below
#: the bar less it - 1 point of completion, 0.03 of a level on the rated scales
DEFAULT_DRIFTS: dict[str, float] = {m.name: 0.01 if m.kind == "bool" else 0.03 for m in METRICS}


def _per_metric(value: Any, defaults: dict[str, float]) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping of a metric to a number (got {value!r})")
    merged = dict(defaults)
    for name, amount in value.items():
        metric = METRIC_BY_NAME.get(name)
        if metric is None:
            raise ValueError(f"unknown metric {name!r} (one of {', '.join(METRIC_NAMES)})")
        span = 1.0 if metric.kind == "bool" else float(metric.high - metric.low)
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 <= amount <= span:
            raise ValueError(f"{name}: must be a number from 0 to {span:g} (got {amount!r})")
        merged[name] = float(amount)
    return merged


class AggregateGates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    #: no longer used (intervals are not bootstrapped since 0.2): accepted so older files still load
    resamples: Optional[int] = Field(default=None, ge=100, le=100_000)
    #: a gate on fewer scenarios is not evaluated - and not passed
    min_n: int = Field(default=10, ge=1)
    #: whether a gate that could not be evaluated (too few scenarios) fails the run
    fail_when_not_evaluated: bool = False
    #: whether an inconclusive decision (a gate or a baseline difference shown neither way at this n) fails the run
    fail_when_inconclusive: bool = False
    #: a case below a floor it was expected to meet, on a judgement made now (not replayed): "confirm" (default: its
    #: dialogue and the base's judged again - a regression when confirmed, else an xfail listed as unconfirmed; see
    #: run/confirmation.py), "report" (never judged again: always unconfirmed) or "gate" (a regression at once, for a
    #: judge whose answers do not vary)
    live_judged_floors: Literal["confirm", "report", "gate"] = "confirm"
    #: the largest share of cases the benchmark's own models (or the setup) may fail before the run fails
    max_infrastructure_errors: float = Field(default=0.05, ge=0.0, le=1.0)
    #: whether the user agent's own faults change case verdicts (gating/user_agent.py): "auto" (gate, unless the
    #: user agent is the embedded model), "gate" or "report" (found and shown, never a verdict)
    user_agent_faults: Literal["auto", "gate", "report"] = "auto"
    #: the largest share of cases the user agent may spoil (inconclusive (user agent)) before the run is inconclusive
    max_user_agent_faults: float = Field(default=0.10, ge=0.0, le=1.0)
    gates: list[Gate] = Field(default_factory=list)
    #: per metric, the drop that does not matter (green bar) and the judge's drift (red bar), defaults merged in
    margin: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_MARGINS))
    drift: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_DRIFTS))

    @field_validator("margin", mode="before")
    @classmethod
    def _margins(cls, value: Any) -> dict[str, float]:
        return _per_metric(value, DEFAULT_MARGINS)

    @field_validator("drift", mode="before")
    @classmethod
    def _drifts(cls, value: Any) -> dict[str, float]:
        return _per_metric(value, DEFAULT_DRIFTS)

    @model_validator(mode="after")
    def _drift_within_margin(self) -> AggregateGates:
        for name, drift in self.drift.items():
            if drift > self.margin[name]:
                raise ValueError(f"drift: {name}: {drift:g} is more than its margin {self.margin[name]:g} (the judge's "
                                 "drift must not exceed the drop that does not matter)")
        return self


class CalibrationBars(BaseModel):
    """What ``personalens calibrate`` requires of a judge on the calibration set (defaults a strong model meets)."""

    model_config = ConfigDict(extra="forbid")

    #: chance-corrected agreement with the labels, the low end of its 95 % interval (calibration/agreement.py):
    #: Cohen's kappa for the verdict, quadratic-weighted kappa for the rated scales
    task_completion_kappa: float = Field(default=0.35, ge=-1, le=1)
    personalization_qwk: float = Field(default=0.25, ge=-1, le=1)
    naturalness_qwk: float = Field(default=0.25, ge=-1, le=1)
    coherence_qwk: float = Field(default=0.25, ge=-1, le=1)
    personalization_spearman: float = Field(default=0.6, ge=-1, le=1)
    naturalness_spearman: float = Field(default=0.5, ge=-1, le=1)
    coherence_spearman: float = Field(default=0.5, ge=-1, le=1)
    #: the share of its answers that must be readable scores
    min_answered: float = Field(default=0.95, ge=0, le=1)
    #: the share of pairs of repeated judgements of a dialogue that agree, averaged over dimensions (--repeat above 1)
    repeat_agreement: float = Field(default=0.7, ge=0, le=1)
    #: the most judge-addressed text may raise a score on average, per dimension, in its own units (missed when
    #: even the low end of the gain's 95 % interval is above it)
    max_injection_gain: float = Field(default=0.25, ge=0)
    #: no longer used (accuracy and all-repeats-alike do not separate judges; task_completion_kappa and
    #: repeat_agreement replace them): accepted so older files and reports still load
    task_completion_accuracy: Optional[float] = Field(default=None, ge=0, le=1)
    self_consistency: Optional[float] = Field(default=None, ge=0, le=1)


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    version: Literal[1] = 1
    scenario: ScenarioFloors = Field(default_factory=ScenarioFloors)
    aggregate: AggregateGates = Field(default_factory=AggregateGates)
    calibration: CalibrationBars = Field(default_factory=CalibrationBars)


@dataclass(frozen=True)
class Shortfall:
    metric: str
    value: Any
    floor: Any

    def describe(self) -> str:
        title = METRIC_BY_NAME[self.metric].title
        if isinstance(self.floor, bool):
            return f"{title}: the judge found the task not completed (required: completed)"
        return f"{title}: {self.value} is below the floor of {self.floor}"

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "floor": self.floor}


def default_thresholds_path() -> Path:
    return Path(str(resources.files("personalens_testkit.gating") / "default_thresholds.yaml"))


def load_thresholds(path: str | Path) -> Thresholds:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"cannot be read ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(path, None, f"not valid YAML: {problem}{where}") from None
    if data is None:
        raise ConfigError(path, None, "the file is empty: it sets no floor and no gate (write at least `version: 1`, "
                                      "and the floors and gates you want: see the shipped thresholds.yaml)")
    if not isinstance(data, dict):
        raise ConfigError(path, None, f"expected a mapping of settings at the top, found {type(data).__name__}")
    try:
        return Thresholds.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, *_explain(exc)) from None


def _explain(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    key = dotted(first["loc"])
    value = first.get("input")
    kind = first["type"]
    if kind == "extra_forbidden":
        return key, "unknown key (see the schema at the top of thresholds.yaml)"
    if key.startswith("aggregate."):
        message = first["msg"].removeprefix("Value error, ")
        if message.startswith("min: "):
            key, message = f"{key}.min", message.removeprefix("min: ")
        return key, f"{message} (got {value!r})" if "(got" not in message and kind != "value_error" else message
    if key == "version":
        return key, f"must be 1 (got {value!r})"
    metric = METRIC_BY_NAME.get(key.rsplit(".", 1)[-1])
    if metric is not None and metric.kind == "bool":
        return key, f"must be true, false or null (got {value!r})"
    if metric is not None:
        return key, f"must be a whole number from {metric.low} to {metric.high}, or null (got {value!r})"
    return key, f"{first['msg']} (got {value!r})"


def shortfalls(floors: ScenarioFloors, scores: dict[str, Any]) -> list[Shortfall]:
    """The scores below their floors, in metric order; an empty list means the scenario passes."""
    return [Shortfall(name, scores[name], floor) for name, floor in floors.model_dump().items()
            if below_floor(floor, scores[name])]


def below_floor(floor: Any, value: Any) -> bool:
    """Whether ``value`` misses ``floor`` (None or False: no floor; True: the task must be completed; a number: at
    least that level)."""
    if floor is None or floor is False:
        return False
    return value is not True if floor is True else value < floor
