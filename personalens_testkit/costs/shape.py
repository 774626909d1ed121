"""The protocol's shape in tokens: a scenario's calls, and the tokens each carries, found by running the real
dialogue and judging code against stand-in models that answer at once (no model is called).

The user agent's, the assistant's and the judge's prompts are the ones a run sends - the scenario's profile,
preferences and task, the growing dialogue, ``--turn-level``, ``--leak-check``, ``--judge-retest`` - so the only
assumptions are how long the dialogue runs and how long each message is. Three cases bound a scenario:

- **short**: the user agent ends after the first reply; short messages;
- **typical**: 88 % of the turn limit, as the shipped recording's dialogues run (the user agent rarely ends
  early: 19.2 turns on average, most to the limit); messages of typical length;
- **long**: the dialogue runs to the turn limit (20 single-domain, 30 multi-domain); long messages.

Tokens are counted as characters / 4 (the usual English average of the models' tokenisers): a provider's
tokeniser differs by some percent, which the short/long range dwarfs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..agents.dialogue import turn_limit
from ..agents.judge import Judge
from ..agents.user_agent import UserAgent
from ..assistants.base import AssistantInput, AssistantReply, ContextSwitches
from ..assistants.reference import ReferenceAssistant
from ..data.loader import Dataset
from ..data.models import Scenario
from ..evaluation import Evaluator
from ..llm.base import ChatRequest, ChatResponse

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Length:
    """A dialogue length and its message sizes, in characters."""

    name: str
    #: turns as a share of the turn limit (at least 1 turn)
    share: float
    user: int
    assistant: int
    judge: int


SHORT = Length("short", 0.0, user=40, assistant=80, judge=100)
#: the shipped recording (cassettes/reference, 25 dialogues): 0.88 of the turn limit on average
TYPICAL = Length("typical", 0.88, user=160, assistant=600, judge=450)
LONG = Length("long", 1.0, user=320, assistant=1400, judge=900)
LENGTHS = (SHORT, TYPICAL, LONG)


def turns_of(length: Length, limit: int) -> int:
    return max(1, round(length.share * limit))


@dataclass
class StandIn:
    """A chat model that answers at once: the user agent ends after ``turns`` turns, the judge answers within its
    schema, and each answer has the length's size. Counts what it was sent."""

    length: Length
    turns: int
    spec: str = "stand-in"
    user_calls: int = 0

    def complete(self, request: ChatRequest) -> ChatResponse:
        prompt = sum(len(m.content) for m in request.messages)
        if request.json_schema is not None:
            text = stand_in_answer(request.json_schema, self.length.judge)
        elif request.purpose == "user_agent":
            self.user_calls += 1
            text = "x" * self.length.user + (" TERMINATE" if self.user_calls > self.turns else "")
        else:
            text = "x" * self.length.assistant
        return ChatResponse(text=text, model=self.spec, prompt_tokens=_tokens(prompt),
                            completion_tokens=_tokens(len(text)))

    def close(self) -> None:
        return None


@dataclass
class StandInBot:
    """A bot under test as the estimate sees it: it replies, and reports no tokens (its cost is its own)."""

    length: Length
    name: str = "bot"
    context: ContextSwitches = field(default_factory=ContextSwitches)

    def reply(self, turn: AssistantInput) -> AssistantReply:
        return AssistantReply(text="x" * self.length.assistant)

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def stand_in_answer(schema: dict[str, Any], size: int) -> str:
    """A valid answer to a judge request: the first value each field allows, the reason ``size`` characters."""
    properties = schema.get("properties", {})
    answer: dict[str, Any] = {}
    for name, spec in properties.items():
        answer[name] = _value(spec, size)
    return json.dumps(answer)


def _value(spec: dict[str, Any], size: int) -> Any:
    if "enum" in spec:
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "boolean":
        return True
    if kind == "integer":
        return spec.get("minimum", 1)
    if kind == "array":
        return [_value(spec.get("items", {}), size // 4) for _ in range(spec.get("minItems", 1))]
    if kind == "object":  # a review's fault: each of its fields
        return {name: _value(field, size // 4) for name, field in spec.get("properties", {}).items()}
    return "x" * size


def calls_of(dataset: Dataset, scenario: Scenario, length: Length, *, bot: bool, max_turns: int | None,
             turn_level: bool, turn_method: str, leak_check: bool, retest_share: float, context: ContextSwitches,
             variant: str, repeat: int = 1, review_user: bool = False) -> dict[str, list[int]]:
    """[calls, prompt tokens, completion tokens] per role of one scenario at ``length`` (a bot's tokens: 0)."""
    limit = turn_limit(scenario.kind, max_turns)
    model = StandIn(length, turns_of(length, limit))
    assistant: Any = StandInBot(length, context=context) if bot else ReferenceAssistant(model, context=context,
                                                                                          variant=variant)
    evaluator = Evaluator(dataset=dataset, user_agent=UserAgent(model), assistant=assistant,
                          judge=Judge(model, turn_method=turn_method), max_turns=max_turns, turn_level=turn_level,
                          leak_check=leak_check, reviewer=Judge(model) if review_user else None,
                          retest_share=retest_share)
    evaluation = evaluator.evaluate(scenario, repeat=repeat)
    if evaluation.error is not None:  # a stand-in that the code refused: a bug of this module, said plainly
        raise RuntimeError(f"estimating {scenario.scenario_id}: {evaluation.error.describe()}")
    found: dict[str, list[int]] = {}
    for call in evaluation.dialogue.log.records:
        entry = found.setdefault(call.role, [0, 0, 0])
        entry[0] += 1
        entry[1] += call.prompt_tokens or 0
        entry[2] += call.completion_tokens or 0
    return found
