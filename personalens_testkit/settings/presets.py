"""Presets: named sets of settings. ``paper`` is the paper's set-up; a project may add its own as
``[presets.NAME]`` tables of its config, with any of the config's settings.

A preset's values sit just above the level that names it: ``--preset`` on the command line puts
them above the environment and the project config (only options given explicitly win over
them), ``preset = "NAME"`` in the config puts them above the defaults only (the config's own keys
win). The run header says which preset ran.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import UsageError

#: The paper's set-up (Zhao et al. 2025; amazon-science/PersonaLens at e755f90): Claude 3 Sonnet plays the
#: user (temperature 0.5, 800 tokens) and, in the ablations, the assistant (temperature 0, 800 tokens, the
#: prompt variant of its family); Claude 3.5 Sonnet v2 judges (temperature 0, 4,000 tokens); 20 turns
#: single-domain, 30 multi-domain; the 50-profile sample; turn-level personalization by one chain-of-turn
#: call; an unreadable completion verdict counted as not completed; replies kept whole; no time limit on a
#: scenario. Sampling and token budgets are the testkit's own defaults, which are the paper's.
PAPER: dict[str, Any] = {
    "user_model": "bedrock:anthropic.claude-3-sonnet-20240229-v1:0",
    "judge_model": "bedrock:us.anthropic.claude-3-5-sonnet-20241022-v2:0",
    "assistant_model": "bedrock:anthropic.claude-3-sonnet-20240229-v1:0",
    "sample": "50",
    "turn_level_method": "chain",
    "completion_counting": "paper",
    "reply_cut": "none",
    "scenario_timeout_s": 0,  # no time limit: the paper's code has none, so no slow scenario is dropped
}
BUILTIN_PRESETS: dict[str, dict[str, Any]] = {"paper": PAPER}


def preset_values(name: str, defined: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of the preset ``name``: a [presets.NAME] table of the config, or a built-in one."""
    if name in defined:
        table = defined[name]
        return {key: value for key, value in table.model_dump().items() if value is not None}
    if name in BUILTIN_PRESETS:
        return dict(BUILTIN_PRESETS[name])
    known = sorted(set(BUILTIN_PRESETS) | set(defined))
    raise UsageError(f"--preset: unknown preset {name!r} (known: {', '.join(known)})")
