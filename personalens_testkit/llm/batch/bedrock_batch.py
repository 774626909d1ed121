"""Amazon Bedrock batch inference: a job's requests written to S3 as JSONL records ``{recordId, modelInput}`` in the
Converse form (what the online call sends, :meth:`BedrockChat.converse_args`, less the model id - the job names it -
and less the tool that constrains the answer: batch jobs take none, so the judge's answer is read as free text
through the same strict grammar), a job made of them (``CreateModelInvocationJob``, ``modelInvocationType``
Converse), its status read (``GetModelInvocationJob``), and its output (``*.jsonl.out`` under the job's output
location) read back, each line joined on its ``recordId``. A job takes at least 100 records: fewer are sent online,
one Converse call each (:meth:`BedrockBatch.online`).

A collected answer is recorded as the answer to the online call the judge's client makes (:meth:`BedrockBatch.record`):
botocore builds that call - its URL, its JSON - from the provider's copy of the record's input, as the judge's own
client does when it replays, so a recording made here replays exactly like one made online."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Sequence

from ... import untrusted_json
from ...errors import ModelError
from ..base import ChatRequest
from ..bedrock import BedrockChat, credential_problem, make_client
from .jobs import BatchAnswer, BatchJob, BatchRequest, JobState, check_requests, joined

#: the most one output object may hold
MAX_RESULTS_BYTES = 1 << 30
_S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?$")
_JOB_NAME = re.compile(r"^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9+\-.]){0,63}$")
_STATES = {"Submitted": "running", "Validating": "running", "Scheduled": "running", "InProgress": "running",
           "Stopping": "running", "Completed": "completed", "PartiallyCompleted": "completed", "Failed": "failed",
           "Stopped": "stopped", "Expired": "expired"}


def s3_location(uri: str) -> tuple[str, str]:
    """(bucket, key prefix ending in ``/`` or empty) of an ``s3://bucket/prefix`` URI; a ValueError saying what is
    expected."""
    found = _S3_URI.match(uri)
    if found is None:
        raise ValueError(f"{uri!r}: an S3 location s3://BUCKET/PREFIX expected")
    prefix = (found.group(2) or "").strip("/")
    return found.group(1), f"{prefix}/" if prefix else ""


class ConverseCall:
    """The online Converse call a record stands for: its input built from a request as the judge's client builds it
    (less the model, which the job names), an answer read as the judge reads one, and an answer recorded as that
    call's."""

    def __init__(self, chat: BedrockChat) -> None:
        self.chat = chat
        self._recorder: Any = None
        self._built: tuple[str, str, bytes] | None = None

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """A record's Converse input: the online call's, free text (no tool), the model named by the job."""
        args = self.chat.converse_args(replace(request, json_schema=None))
        args.pop("modelId", None)
        return args

    def read(self, record: str, body: Any) -> BatchAnswer:
        """A record's answer as the online call's answer is read (the same strict reading): an error ``unreadable``
        when it is not one clear answer."""
        try:
            return BatchAnswer(record, response=self.chat.answer_of(body), body=body)
        except ModelError as exc:
            return BatchAnswer(record, error_code="unreadable", error=str(exc)[:500])

    def stored(self, answer: BatchAnswer) -> dict[str, Any]:
        """A record's answer as the online call's answer is stored: the Converse answer, or the provider's error as
        Bedrock's error answer (HTTP 400, a validation error: never retried), its code first."""
        if answer.ok:
            body, status, headers = answer.body, {"code": 200, "message": "OK"}, {}
        else:
            body = {"message": f"{answer.error_code}: {answer.error} (batch)"}
            status, headers = {"code": 400, "message": "Bad Request"}, {"x-amzn-errortype": ["ValidationException"]}
        return {"status": status, "headers": {"content-type": ["application/json"], **headers},
                "body": {"string": json.dumps(body, ensure_ascii=False).encode("utf-8")}}

    def request(self, body: Any) -> tuple[str, str, bytes]:
        """The online Converse call of ``body`` - (method, URL, body bytes) - as botocore builds it (placeholder
        credentials; nothing leaves the machine), as the judge's replaying client builds it; a ModelError, in one line,
        when ``body`` is no Converse input."""
        from botocore.exceptions import ClientError, ParamValidationError

        if self._recorder is None:
            self._recorder = make_client(self.chat.region, endpoint_url=self.chat.endpoint_url, replay_only=True,
                                         exchange=self._exchange)
        self._built = None
        try:
            self._recorder.converse(modelId=self.chat.model_id, **body)
        except ClientError:
            pass  # the placeholder answer: the call was built
        except (ParamValidationError, TypeError) as exc:
            raise ModelError(f"a record's input is not a Converse request ({' '.join(str(exc).split())})",
                             model=self.chat.spec) from None
        assert self._built is not None
        return self._built

    def _exchange(self, method: str, uri: str, body: bytes, payload: Any, send: Any) -> dict[str, Any]:
        self._built = (method, uri, body)
        return self.stored(BatchAnswer("R0000000000", error_code="built", error="not sent"))

    def close(self) -> None:
        if self._recorder is not None:
            self._recorder.close()
        self.chat.close()


