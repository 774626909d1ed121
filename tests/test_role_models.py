"""Each role's model is resolved once for the run (``RunSettings.role_models``): its spec is parsed when the settings
are read and when the run first asks for it, never again per case, per call or per report line."""

from __future__ import annotations

from collections import Counter

import pytest

from personalens_testkit.llm import registry
from personalens_testkit.llm.entries import parse_spec
from personalens_testkit.llm.registry import RoleModel, resolve_role

from .support.fake_llm import FakeLLM, Script
from .support.project import suite_project


def parses_in_a_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cases: str) -> Counter:
    counted: Counter = Counter()

    def counting(spec: str):
        counted[spec] += 1
        return parse_spec(spec)

    monkeypatch.setattr(registry, "parse_spec", counting)
    result = pytester.runpytest("--profiles", "7", "--domains", "Alarm", "--max-turns", "1", "-k", cases,
                                "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:]
    return counted


def test_a_spec_is_parsed_as_often_for_four_cases_as_for_one(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch):
    with FakeLLM(Script(terminate_after=1)) as fake:
        suite_project(pytester, f'user_model = "openai:fake-user"\njudge_model = "openai:fake-judge"\n'
                                f'assistant_model = "openai:fake-bot"\nopenai_base_url = "{fake.url}"\n'
                                'record_mode = "all"\n')
        one = parses_in_a_run(pytester, monkeypatch, "task-1")
        four = parses_in_a_run(pytester, monkeypatch, "task-1 or task-2 or task-3 or task-4")
    assert one == four, (one, four)
    assert one["openai:fake-judge"] <= 2  # read with the settings, resolved for the run


@pytest.mark.parametrize(("named", "models", "label", "spec"), [
    ("openai:gpt-4o", {}, "openai:gpt-4o", "openai:gpt-4o"),
    ("judge-prod", {"judge-prod": parse_spec("openai:gpt-4o")}, "judge-prod (openai:gpt-4o)", "openai:gpt-4o"),
    ("local", {}, "local", "local"),
])
def test_a_role_model_carries_its_entry_its_spec_and_its_label(named, models, label, spec):
    model = resolve_role("judge", named, models)
    assert isinstance(model, RoleModel) and model.named == named and model.role == "judge"
    assert model.label == label and model.spec == spec and model.entry.spec() == spec
    assert (model.local(registry.LocalServerSettings()) is not None) == (spec == "local")
