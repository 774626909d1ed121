"""Serve the concierge bot over HTTP on loopback.

    python examples/concierge_bot/http_server.py --port 8080

POST /reply                 the testkit's turn contract (kind = "http")
POST /v1/chat/completions   an OpenAI-compatible chat endpoint (kind = "openai"): the
                            system message, if any, is read for <past_interactions>
GET  /health                200 when up
"""

from __future__ import annotations

import argparse
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from concierge import reply


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    system = " ".join(m["content"] for m in body.get("messages", []) if m.get("role") == "system")
    turns = [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]
    summary = re.search(r"<past_interactions>\s*(.*?)\s*</past_interactions>", system, re.DOTALL)
    context = {"interactions": {"past": summary.group(1)}} if summary else {}
    turn = sum(1 for m in turns if m["role"] == "assistant") + 1
    answer = reply({"scenario_id": "", "turn": turn, "messages": turns, "context": context})
    return {
        "id": "concierge", "object": "chat.completion", "model": body.get("model", "concierge"),
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer["reply"]}}],
        "usage": {"prompt_tokens": answer["usage"]["prompt_tokens"], "completion_tokens": answer["usage"]["completion_tokens"]},
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._send(200, {"ok": True}) if self.path == "/health" else self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        except json.JSONDecodeError:
            self._send(400, {"error": "the body is not JSON"})
            return
        if self.path == "/reply":
            self._send(200, reply(body))
        elif self.path == "/v1/chat/completions":
            self._send(200, chat_completion(body))
        else:
            self._send(404, {"error": f"no route {self.path}"})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"concierge bot on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
