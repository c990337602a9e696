"""A scripted OpenAI-compatible server for the optimiser's tests (no real model anywhere).

Answers are scripted per problem: the server reads the problem's name from the prompt's first
line ("# Task: make `NAME` faster") and plays that problem's next scripted answer, so problems
running concurrently each get their own script in order. Every request is recorded (problem,
messages). Runs on 127.0.0.1 on a random free port, in a thread of the test process, so a
``hercules optimize`` subprocess can be killed and restarted against the same server.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TASK = re.compile(r"# Task: make `([^`]+)` faster")


def fenced(code: str, analysis: str = "The faster exemplars move less memory.") -> str:
    """A completion in the requested shape: analysis, design, one fenced block."""
    return (f"1. **Performance analysis**: {analysis}\n\n2. **Algorithm design**: one pass over the data.\n\n"
            f"3. **Code**:\n\n```python\n{code.strip()}\n```\n")


class OptimizeLLMServer:
    def __init__(self, scripts: dict[str, list[str]], usage: bool = True, fail_first: int = 0) -> None:
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.fail_first = fail_first  # answer the first N requests with HTTP 503 (the client retries)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                user = body["messages"][-1]["content"]
                match = _TASK.search(user)
                problem = match.group(1) if match else ""
                with outer.lock:
                    outer.requests.append({"problem": problem, "messages": body["messages"], "body": body})
                    if outer.fail_first > 0:
                        outer.fail_first -= 1
                        self.send_error(503, "scripted overload")
                        return
                    script = outer.scripts.get(problem) or []
                    text = script.pop(0) if script else "I have no further ideas."
                reply = {"id": "scripted", "object": "chat.completion", "model": body.get("model", "scripted"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}]}
                if usage:
                    reply["usage"] = {"prompt_tokens": len(user) // 4, "completion_tokens": len(text) // 4,
                                      "total_tokens": len(user) // 4 + len(text) // 4}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def prompts(self, problem: str) -> list[str]:
        with self.lock:
            return [r["messages"][-1]["content"] for r in self.requests if r["problem"] == problem]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
