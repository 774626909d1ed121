"""Bad input, generated: whatever a thresholds file, a config table or a judge's answer holds,
the testkit answers with its documented error type and a one-line message - never a crash
or a traceback. (The data loader's fuzz tests are in test_data.py.)"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personalens_testkit.agents.answers import PersonalizationAnswer, RatingAnswer, TaskCompletionAnswer, parse_answer
from personalens_testkit.settings import resolve_settings
from personalens_testkit.errors import ConfigError, JudgeAnswerError, PersonalensError
from personalens_testkit.gating.thresholds import Thresholds, load_thresholds

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(-10, 10, allow_nan=False),
                    st.text(string.ascii_letters + ":_ ", max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(string.ascii_lowercase + "_:", max_size=12),
                                                                       inner, max_size=3)), max_leaves=8)
keys = st.sampled_from(["version", "scenario", "aggregate", "gates", "metric", "scope", "statistic", "min",
                        "personalization", "task_completion", "confidence", "resamples", "x"])
thresholds_like = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                st.dictionaries(keys, inner, max_size=4)), max_leaves=10)


def one_line(exc: BaseException) -> None:
    message = str(exc)
    assert message and "\n" not in message and "Traceback" not in message


@FUZZ
@given(thresholds_like)
def test_any_thresholds_file_loads_or_is_one_config_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("t") / "thresholds.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        assert isinstance(load_thresholds(path), Thresholds)
    except ConfigError as exc:
        one_line(exc)
        assert str(exc).startswith(str(path))


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_as_thresholds_file(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("t") / "thresholds.yaml"
    path.write_bytes(raw)
    try:
        load_thresholds(path)
    except ConfigError as exc:
        one_line(exc)


config_keys = st.sampled_from(["user_model", "judge_model", "assistant", "assistant_model", "assistant_context",
                               "record_mode", "retries", "max_rps", "thresholds", "local", "models", "assistants",
                               "kind", "model", "url", "context", "timeout_s", "scenario_timeout_s", "n_ctx", "bogus"])
config_like = st.dictionaries(config_keys, st.recursive(
    scalars, lambda inner: st.dictionaries(st.one_of(config_keys, st.text(string.ascii_lowercase + "-", min_size=1,
                                                                               max_size=8)), inner, max_size=3),
    max_leaves=8), max_size=4)


def _toml(table: dict, prefix: str = "tool.personalens") -> str:
    """A small TOML writer (tomllib only reads): scalars, nested tables; lists of scalars."""
    lines, subtables = [f"[{prefix}]"], []
    for key, value in table.items():
        name = f'"{key}"'
        if isinstance(value, dict):
            subtables.append(_toml(value, f"{prefix}.{name}"))
        elif value is None:
            continue
        elif isinstance(value, bool):
            lines.append(f"{name} = {str(value).lower()}")
        elif isinstance(value, (int, float)):
            lines.append(f"{name} = {value!r}")
        elif isinstance(value, list):
            items = [repr(v).replace("'", '"') for v in value if isinstance(v, (str, int)) and not isinstance(v, bool)]
            lines.append(f"{name} = [{', '.join(items)}]")
        else:
            lines.append(f"{name} = {value!r}".replace("'", '"'))
    return "\n".join(lines) + "\n" + "\n".join(subtables)


@FUZZ
@given(config_like)
def test_any_config_table_resolves_or_is_one_error(tmp_path_factory, table):
    root = tmp_path_factory.mktemp("p")
    (root / "pyproject.toml").write_text(_toml(table))
    try:
        resolve_settings({}, root, {})
    except PersonalensError as exc:
        one_line(exc)


answers = st.one_of(
    st.text(max_size=200),
    st.builds(lambda s, j: f'{{"score": {s}, "justification": {j!r}}}'.replace("'", '"'),
              st.one_of(st.integers(-3, 9), st.floats(0, 6, allow_nan=False), st.just('"3"'), st.just("null")),
              st.text(string.ascii_letters + " ", max_size=20)),
    st.builds(lambda v: f"VERDICT: {v}\nExplanation: because", st.sampled_from(["True", "false", "maybe", "1", ""])),
    st.builds(lambda s: f"Personalization Score: {s}\nJustification: ok", st.text("0123456789.-", max_size=4)),
)


@FUZZ
@given(answers, st.sampled_from([TaskCompletionAnswer, PersonalizationAnswer, RatingAnswer]))
def test_any_judge_answer_parses_to_a_valid_score_or_is_a_judge_answer_error(raw, model):
    try:
        answer = parse_answer(raw, model, "personalization")
    except JudgeAnswerError as exc:
        assert exc.raw == raw and exc.dimension == "personalization"
        assert "\n" not in str(exc).replace(repr(raw)[1:-1], "")  # one line, apart from the quoted answer
        return
    if model is TaskCompletionAnswer:
        assert isinstance(answer.verdict, bool)
    else:
        allowed = range(1, 5) if model is PersonalizationAnswer else range(1, 6)
        assert answer.score in allowed


@pytest.mark.parametrize("raw", ["", "   ", "```json\n```", "Score: 7", '{"score": "high"}', "{" * 50])
def test_known_bad_answers_are_errors(raw):
    with pytest.raises(JudgeAnswerError):
        parse_answer(raw, RatingAnswer, "naturalness_user")


def test_thresholds_file_named_in_errors_is_the_real_path(tmp_path: Path):
    path = tmp_path / "t.yaml"
    path.write_text("aggregate: {gates: [{metric: personalization, min: 9}]}")
    with pytest.raises(ConfigError, match=r"t\.yaml: aggregate\.gates\.0\.min: Personalization is rated from 1 to 4"):
        load_thresholds(path)
