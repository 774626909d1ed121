"""A judge dimension is one place: its row of ``scales.METRICS`` and its prompt template.

The test adds a dimension the way a developer would - a row appended to scales.py's table, here in a fresh
interpreter that reads that file with the row added - and finds it asked by the judge (its own template, its own
scale), scored in ``Scores``, given a floor by thresholds.yaml, and - as a dimension that rates the assistant - read by the
summaries, the baseline comparison and early stop as the paper's four are, with no other file touched."""

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
    from personalens_testkit.gating.compare import compare_rows
    from personalens_testkit.gating.thresholds import default_thresholds_path, load_thresholds
    from personalens_testkit.report.summary import table_header
    from personalens_testkit.results.rows import ResultRow
    from personalens_testkit.run.early_stop import EarlyStop
    from personalens_testkit.scales import HEADLINE
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

    def rows(helpfulness):
        return [ResultRow(scenario_id=f"user{i}-SD-Movies-task-1", task_kind="sd", domains=["Movies"], status="passed",
                          scores={"task_completion": True, "personalization": 3, "naturalness_user": 4,
                                  "naturalness_assistant": 4, "coherence_user": 4, "coherence_assistant": 4,
                                  "helpfulness_assistant": helpfulness(i)}) for i in range(60)]

    base, worse = rows(lambda i: 6 + i % 2), rows(lambda i: 1 + i % 2)
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
        "headline": list(HEADLINE),
        "summarised": sorted(summarise(base)["overall"].metrics),
        "compared": sorted({d.metric for d in compare_rows(base, worse).results}),
        "dropped": sorted({d.metric for d in compare_rows(base, worse).results if d.significant_drop}),
        "early_stop": sorted({test.metric for test in EarlyStop.build(load_thresholds(default_thresholds_path()).aggregate,
                                                                    ["Movies"], enforced=False, repeat=1,
                                                                    base_rows=base, margin=None).tests}),
        "summary_header": table_header(),
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
    # the assistant's dimension is read wherever the paper's four are: summaries, comparison, early stop
    assert found["headline"] == ["helpfulness_assistant", "task_completion", "personalization", "naturalness_assistant",
                                 "coherence_assistant"]
    assert "helpfulness_assistant" in found["summarised"] and "helpfulness_assistant" in found["compared"]
    assert found["dropped"] == ["helpfulness_assistant"]  # a drop of 5 levels on 60 scenarios, the others unchanged
    assert "helpfulness_assistant" in found["early_stop"]
    assert found["summary_header"].split()[-5:] == ["Help.", "TCR", "P", "Nat.", "Coh."]  # the terminal summary


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
