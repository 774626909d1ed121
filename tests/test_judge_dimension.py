"""A judge dimension is one place: its row of ``scales.METRICS`` and its prompt template.

The test adds a dimension the way a developer would - a row appended to scales.py's table, here in a fresh
interpreter that reads that file with the row added - and finds it asked by the judge (its own template, its own
scale), scored in ``Scores``, given a floor by thresholds.yaml and reported, with no other file touched."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from personalens_testkit.agents.answers import SCHEMAS, answer_model, parse_answer, rating_answer
from personalens_testkit.agents.judge import rubric
from personalens_testkit.data import open_dataset
from personalens_testkit.data.context import build_context
from personalens_testkit.errors import JudgeAnswerError
from personalens_testkit.scales import METRICS

NEW_DIMENSION = textwrap.dedent('''
    import importlib.util, json, sys, types
    from pathlib import Path
    spec = importlib.util.find_spec("personalens_testkit.scales")
    source = Path(spec.origin).read_text()
    row = ('HELPFULNESS = Metric("helpfulness_assistant", "Helpfulness", 1, 7, "int", "assistant", "Help.", '
           '"judge_naturalness")\\n')
    source = source.replace("METRICS: tuple[Metric, ...] = (", row + "METRICS: tuple[Metric, ...] = (HELPFULNESS, ")
    scales = types.ModuleType("personalens_testkit.scales")
    scales.__file__ = spec.origin
    import personalens_testkit
    sys.modules["personalens_testkit.scales"] = scales
    exec(compile(source, spec.origin, "exec"), scales.__dict__)

    from personalens_testkit.agents.calls import CallLog
    from personalens_testkit.agents.judge import Judge
    from personalens_testkit.data import open_dataset
    from personalens_testkit.data.context import build_context
    from personalens_testkit.gating.aggregate import summarise
    from personalens_testkit.gating.thresholds import ScenarioFloors, shortfalls
    from personalens_testkit.llm.base import ChatResponse, Message

    class Model:
        spec = "scripted"
        def __init__(self):
            self.asked = []
        def complete(self, request):
            self.asked.append((request.schema_name, request.json_schema["properties"]))
            name = request.schema_name
            text = ('{"verdict": true, "explanation": "e"}' if name == "task_completion" else
                    '{"score": 3, "observations": [], "justification": "j", "suggestions": []}'
                    if name == "personalization" else
                    '{"score": 7, "justification": "very helpful"}' if name == "helpfulness_assistant" else
                    '{"score": 4, "justification": "r"}')
            return ChatResponse(text=text, model="scripted", prompt_tokens=1, completion_tokens=1)
        def close(self):
            pass

    dataset = open_dataset()
    scenario = next(s for s in dataset.scenarios_for(7) if s.task.task_id == "SD-Movies-task-1")
    model = Model()
    dialogue = [Message("user", "Can you set my alarm?"), Message("assistant", "Sure, for when?")]
    verdict = Judge(model).judge(build_context(dataset, scenario), dialogue, CallLog())
    floors = ScenarioFloors(helpfulness_assistant=7)
    print(json.dumps({
        "asked": [name for name, _ in model.asked],
        "enum": model.asked[0][1]["score"]["enum"],
        "scores": verdict.scores.model_dump(),
        "reason": verdict.reasons["helpfulness_assistant"],
        "missed": [s.metric for s in shortfalls(ScenarioFloors(helpfulness_assistant=7),
                                                {**verdict.scores.model_dump(), "helpfulness_assistant": 6})],
        "met": [s.metric for s in shortfalls(floors, verdict.scores.model_dump())],
    }))
''')


def test_a_new_dimension_is_its_row_and_its_template():
    done = subprocess.run([sys.executable, "-c", NEW_DIMENSION], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["asked"] == ["helpfulness_assistant", "task_completion", "personalization", "naturalness_user",
                              "naturalness_assistant", "coherence_user", "coherence_assistant"]
    assert found["enum"] == [1, 2, 3, 4, 5, 6, 7]  # its own scale, in the schema the judge is given
    assert found["scores"]["helpfulness_assistant"] == 7 and found["reason"] == "very helpful"
    assert found["missed"] == ["helpfulness_assistant"] and found["met"] == []


def test_every_dimension_prompt_fills_from_what_the_judge_has():
    dataset = open_dataset()
    ctx = build_context(dataset, next(s for s in dataset.scenarios_for(7) if s.task.task_id == "SD-Movies-task-1"))
    for metric in METRICS:
        text = rubric(metric, ctx)
        assert "$" not in text.replace("$$", ""), metric.name
        if metric.side != "dialogue":
            assert metric.side.upper() in text  # the rated side is named
            assert rubric(metric, None) == text  # and reads nothing of the scenario
    assert ctx.goal in rubric(METRICS[0], ctx)


def test_a_rating_on_another_scale_reads_only_that_scale():
    model = rating_answer(1, 7)
    assert SCHEMAS[model]["properties"]["score"]["enum"] == list(range(1, 8))
    assert parse_answer('{"score": 7, "justification": "x"}', model, "helpfulness").score == 7
    for wrong in ('{"score": 8, "justification": "x"}', '{"score": 0, "justification": "x"}',
                  '{"score": 6.0, "justification": "x"}'):
        with pytest.raises(JudgeAnswerError):
            parse_answer(wrong, model, "helpfulness")
    assert rating_answer(1, 7) is model and rating_answer(1, 5) is answer_model(METRICS[-1])
