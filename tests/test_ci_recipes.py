"""The CI recipes in examples/ci parse as workflows and use only options the plugin has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from personalens_testkit.settings import SETTINGS

RECIPES = sorted((Path(__file__).resolve().parent.parent / "examples" / "ci").glob("*.yml"))


def plugin_options() -> set[str]:
    """The options the plugin registers (every setting of the table that has one)."""
    return {setting.option for setting in SETTINGS if setting.option}


@pytest.mark.parametrize("path", RECIPES, ids=[p.name for p in RECIPES])
def test_recipes_are_workflows_that_use_real_options(path):
    workflow = yaml.safe_load(path.read_text())
    assert workflow["jobs"] and (True in workflow or "on" in workflow)  # YAML reads the key `on` as true
    commands = " ".join(step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"])
    runs = re.findall(r"pytest suites/[^\n]*(?:\n\s+--[^\n]*)*", commands) or re.findall(r"pytest suites/.*", commands)
    assert runs, "no pytest suites/ run in the recipe"
    used = set(re.findall(r"(--[a-z][a-z-]+)", " ".join(runs))) - {"--"}
    assert used <= plugin_options() | {"-n"}, used - plugin_options()


def test_the_live_recipe_uses_oidc_not_stored_keys():
    live = yaml.safe_load((RECIPES[0].parent / "personalens-live-bedrock.yml").read_text())
    assert live["permissions"]["id-token"] == "write"
    steps = live["jobs"]["live"]["steps"]
    aws = next(s for s in steps if s.get("uses", "").startswith("aws-actions/configure-aws-credentials"))
    assert "role-to-assume" in aws["with"] and "aws-access-key-id" not in aws["with"]
    assert "schedule" in live[True]
