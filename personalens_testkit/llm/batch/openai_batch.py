"""The OpenAI Batch API (and any endpoint that offers it): a job's requests uploaded as one JSONL file
(``POST /files``, purpose ``batch``), a batch made of it (``POST /batches``, window 24 h), its status read
(``GET /batches/{id}``), and its output and error files read back (``GET /files/{id}/content``), each line joined on
its ``custom_id``. Each request's body is what the online call sends (:meth:`OpenAICompatibleChat.payload`), each
answer's body read as the online answer is (:meth:`OpenAICompatibleChat.answer_of`): the same strict reading."""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

import httpx

from ... import untrusted_json
from ...errors import ModelError
from .. import json_body
from ..base import ChatRequest
from ..deadlines import http_failure
from ..openai_compat import OpenAICompatibleChat
from ..transport import bounded_client
from .jobs import BatchAnswer, BatchJob, BatchRequest, JobState, check_requests, joined

ENDPOINT = "/v1/chat/completions"
#: the most one results file may hold (OpenAI's input files take at most 200 MB; answers are shorter than prompts)
MAX_RESULTS_BYTES = 1 << 30
#: the most values one result line may hold (an answer's bound: untrusted_json.MAX_ANSWER_VALUES)
MAX_LINE_VALUES = untrusted_json.MAX_ANSWER_VALUES
_STATES = {"validating": "running", "in_progress": "running", "finalizing": "running", "cancelling": "running",
           "completed": "completed", "failed": "failed", "expired": "expired", "cancelled": "stopped"}


class ChatCompletionsCall:
    """The online call a record stands for: its body built from a request as the judge's client builds it, an answer
    read as the judge reads one, and an answer recorded as that call's."""

    def __init__(self, chat: OpenAICompatibleChat) -> None:
        self.chat = chat

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """A record's request body: the online call's."""
        return self.chat.payload(request)

    def read(self, record: str, body: Any) -> BatchAnswer:
        """A record's answer as the online call's answer is read (the same strict reading): an error ``unreadable``
        when it is not one clear answer."""
        try:
            return BatchAnswer(record, response=self.chat.answer_of(json.dumps(body)), body=body)
        except ModelError as exc:
            return BatchAnswer(record, error_code="unreadable", error=str(exc)[:500])

    def stored(self, answer: BatchAnswer) -> dict[str, Any]:
        """A record's answer as the online call's answer is stored: the chat completion, or the provider's error
        (HTTP 400: an answer, never retried), its code first."""
        if answer.ok:
            body, status = answer.body, {"code": 200, "message": "OK"}
        else:
            body = {"error": {"code": answer.error_code, "message": f"{answer.error_code}: {answer.error} (batch)"}}
            status = {"code": 400, "message": "Bad Request"}
        return {"status": status, "headers": {"content-type": ["application/json"]},
                "body": {"string": json.dumps(body, ensure_ascii=False).encode("utf-8")}}

    def request(self, body: Any) -> tuple[str, str, bytes]:
        """The online call that sends ``body``: (method, URL, body bytes)."""
        return "POST", f"{self.chat.base_url}/chat/completions", json_body.body(body)



