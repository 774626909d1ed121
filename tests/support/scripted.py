"""A scripted in-process chat model: a test double for unit tests of prompts and dialogue logic.

End-to-end tests use real HTTP instead (tests.support.fake_llm, or the embedded server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from personalens_testkit.errors import ModelError
from personalens_testkit.llm.base import ChatRequest, ChatResponse


@dataclass
class ScriptedModel:
    """Answers from a list (in order) or a function of the request; records every request."""

    answers: list[str] | Callable[[ChatRequest], str] = field(default_factory=list)
    spec: str = "scripted"
    requests: list[ChatRequest] = field(default_factory=list)
    fail_on_call: int | None = None

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self.fail_on_call is not None and len(self.requests) == self.fail_on_call:
            raise ModelError("HTTP 503 from scripted: overloaded", model=self.spec, retryable=True)
        if callable(self.answers):
            text = self.answers(request)
        else:
            text = self.answers.pop(0)
        return ChatResponse(text=text, model=self.spec, prompt_tokens=10, completion_tokens=5)

    def close(self) -> None:
        pass
