"""A loopback fake of the OpenAI Batch API, with its real shapes: ``POST /v1/files`` (multipart, purpose ``batch``),
``POST /v1/batches``, ``GET /v1/batches/{id}`` (validating, in progress, then its end), ``GET /v1/files/{id}/content``
(JSONL). Results come in an order of their own (seeded), each record as its outcome says: answered, an error in the
error file (a line with ``error``, or a response with an error status), a body that is no chat answer, or none at
all (an expired or failed batch)."""

from __future__ import annotations

import json
import random
import re
import threading
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OUTCOMES = ("ok", "error_line", "error_status", "malformed", "missing")


class FakeBatchAPI:
    def __init__(self, *, outcomes: dict[str, str] | None = None, end: str = "completed", polls: int = 2,
                 seed: int = 7, foreign: int = 0, answer: Any = None) -> None:
        #: what a record's chat answer says, from its request body (None: "answer to <record id>")
        self.answer = answer
        #: each record's outcome by custom_id (others: ok)
        self.outcomes = outcomes or {}
        #: how the batch ends (completed, expired, failed, cancelled), after ``polls`` reads of its status
        self.end, self.polls, self.seed = end, polls, seed
        #: result lines for records no job holds
        self.foreign = foreign
        self.files: dict[str, bytes] = {}
        self.uploads: list[dict[str, Any]] = []
        self.batches: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        #: the Authorization header of every request
        self.keys: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeBatchAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- what the fake answers --------------------------------------------------------------------------------------
    def _upload(self, content_type: str, body: bytes) -> dict[str, Any]:
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        parts = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        data = parts["file"].get_payload(decode=True)
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = data
        self.uploads.append({"id": file_id, "purpose": parts["purpose"].get_content(), "lines":
                             [json.loads(line) for line in data.decode().splitlines() if line.strip()]})
        return {"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch", "filename": "batch.jsonl"}

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        batch_id = f"batch_{len(self.batches) + 1}"
        self.batches[batch_id] = {"id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                                  "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                                  "status": "validating", "output_file_id": None, "error_file_id": None,
                                  "request_counts": {"total": 0, "completed": 0, "failed": 0},
                                  "metadata": body.get("metadata")}
        return self.batches[batch_id]

    def _status(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        self.reads[batch_id] = reads = self.reads.get(batch_id, 0) + 1
        if reads >= self.polls and batch["status"] in ("validating", "in_progress"):
            self._finish(batch)
        elif batch["status"] == "validating":
            batch["status"] = "in_progress"
        return batch

    def _finish(self, batch: dict[str, Any]) -> None:
        lines = next(u["lines"] for u in self.uploads if u["id"] == batch["input_file_id"])
        out, err = [], []
        for n, line in enumerate(lines):
            record, outcome = line["custom_id"], self.outcomes.get(line["custom_id"], "ok")
            if outcome == "missing" or (self.end in ("expired", "failed") and n % 2):
                continue
            if outcome == "error_line":
                err.append({"id": f"req_{n}", "custom_id": record, "response": None,
                            "error": {"code": "invalid_prompt", "message": f"prompt {n} refused"}})
            elif outcome == "error_status":
                err.append({"id": f"req_{n}", "custom_id": record, "error": None, "response": {
                    "status_code": 400, "request_id": f"r{n}",
                    "body": {"error": {"message": "max_tokens is too large", "type": "invalid_request_error",
                                       "code": "invalid_value"}}}})
            else:
                body: Any = {"id": f"chatcmpl-{n}", "object": "chat.completion", "model": line["body"]["model"],
                             "choices": [{"index": 0, "message": {"role": "assistant", "content":
                                          self.answer(line["body"]) if self.answer else f"answer to {record}"},
                                          "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 10 + n, "completion_tokens": 3, "total_tokens": 13 + n}}
                if outcome == "malformed":
                    body = {"choices": "none"}
                out.append({"id": f"req_{n}", "custom_id": record, "error": None,
                            "response": {"status_code": 200, "request_id": f"r{n}", "body": body}})
        out += [{"id": f"req_x{n}", "custom_id": f"X{n:010d}", "error": None, "response": {
            "status_code": 200, "body": {"choices": [{"message": {"content": "not ours"}}]}}} for n in range(self.foreign)]
        random.Random(self.seed).shuffle(out)
        random.Random(self.seed + 1).shuffle(err)
        for key, found in (("output_file_id", out), ("error_file_id", err)):
            if found:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = "".join(json.dumps(line) + "\n" for line in found).encode()
                batch[key] = file_id
        batch["status"] = {"cancelled": "cancelled"}.get(self.end, self.end)
        if self.end == "failed":
            batch["errors"] = {"object": "list", "data": [{"code": "token_limit_exceeded", "message": "enqueued token limit reached"}]}
        batch["request_counts"] = {"total": len(lines), "completed": len(out) - self.foreign, "failed": len(err)}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with fake._lock:
                    fake.keys.append(self.headers.get("Authorization", ""))
                    if self.path == "/v1/files":
                        self._send(200, fake._upload(self.headers["Content-Type"], body))
                    elif self.path == "/v1/batches":
                        self._send(200, fake._create(json.loads(body)))
                    else:
                        self._send(404, {"error": {"message": "no such route"}})

            def do_GET(self) -> None:
                with fake._lock:
                    fake.keys.append(self.headers.get("Authorization", ""))
                    if self.path.split("?")[0] == "/v1/batches":
                        return self._send(200, {"object": "list", "data": list(fake.batches.values())[-1:],
                                                "has_more": False})
                    found = re.fullmatch(r"/v1/batches/(\w+)", self.path)
                    if found and found.group(1) in fake.batches:
                        return self._send(200, fake._status(found.group(1)))
                    found = re.fullmatch(r"/v1/files/([\w-]+)/content", self.path)
                    if found and found.group(1) in fake.files:
                        data = fake.files[found.group(1)]
                        self.send_response(200)
                        self.send_header("Content-Type", "application/jsonl")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return None
                    return self._send(404, {"error": {"message": "not found"}})

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
