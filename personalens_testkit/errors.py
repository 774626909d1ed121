"""Every error the testkit raises on purpose, in one tree.

    PersonalensError                 root: one clear line for the user, never a traceback
    ├── UsageError                   a bad option, spec string or selection
    ├── DataError                    a benchmark data file is missing or malformed  (path, field)
    ├── ConfigError                  thresholds.yaml or [tool.personalens] is malformed  (path, key)
    ├── ModelError                   a model call failed (transport, HTTP status, server)
    │   └── ModelServerError         the embedded model server could not start or died
    └── JudgeAnswerError             a judge answer that cannot be parsed into scores

Backend exceptions (httpx, botocore, json) are translated into these at one boundary
each, with ``raise ... from exc`` so the cause is kept for debugging.
"""

from __future__ import annotations

from typing import Iterable


def dotted(location: Iterable[object]) -> str:
    """A field's location as ``a.b.3``; a part that is empty or not printable shows quoted, so a
    message stays on one line whatever the keys of a file are."""
    parts = (str(part) for part in location)
    return ".".join(part if part.isprintable() and part.strip() else repr(part) for part in parts)


class PersonalensError(Exception):
    """Root of the testkit's own errors; ``str(err)`` is a one-line message for the user."""

    #: set when the error came out of a model or assistant call: "user_agent", "assistant" or "judge"
    call_role: str | None = None


class UsageError(PersonalensError):
    """A command-line option, spec string or selection is not valid."""


class _FileProblem(PersonalensError):
    """A problem located in a file, and optionally at a field or key inside it: ``path: field: problem``."""

    def __init__(self, path: object, field: str | None, problem: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {problem}")


class DataError(_FileProblem):
    """A benchmark data file is missing or does not have the expected shape (``field``: where in it)."""


class ConfigError(_FileProblem):
    """A configuration file (thresholds.yaml, [tool.personalens]) is not valid (``field``: the key)."""


class ModelError(PersonalensError):
    """A call to a chat model failed; ``role`` says which part of the dialogue made it."""

    def __init__(self, message: str, *, model: str = "", role: str = "", retryable: bool = False) -> None:
        self.model = model
        self.role = role
        self.retryable = retryable
        super().__init__(message)

    def for_role(self, role: str) -> ModelError:
        """Return the same error labelled with the dialogue role that made the call."""
        self.role = role
        return self

    def __str__(self) -> str:
        prefix = f"{self.role} call to {self.model}" if self.role else f"call to {self.model}"
        return f"{prefix} failed: {self.args[0]}" if self.model else str(self.args[0])


class ModelServerError(ModelError):
    """The embedded model server could not be started, or stopped answering."""


class JudgeAnswerError(PersonalensError):
    """The judge's answer for one dimension could not be parsed into a valid score."""

    def __init__(self, dimension: str, raw: str, problem: str) -> None:
        self.dimension = dimension
        self.raw = raw
        self.problem = problem
        shown = raw if len(raw) <= 600 else raw[:600] + f"... [{len(raw) - 600} more characters]"
        super().__init__(f"judge answer for {dimension} could not be parsed ({problem}); raw answer: {shown!r}")


class ReplayMissError(PersonalensError):
    """A call that a cassette cannot answer and the record mode does not let through: which
    scenario, which call, why, and the command that re-records it."""
