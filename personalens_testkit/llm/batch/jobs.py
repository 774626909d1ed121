"""What a batch engine takes and gives, whichever the provider.

A job is submitted with its requests, each under a record id (:func:`record_ids`: eleven letters and digits, what
every provider accepts), and kept as a :class:`BatchJob` - a plain, JSON-able value: a run may end while its jobs
run, and a later process collects them by it. A job's :class:`JobState` says whether it still runs; once it does not,
:meth:`BatchEngine.answers` gives one :class:`BatchAnswer` per record submitted, joined on the record id (providers
answer out of order): the chat response, or the provider's error code and message - a record the provider's results
lack (an expired or failed job) is an error too, never left out.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, Sequence

from ..base import ChatRequest, ChatResponse

#: a record id: eleven letters and digits (Bedrock's form; OpenAI takes any string)
RECORD_ID = re.compile(r"^[A-Za-z0-9]{11}$")
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

State = Literal["running", "completed", "failed", "expired", "stopped"]
#: the states in which a job's answers are final (what it answered, and an error for every other record)
FINISHED: frozenset[str] = frozenset({"completed", "failed", "expired", "stopped"})


def record_ids(count: int, prefix: str = "R") -> list[str]:
    """``count`` distinct record ids: ``prefix`` (a letter or digit) and a number in base 36, eleven characters."""
    if len(prefix) != 1 or not prefix.isalnum() or not prefix.isascii():
        raise ValueError(f"a record id's prefix is one letter or digit, not {prefix!r}")
    if count > 36 ** 10:
        raise ValueError(f"{count:,} records: more than record ids can tell apart")
    return [prefix + _base36(n).rjust(10, "0") for n in range(count)]


def _base36(n: int) -> str:
    digits = ""
    while True:
        n, rest = divmod(n, 36)
        digits = _ALPHABET[rest] + digits
        if not n:
            return digits


@dataclass(frozen=True)
class BatchRequest:
    record_id: str
    request: ChatRequest

    def __post_init__(self) -> None:
        if not RECORD_ID.match(self.record_id):
            raise ValueError(f"record id {self.record_id!r}: eleven letters and digits expected (record_ids())")


@dataclass(frozen=True)
class BatchAnswer:
    """One record's outcome: its chat response, or the provider's error (its code, as the provider gives it, and
    message)."""

    record_id: str
    response: ChatResponse | None = None
    error_code: str | None = None
    error: str | None = None
    #: the provider's answer as its online call returns it (a chat completion's body, a Converse answer), for a
    #: recording; None for a record in error
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.response is not None


@dataclass(frozen=True)
class BatchJob:
    """A submitted job, as a run keeps it (:meth:`as_dict`) to collect it later, in another process if need be."""

    engine: str
    job_id: str
    #: the record ids submitted, in order
    record_ids: tuple[str, ...]
    #: where the engine put what it needs to find the results again (a file id, an S3 location), by name
    places: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "record_ids": list(self.record_ids)}

    @classmethod
    def from_dict(cls, data: Any) -> BatchJob:
        """A kept job read back; a ValueError naming the field that is not what a job keeps."""
        if not isinstance(data, dict):
            raise ValueError("a batch job: an object expected")
        for name in ("engine", "job_id"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"a batch job's {name}: a text expected")
        ids, places = data.get("record_ids"), data.get("places", {})
        if not isinstance(ids, list) or not all(isinstance(i, str) and RECORD_ID.match(i) for i in ids):
            raise ValueError("a batch job's record_ids: a list of record ids expected")
        if len(set(ids)) != len(ids):
            raise ValueError("a batch job's record_ids: a record id given twice")
        if not isinstance(places, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in places.items()):
            raise ValueError("a batch job's places: an object of texts expected")
        return cls(engine=data["engine"], job_id=data["job_id"], record_ids=tuple(ids), places=dict(places))


@dataclass(frozen=True)
class JobState:
    state: State
    #: records answered, records in error, records in all (as the provider counts them so far; None: not said)
    answered: int | None = None
    failed: int | None = None
    total: int | None = None
    #: the provider's own word for the state, and its message if it gave one
    status: str = ""
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


class OnlineCall(Protocol):
    """The online call a batch record stands for, as the judge's own client makes it."""

    def body(self, request: ChatRequest) -> Any: ...
    def read(self, record: str, body: Any) -> BatchAnswer: ...
    def stored(self, answer: BatchAnswer) -> dict[str, Any]: ...
    def request(self, body: Any) -> tuple[str, str, bytes]: ...


class BatchEngine(Protocol):
    """A provider's batch engine: what a run sends (each record's request body, as the online call sends it:
    :attr:`call`), what it reads back (each record's answer, read as the online answer is), and the online call a
    collected answer is recorded as the answer to."""

    #: ``openai`` or ``bedrock``: what a kept job names
    name: str
    #: the fewest and the most records one job takes
    minimum: int
    maximum: int
    call: OnlineCall

    def check(self) -> None: ...
    def submit(self, requests: Sequence[BatchRequest], name: str) -> BatchJob: ...
    def submit_bodies(self, bodies: Sequence[tuple[str, Any]], name: str) -> BatchJob: ...
    def state(self, job: BatchJob) -> JobState: ...
    def answers(self, job: BatchJob) -> list[BatchAnswer]: ...
    def sent(self, job: BatchJob) -> dict[str, Any]: ...
    def online(self, record: str, body: Any) -> BatchAnswer: ...
    def close(self) -> None: ...


def joined(job: BatchJob, found: dict[str, BatchAnswer], missing: str) -> list[BatchAnswer]:
    """One answer per record of ``job``, in its order: the one found, else an error saying ``missing`` (a record the
    results lack). A result for a record the job never held is no answer of it: left out."""
    return [found.get(record) or BatchAnswer(record, error_code="missing", error=missing) for record in job.record_ids]


def check_requests(requests: Sequence[BatchRequest], engine: BatchEngine) -> None:
    """A job's requests within the engine's bounds, each record id once; a ValueError saying what is wrong."""
    if not engine.minimum <= len(requests) <= engine.maximum:
        raise ValueError(f"{len(requests):,} records: a {engine.name} batch job takes {engine.minimum:,} to "
                         f"{engine.maximum:,}")
    ids = [r.record_id for r in requests]
    if len(set(ids)) != len(ids):
        raise ValueError("a record id given twice in one job")