class OpenAIBatch:
    """A batch engine on an OpenAI-compatible endpoint (``base_url`` ends in ``/v1``, as the chat model's does)."""

    name = "openai"
    minimum = 1
    maximum = 50_000

    def __init__(self, chat: OpenAICompatibleChat, *, timeout_s: float = 300.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.chat = chat
        self.call = ChatCompletionsCall(chat)
        self._client = bounded_client(timeout_s=timeout_s, base_url=chat.base_url, headers=chat.request_headers,
                                      transport=transport)

    def check(self) -> None:
        """That the endpoint offers the Batch API to this key (``GET /batches?limit=1``): a ModelError saying what it
        answered when it does not - before any dialogue of a run that will send its jobs there."""
        found = self._json("GET", "/batches", params={"limit": 1}).get("data")
        if not isinstance(found, list) or any(not isinstance(b, dict) or b.get("object") != "batch" for b in found):
            raise ModelError(f"GET /batches: {self.chat.base_url} answers, but not with a list of batches: it does not "
                             "offer the Batch API", model=self.chat.spec)

    def submit(self, requests: Sequence[BatchRequest], name: str) -> BatchJob:
        """Upload the requests and start their batch; the job as a run keeps it."""
        check_requests(requests, self)
        return self.submit_bodies([(r.record_id, self.call.body(r.request)) for r in requests], name)

    def submit_bodies(self, bodies: Sequence[tuple[str, Any]], name: str) -> BatchJob:
        """Start a batch of these request bodies, by record id (a failed record's own body, sent again as it was)."""
        if not self.minimum <= len(bodies) <= self.maximum or len({r for r, _ in bodies}) != len(bodies):
            raise ValueError(f"{len(bodies):,} records, each once: a {self.name} batch job takes {self.minimum:,} to "
                             f"{self.maximum:,}")
        lines = [json.dumps({"custom_id": record, "method": "POST", "url": ENDPOINT, "body": body},
                            ensure_ascii=False) for record, body in bodies]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = self._json("POST", "/files", files={"file": (f"{name}.jsonl", data, "application/jsonl")},
                              data={"purpose": "batch"})
        batch = self._json("POST", "/batches", json={"input_file_id": _text(uploaded, "id"), "endpoint": ENDPOINT,
                                                      "completion_window": "24h", "metadata": {"name": name}})
        return BatchJob(engine=self.name, job_id=_text(batch, "id"), record_ids=tuple(r for r, _ in bodies),
                        places={"input_file_id": _text(uploaded, "id")})

    def state(self, job: BatchJob) -> JobState:
        batch = self._json("GET", f"/batches/{job.job_id}")
        status = str(batch.get("status"))
        counts = batch.get("request_counts") if isinstance(batch.get("request_counts"), dict) else {}
        errors = (batch.get("errors") or {}).get("data") if isinstance(batch.get("errors"), dict) else None
        message = "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict)) if errors else ""
        state = _STATES.get(status)
        if state is None:
            raise ModelError(f"the batch {job.job_id} is in a state not known here: {status[:60]!r}", model=self.chat.spec)
        return JobState(state=state, answered=_count(counts.get("completed")), failed=_count(counts.get("failed")),  # type: ignore[arg-type]
                        total=_count(counts.get("total")), status=status, message=message)

    def answers(self, job: BatchJob) -> list[BatchAnswer]:
        """One answer per record of a finished job, in the job's order: the output file's answers, the error file's
        errors, and an error for each record neither holds (an expired or failed batch answers part or none)."""
        batch = self._json("GET", f"/batches/{job.job_id}")
        found: dict[str, BatchAnswer] = {}
        for key in ("error_file_id", "output_file_id"):  # an answer read from the output stands over an error
            file_id = batch.get(key)
            if isinstance(file_id, str) and file_id:
                for line in self._lines(file_id):
                    answer = self._answer(line)
                    if answer is not None:
                        found[answer.record_id] = answer
        status = str(batch.get("status"))
        return joined(job, found, missing=f"no result: the batch ended {status}")

    def sent(self, job: BatchJob) -> dict[str, Any]:
        """What the provider holds as sent with each record of a job (its input file): the request body by record id."""
        found: dict[str, Any] = {}
        for line in self._lines(job.places.get("input_file_id", "")):
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str) and line.get("url") == ENDPOINT \
                    and isinstance(line.get("body"), dict):
                found[line["custom_id"]] = line["body"]
        return found

    def online(self, record: str, body: Any) -> BatchAnswer:
        """A record sent as one online call (fewer records than a job takes): its answer or its error."""
        try:
            answer = self._json("POST", "/chat/completions", json=body)
        except ModelError as exc:
            return BatchAnswer(record, error_code="online", error=str(exc)[:500])
        return self.call.read(record, answer)

    def close(self) -> None:
        self._client.close()

    # -- the wire ---------------------------------------------------------------------------------------------------
    def _answer(self, line: Any) -> BatchAnswer | None:
        """A result line as a record's answer (None: a line that names no record)."""
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            return None
        record = line["custom_id"]
        response, error = line.get("response"), line.get("error")
        status = response.get("status_code") if isinstance(response, dict) else None
        if isinstance(error, dict) or status != 200:
            detail = error if isinstance(error, dict) else ((response or {}).get("body") or {}).get("error") or {}
            code = str(detail.get("code") or status or "error") if isinstance(detail, dict) else str(status)
            text = str(detail.get("message", "")) if isinstance(detail, dict) else ""
            return BatchAnswer(record, error_code=code, error=text[:500] or f"HTTP {status}")
        return self.call.read(record, response.get("body"))

    def _lines(self, file_id: str) -> Iterator[Any]:
        """A results file's lines, each read as untrusted JSON (a line that is not: skipped, its record then has no
        result), the file no larger than :data:`MAX_RESULTS_BYTES`."""
        read = 0
        try:
            with self._client.stream("GET", f"/files/{file_id}/content") as response:
                self._check(response, f"reading the results file {file_id}", body=b"")
                for text in response.iter_lines():
                    read += len(text) + 1
                    if read > MAX_RESULTS_BYTES:
                        raise ModelError(f"the results file {file_id} holds more than {MAX_RESULTS_BYTES:,} bytes",
                                         model=self.chat.spec)
                    if text.strip():
                        try:
                            yield untrusted_json.loads(text, max_values=MAX_LINE_VALUES)
                        except ValueError:
                            continue
        except httpx.TransportError as exc:
            raise http_failure(exc, what="no results file", url=self.chat.base_url, model=self.chat.spec) from exc

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise http_failure(exc, what=f"no answer to {method} {path}", url=self.chat.base_url,
                               model=self.chat.spec) from exc
        self._check(response, f"{method} {path}", body=response.content)
        try:
            found = untrusted_json.loads(response.content, max_values=MAX_LINE_VALUES)
        except ValueError as exc:
            raise ModelError(f"{method} {path}: the answer is not one JSON object ({exc})", model=self.chat.spec,
                             retryable=True) from exc
        if not isinstance(found, dict):
            raise ModelError(f"{method} {path}: the answer is not one JSON object", model=self.chat.spec)
        return found

    def _check(self, response: httpx.Response, what: str, *, body: bytes) -> None:
        if response.status_code >= 400:
            text = body.decode("utf-8", "replace")[:300] if body else ""
            raise ModelError(f"{what}: HTTP {response.status_code} from {self.chat.base_url}: {text}".rstrip(": "),
                             model=self.chat.spec, retryable=response.status_code in (429, 500, 502, 503, 504))


def _text(found: dict[str, Any], key: str) -> str:
    value = found.get(key)
    if not isinstance(value, str) or not value:
        raise ModelError(f"the batch API's answer has no {key}: {json.dumps(found)[:200]}")
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
