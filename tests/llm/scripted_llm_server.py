"""A scripted local stand-in for an OpenAI-compatible server (stdlib ``http.server`` on 127.0.0.1,
a random free port). It plays queued answers in order -- good ones, malformed JSON, schema
violations, hostile content, HTTP errors, slow answers -- and records every request it got.
Nothing here talks to a real model."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    status: int = 200
    content: str | None = None  # the assistant message text (wrapped in a chat completion)
    raw_body: bytes | None = None  # or a raw body, sent as is
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def completion(content: str, model: str = "scripted") -> bytes:
    return json.dumps({
        "id": "cmpl-scripted", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }).encode()


class ScriptedServer:
    def __init__(self):
        self.queue: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.default: Scripted | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                try:
                    payload = json.loads(body)
                except Exception:
                    payload = None
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "json": payload})
                s = outer.queue.pop(0) if outer.queue else (outer.default or Scripted(500, raw_body=b"no script"))
                if s.delay_s:
                    time.sleep(s.delay_s)
                data = s.raw_body if s.raw_body is not None else completion(s.content or "")
                try:
                    self.send_response(s.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in s.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def play(self, *items: Scripted) -> None:
        self.queue.extend(items)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
