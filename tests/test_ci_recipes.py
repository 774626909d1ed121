"""The CI recipes in examples/ci parse as workflows and use only options the plugin has."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from personalens_testkit.settings import SETTINGS

RECIPES = sorted((Path(__file__).resolve().parent.parent / "examples" / "ci").glob("*.yml"))


def plugin_options() -> set[str]:
    """The options the plugin registers (every setting of the table that has one)."""
    return {setting.option for setting in SETTINGS if setting.option}


#: the options of `personalens gate` a workflow may use (the interface the generated workflow is written against)
GATE_OPTIONS = {"--base", "--target", "--start", "--health-url", "--start-timeout", "--record-mode", "--out"}


def gate_parser_options() -> set[str]:
    """The long options `personalens gate` really has."""
    from personalens_testkit.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {o for action in sub.choices["gate"]._actions for o in action.option_strings if o.startswith("--")}


def without_comments(script: str) -> str:
    return "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))


@pytest.mark.parametrize("path", RECIPES, ids=[p.name for p in RECIPES])
def test_recipes_are_workflows_that_use_real_options(path):
    workflow = yaml.safe_load(path.read_text())
    assert workflow["jobs"] and (True in workflow or "on" in workflow)  # YAML reads the key `on` as true
    scripts = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    commands = " ".join(scripts)
    runs = re.findall(r"pytest suites/[^\n]*(?:\n\s+--[^\n]*)*", commands) or re.findall(r"pytest suites/.*", commands)
    gates = [without_comments(script) for script in scripts if "personalens gate" in script]
    assert runs or gates, "no pytest suites/ run and no personalens gate run in the recipe"
    used = set(re.findall(r"(--[a-z][a-z-]+)", " ".join(runs))) - {"--"}
    assert used <= plugin_options() | {"-n"}, used - plugin_options()
    gate_used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", " ".join(gates)))
    assert gate_used <= GATE_OPTIONS, gate_used - GATE_OPTIONS
    assert gate_used <= gate_parser_options(), gate_used - gate_parser_options()


def test_no_recipe_needs_a_python_project_or_interpolates_into_a_script():
    for path in RECIPES:
        workflow = yaml.safe_load(path.read_text())
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                assert "-e ." not in step.get("run", ""), path.name
                assert "cache" not in step.get("with", {}), path.name  # setup-python's pip cache needs a pyproject
                assert "${{ vars." not in step.get("run", "") and "${{ secrets." not in step.get("run", ""), path.name


def test_the_live_recipe_uses_oidc_not_stored_keys():
    live = yaml.safe_load((RECIPES[0].parent / "personalens-live-bedrock.yml").read_text())
    assert live["permissions"]["id-token"] == "write"
    steps = live["jobs"]["live"]["steps"]
    aws = next(s for s in steps if s.get("uses", "").startswith("aws-actions/configure-aws-credentials"))
    assert "role-to-assume" in aws["with"] and "aws-access-key-id" not in aws["with"]
    assert "schedule" in live[True]
