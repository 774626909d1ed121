"""Amazon Bedrock batch inference: a job's requests written to S3 as JSONL records ``{recordId, modelInput}`` in the
Converse form (what the online call sends, :meth:`BedrockChat.converse_args`, less the model id - the job names it -
and less the tool that constrains the answer: batch jobs take none, so the judge's answer is read as free text
through the same strict grammar), a job made of them (``CreateModelInvocationJob``, ``modelInvocationType``
Converse), its status read (``GetModelInvocationJob``), and its output (``*.jsonl.out`` under the job's output
location) read back, each line joined on its ``recordId``. A job takes at least 100 records."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Sequence

from ... import untrusted_json
from ...errors import ModelError
from ..bedrock import BedrockChat
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


class BedrockBatch:
    """A batch engine on Bedrock: ``role_arn`` (a service role Bedrock assumes to read and write ``s3_uri``)."""

    name = "bedrock"
    minimum = 100
    maximum = 50_000

    def __init__(self, chat: BedrockChat, *, role_arn: str, s3_uri: str, bedrock: Any, s3: Any,
                 timeout_hours: int = 24) -> None:
        self.chat, self.role_arn, self.timeout_hours = chat, role_arn, timeout_hours
        self.bucket, self.prefix = s3_location(s3_uri)
        self._bedrock, self._s3 = bedrock, s3

    def submit(self, requests: Sequence[BatchRequest], name: str) -> BatchJob:
        check_requests(requests, self)
        if not _JOB_NAME.match(name):
            raise ValueError(f"a Bedrock batch job's name {name!r}: letters, digits and dashes, at most 63 expected")
        lines = [json.dumps({"recordId": r.record_id, "modelInput": self.model_input(r)}, ensure_ascii=False)
                 for r in requests]
        key = f"{self.prefix}{name}/input.jsonl"
        output = f"s3://{self.bucket}/{self.prefix}{name}/output/"
        self._call(self._s3.put_object, Bucket=self.bucket, Key=key, Body=("\n".join(lines) + "\n").encode("utf-8"))
        created = self._call(
            self._bedrock.create_model_invocation_job, jobName=name, roleArn=self.role_arn, modelId=self.chat.model_id,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{self.bucket}/{key}", "s3InputFormat": "JSONL"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": output}}, timeoutDurationInHours=self.timeout_hours,
            modelInvocationType="Converse")
        return BatchJob(engine=self.name, job_id=created["jobArn"], record_ids=tuple(r.record_id for r in requests),
                        places={"input": f"s3://{self.bucket}/{key}", "output": output})

    def model_input(self, request: BatchRequest) -> dict[str, Any]:
        """A record's Converse input: the online call's, free text (no tool), the model named by the job."""
        args = self.chat.converse_args(replace(request.request, json_schema=None))
        args.pop("modelId", None)
        return args

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
        bucket, prefix = s3_location(job.places.get("output", ""))
        found: dict[str, BatchAnswer] = {}
        for key in self._outputs(bucket, prefix):
            for line in self._lines(bucket, key):
                answer = self._answer(line)
                if answer is not None:
                    found[answer.record_id] = answer
        status = str(self._call(self._bedrock.get_model_invocation_job, jobIdentifier=job.job_id).get("status"))
        return joined(job, found, missing=f"no result: the job ended {status}")

    # -- S3 and the lines ---------------------------------------------------------------------------------------------
    def _answer(self, line: Any) -> BatchAnswer | None:
        if not isinstance(line, dict) or not isinstance(line.get("recordId"), str):
            return None
        record, error = line["recordId"], line.get("error")
        if isinstance(error, dict) or "modelOutput" not in line:
            detail = error if isinstance(error, dict) else {}
            return BatchAnswer(record, error_code=str(detail.get("errorCode", "error")),
                               error=str(detail.get("errorMessage", "no output"))[:500])
        try:
            return BatchAnswer(record, response=self.chat.answer_of(line["modelOutput"]), body=line["modelOutput"])
        except ModelError as exc:
            return BatchAnswer(record, error_code="unreadable", error=str(exc)[:500])

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
            raise ModelError(f"Bedrock batch: {type(exc).__name__}: {exc}", model=self.chat.spec,
                             retryable=True) from exc