class BedrockBatch:
    """A batch engine on Bedrock: ``role_arn`` (a service role Bedrock assumes to read and write ``s3_uri``) - both
    needed to submit, neither to collect (a kept job names its places); ``bedrock`` and ``s3``: boto3's clients of
    the control plane and of S3."""

    name = "bedrock"
    minimum = 100
    maximum = 50_000

    def __init__(self, chat: BedrockChat, *, role_arn: str | None, s3_uri: str | None, bedrock: Any, s3: Any,
                 timeout_hours: int = 24) -> None:
        self.chat, self.role_arn, self.timeout_hours = chat, role_arn, timeout_hours
        self.bucket, self.prefix = s3_location(s3_uri) if s3_uri else ("", "")
        self._bedrock, self._s3 = bedrock, s3
        self.call = ConverseCall(chat)
        #: each job as Bedrock describes it, and its output's lines, read once (by job ARN)
        self._jobs: dict[str, dict[str, Any]] = {}
        self._read: dict[str, list[Any]] = {}

    def check(self) -> None:
        """That a job can be made: the role and the S3 location given, the bucket reachable, the batch jobs readable
        with these credentials - a ValueError or a ModelError saying which, before any dialogue."""
        if not self.role_arn or not self.bucket:
            raise ValueError("batch_role_arn and batch_s3 expected")
        self._call(self._s3.head_bucket, Bucket=self.bucket)
        self._call(self._bedrock.list_model_invocation_jobs, maxResults=1)

    def submit(self, requests: Sequence[BatchRequest], name: str) -> BatchJob:
        check_requests(requests, self)
        return self.submit_bodies([(r.record_id, self.call.body(r.request)) for r in requests], name)

    def submit_bodies(self, bodies: Sequence[tuple[str, Any]], name: str) -> BatchJob:
        """A job of these Converse inputs, by record id, written to S3 and started."""
        if not self.role_arn or not self.bucket:
            raise ValueError("a Bedrock batch job needs batch_role_arn and batch_s3")
        if not self.minimum <= len(bodies) <= self.maximum or len({r for r, _ in bodies}) != len(bodies):
            raise ValueError(f"{len(bodies):,} records, each once: a {self.name} batch job takes {self.minimum:,} to "
                             f"{self.maximum:,}")
        if not _JOB_NAME.match(name):
            raise ValueError(f"a Bedrock batch job's name {name!r}: letters, digits and dashes, at most 63 expected")
        lines = [json.dumps({"recordId": record, "modelInput": body}, ensure_ascii=False) for record, body in bodies]
        key = f"{self.prefix}{name}/input.jsonl"
        output = f"s3://{self.bucket}/{self.prefix}{name}/output/"
        self._call(self._s3.put_object, Bucket=self.bucket, Key=key, Body=("\n".join(lines) + "\n").encode("utf-8"))
        created = self._call(
            self._bedrock.create_model_invocation_job, jobName=name, roleArn=self.role_arn, modelId=self.chat.model_id,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{self.bucket}/{key}", "s3InputFormat": "JSONL"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": output}}, timeoutDurationInHours=self.timeout_hours,
            modelInvocationType="Converse")
        return BatchJob(engine=self.name, job_id=created["jobArn"], record_ids=tuple(r for r, _ in bodies),
                        places={"input": f"s3://{self.bucket}/{key}", "output": output})

    def online(self, record: str, body: Any) -> BatchAnswer:
        """A record sent as one online Converse call (fewer records than a job takes): its answer or its error."""
        try:
            answer = self.chat.converse({"modelId": self.chat.model_id, **body})
        except ModelError as exc:
            return BatchAnswer(record, error_code="online", error=str(exc)[:500])
        return self.call.read(record, answer)

    def sent(self, job: BatchJob) -> dict[str, Any]:
        """What the provider holds as sent with each record of a job, by record id: the Converse input each output line
        carries beside its answer (what ran), else the job's input object's - the job's if it ran this engine's model
        (a job of another model answers nothing here)."""
        found_job = self._job(job)
        model = str(found_job.get("modelId"))
        if model != self.chat.model_id and not model.endswith(f"/{self.chat.model_id}"):
            raise ModelError(f"the Bedrock batch job {job.job_id} ran {model[:120]!r}, not {self.chat.model_id}",
                             model=self.chat.spec)
        bucket, key = s3_location(job.places.get("input", ""))
        found: dict[str, Any] = {}
        for line in [*self._lines(bucket, key.rstrip("/")), *self._results(job)]:
            if isinstance(line, dict) and isinstance(line.get("recordId"), str) and isinstance(line.get("modelInput"), dict):
                found[line["recordId"]] = line["modelInput"]
        return found

    def close(self) -> None:
        for client in (self._bedrock, self._s3):
            if client is not None:
                client.close()
        self.call.close()

    def state(self, job: BatchJob) -> JobState:
        found = self._call(self._bedrock.get_model_invocation_job, jobIdentifier=job.job_id)
        status = str(found.get("status"))
        state = _STATES.get(status)
        if state is None:
            raise ModelError(f"the Bedrock batch job {job.job_id} is in a state not known here: {status[:60]!r}",
                             model=self.chat.spec)
        return JobState(state=state, answered=found.get("successRecordCount"), failed=found.get("errorRecordCount"),  # type: ignore[arg-type]
                        total=found.get("totalRecordCount"), status=status, message=str(found.get("message") or ""))

    def answers(self, job: BatchJob) -> list[BatchAnswer]:
        """One answer per record of a finished job, in the job's order: each output line's answer or error (the
        provider's ``errorCode``), and an error for each record no output line holds."""
        found: dict[str, BatchAnswer] = {}
        for line in self._results(job):
            answer = self._answer(line)
            if answer is not None:
                found[answer.record_id] = answer
        return joined(job, found, missing=f"no result: the job ended {self._job(job).get('status')}")

    def _job(self, job: BatchJob) -> dict[str, Any]:
        """The job as Bedrock describes it (read once an engine)."""
        if job.job_id not in self._jobs:
            self._jobs[job.job_id] = self._call(self._bedrock.get_model_invocation_job, jobIdentifier=job.job_id)
        return self._jobs[job.job_id]

    def _results(self, job: BatchJob) -> list[Any]:
        """The lines of the job's own output: the ``*.jsonl.out`` objects in the folder Bedrock names after the job
        (``<output location>/<job id>/``), the output location as Bedrock describes the job - never another job's."""
        if job.job_id not in self._read:
            config = (self._job(job).get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}
            bucket, prefix = s3_location(str(config.get("s3Uri") or job.places.get("output", "")))
            folder = f"{prefix}{job.job_id.rsplit('/', 1)[-1]}/"
            self._read[job.job_id] = [line for key in self._outputs(bucket, folder) for line in self._lines(bucket, key)]
        return self._read[job.job_id]

    # -- S3 and the lines ---------------------------------------------------------------------------------------------
    def _answer(self, line: Any) -> BatchAnswer | None:
        if not isinstance(line, dict) or not isinstance(line.get("recordId"), str):
            return None
        record, error = line["recordId"], line.get("error")
        if isinstance(error, dict) or "modelOutput" not in line:
            detail = error if isinstance(error, dict) else {}
            return BatchAnswer(record, error_code=str(detail.get("errorCode", "error")),
                               error=str(detail.get("errorMessage", "no output"))[:500])
        return self.call.read(record, line["modelOutput"])

    def _outputs(self, bucket: str, prefix: str) -> list[str]:
        keys, token = [], None
        while True:
            page = self._call(self._s3.list_objects_v2, Bucket=bucket, Prefix=prefix,
                              **({"ContinuationToken": token} if token else {}))
            keys += [item["Key"] for item in page.get("Contents", []) if item["Key"].endswith(".jsonl.out")]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return keys

    def _lines(self, bucket: str, key: str) -> list[Any]:
        found = self._call(self._s3.get_object, Bucket=bucket, Key=key)
        if int(found.get("ContentLength") or 0) > MAX_RESULTS_BYTES:
            raise ModelError(f"s3://{bucket}/{key} holds more than {MAX_RESULTS_BYTES:,} bytes", model=self.chat.spec)
        data = found["Body"].read(MAX_RESULTS_BYTES + 1)
        if len(data) > MAX_RESULTS_BYTES:
            raise ModelError(f"s3://{bucket}/{key} holds more than {MAX_RESULTS_BYTES:,} bytes", model=self.chat.spec)
        lines = []
        for text in data.split(b"\n"):
            if text.strip():
                try:
                    lines.append(untrusted_json.loads(text, max_values=untrusted_json.MAX_ANSWER_VALUES))
                except ValueError:
                    continue  # a line that is not one record's: its record has no result
        return lines

    def _call(self, method: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return method(**kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise ModelError(f"Bedrock batch: {exc.operation_name}: {error.get('Code', 'ClientError')}: "
                             f"{error.get('Message', '')}".rstrip(": "), model=self.chat.spec,
                             retryable=error.get("Code") in ("ThrottlingException", "ServiceUnavailableException",
                                                             "SlowDown", "InternalServerException")) from exc
        except BotoCoreError as exc:
            problem = credential_problem(exc)
            raise ModelError(f"Bedrock batch: {problem or f'{type(exc).__name__}: {exc}'}", model=self.chat.spec,
                             retryable=problem is None) from exc
