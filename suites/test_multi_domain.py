"""PersonaLens multi-domain scenarios (tasks spanning 2-5 domains, up to 30 turns).

Each case simulates the dialogue (user agent <-> assistant under test), has the judge
score it, and checks the scores against the per-scenario floors in thresholds.yaml.
A model or judge-parsing failure makes the case an error, never a low score.
"""

import pytest

pytestmark = pytest.mark.personalens(task_kind="md")


def test_multi_domain(judged_dialogue, check_floors):
    check_floors(judged_dialogue)
