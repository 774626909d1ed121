"""A loopback fake of Bedrock's batch inference and the S3 it reads and writes, with their real wire shapes, for
boto3's own clients pointed at it (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL_BEDROCK``): S3's HeadBucket, PutObject,
ListObjectsV2 (XML) and GetObject; Bedrock's ListModelInvocationJobs, CreateModelInvocationJob and
GetModelInvocationJob (JSON). A job reads its input object, answers each record's ``modelInput`` (``answer``: a
Converse input to a Converse output) and, after ``polls`` reads of its status, writes its output object - the
records out of order, each as its outcome says: answered, in error (``errorCode``), or left out."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape


class FakeBedrockBatch:
    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]], *, polls: int = 1,
                 outcomes: dict[str, str] | None = None, seed: int = 3, model: str | None = None,
                 jobs_allowed: int | None = None) -> None:
        self.answer, self.polls, self.seed = answer, polls, seed
        #: how many jobs may be made; the next is refused (ServiceQuotaExceededException, HTTP 400)
        self.jobs_allowed = jobs_allowed
        #: each record's outcome by record id (others: ok): "error" or "missing"
        self.outcomes = outcomes or {}
        #: the model id every job says it ran (None: the one it was created with)
        self.model = model
        self.objects: dict[tuple[str, str], bytes] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeBedrockBatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the jobs ---------------------------------------------------------------------------------------------------
    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        job_id = f"job{len(self.jobs) + 1}"
        arn = f"arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/{job_id}"
        self.jobs[arn] = {"jobArn": arn, "jobName": body["jobName"], "modelId": self.model or body["modelId"],
                          "roleArn": body["roleArn"], "status": "Submitted", "submitTime": "2026-11-29T00:00:00Z",
                          "inputDataConfig": body["inputDataConfig"], "outputDataConfig": body["outputDataConfig"],
                          "reads": 0, "id": job_id}
        return {"jobArn": arn}

    def _status(self, arn: str) -> dict[str, Any]:
        job = self.jobs[arn]
        job["reads"] += 1
        if job["reads"] >= self.polls and job["status"] != "Completed":
            self._finish(job)
        elif job["status"] == "Submitted":
            job["status"] = "InProgress"
        return {key: value for key, value in job.items() if key not in ("reads", "id")}

    def _finish(self, job: dict[str, Any]) -> None:
        bucket, key = _s3(job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"])
        lines = [json.loads(line) for line in self.objects[(bucket, key)].decode().splitlines() if line.strip()]
        out = []
        for line in lines:
            outcome = self.outcomes.get(line["recordId"], "ok")
            if outcome == "error":
                out.append({**line, "error": {"errorCode": 400, "errorMessage": "Malformed input request"}})
            elif outcome != "missing":
                out.append({**line, "modelOutput": self.answer(line["modelInput"])})
        random.Random(self.seed).shuffle(out)
        bucket, prefix = _s3(job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"])
        self.objects[(bucket, f"{prefix}{job['id']}/input.jsonl.out")] = "".join(
            json.dumps(line) + "\n" for line in out).encode()
        self.objects[(bucket, f"{prefix}{job['id']}/manifest.json.out")] = json.dumps(
            {"totalRecordCount": len(lines), "processedRecordCount": len(out)}).encode()
        job["status"] = "Completed" if len(out) == len(lines) else "PartiallyCompleted"

    def _listed(self, bucket: str, prefix: str) -> bytes:
        keys = sorted(key for b, key in self.objects if b == bucket and key.startswith(prefix))
        contents = "".join(f"<Contents><Key>{escape(k)}</Key><Size>{len(self.objects[(bucket, k)])}</Size></Contents>"
                           for k in keys)
        return (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{bucket}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(keys)}</KeyCount>"
                f"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>{contents}</ListBucketResult>").encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _route(self) -> tuple[list[str], dict[str, list[str]]]:
                parts = urlsplit(self.path)
                return [unquote(p) for p in parts.path.split("/")[1:]], parse_qs(parts.query)

            def do_HEAD(self) -> None:
                self._reply(200, b"", "application/xml")

            def do_PUT(self) -> None:  # S3 PutObject: /bucket/key
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path, _ = self._route()
                with fake._lock:
                    fake.calls.append("PutObject")
                    fake.objects[(path[0], "/".join(path[1:]))] = body
                self._reply(200, b"", "application/xml", {"ETag": '"1"'})

            def do_POST(self) -> None:  # Bedrock CreateModelInvocationJob
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                path, _ = self._route()
                with fake._lock:
                    fake.calls.append("CreateModelInvocationJob")
                    if path == ["model-invocation-job"] and fake.jobs_allowed is not None \
                            and len(fake.jobs) >= fake.jobs_allowed:
                        return self._json(400, {"message": "too many jobs"},
                                          {"x-amzn-ErrorType": "ServiceQuotaExceededException"})
                    if path == ["model-invocation-job"]:
                        return self._json(200, fake._create(body))
                return self._json(404, {"message": "no such route"})

            def do_GET(self) -> None:
                path, query = self._route()
                with fake._lock:
                    if path == ["model-invocation-jobs"]:
                        fake.calls.append("ListModelInvocationJobs")
                        return self._json(200, {"invocationJobSummaries": []})
                    if path[0] == "model-invocation-job" and "/".join(path[1:]) in fake.jobs:
                        fake.calls.append("GetModelInvocationJob")
                        return self._json(200, fake._status("/".join(path[1:])))
                    if len(path) == 1 or path[1:] == [""]:
                        fake.calls.append("ListObjectsV2")
                        return self._reply(200, fake._listed(path[0], query.get("prefix", [""])[0]), "application/xml")
                    data = fake.objects.get((path[0], "/".join(path[1:])))
                    fake.calls.append("GetObject")
                if data is None:
                    return self._reply(404, b"<Error><Code>NoSuchKey</Code></Error>", "application/xml")
                return self._reply(200, data, "application/octet-stream")

            def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                self._reply(status, json.dumps(payload).encode(), "application/json", headers)

            def _reply(self, status: int, data: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

        return Handler


def _s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key
