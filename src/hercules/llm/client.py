"""A small OpenAI-compatible chat-completions client over the standard library.

Works with vLLM, SGLang and hosted APIs that speak ``POST {base_url}/chat/completions``.
Configuration comes from arguments, else from the environment:

    HERCULES_LLM_BASE_URL   e.g. http://127.0.0.1:8000/v1
    HERCULES_LLM_MODEL      the served model name
    HERCULES_LLM_API_KEY    bearer token (optional for local servers)

Transport errors, timeouts, HTTP 429 and 5xx are retried with exponential backoff (honouring a
short ``Retry-After``); other HTTP errors fail at once. Response bodies are capped in size, so a
hostile or broken server cannot make the caller buffer gigabytes.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class LLMError(RuntimeError):
    """The server could not be reached or did not answer with a usable completion."""


@dataclass(frozen=True)
class ChatResult:
    text: str
    model: str
    attempts: int
    latency_s: float
    usage: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None


@dataclass
class ChatClient:
    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0
    retries: int = 2  # extra attempts after the first
    backoff_s: float = 0.5
    max_response_bytes: int = MAX_RESPONSE_BYTES
    user_agent: str = "hercules-llm/0.1"

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 **kwargs: Any) -> "ChatClient":
        base_url = base_url or os.environ.get("HERCULES_LLM_BASE_URL")
        model = model or os.environ.get("HERCULES_LLM_MODEL")
        api_key = api_key if api_key is not None else os.environ.get("HERCULES_LLM_API_KEY")
        if not base_url:
            raise LLMError("no base URL: pass one or set HERCULES_LLM_BASE_URL")
        if not model:
            raise LLMError("no model name: pass one or set HERCULES_LLM_MODEL")
        return cls(base_url=base_url.rstrip("/"), model=model, api_key=api_key or None, **kwargs)

    @property
    def endpoint(self) -> str:
        url = self.base_url.rstrip("/")
        return url if url.endswith("/chat/completions") else url + "/chat/completions"

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": self.user_agent}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(payload).encode()
        req = urllib.request.Request(self.endpoint, data=data, headers=self._headers(), method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            body = resp.read(self.max_response_bytes + 1)
        if len(body) > self.max_response_bytes:
            raise LLMError(f"response larger than {self.max_response_bytes} bytes")
        try:
            return json.loads(body.decode("utf-8", errors="replace"))
        except json.JSONDecodeError as e:
            raise LLMError(f"response is not JSON: {e}") from None

    def chat(self, messages: list[dict[str, str]], *, temperature: float = 0.0, max_tokens: int | None = None,
             response_format: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> ChatResult:
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if response_format is not None:
            payload["response_format"] = response_format
        if extra:
            payload.update(extra)
        t0 = time.perf_counter()
        last: Exception | None = None
        for attempt in range(1, self.retries + 2):
            try:
                raw = self._post(payload)
                return self._parse(raw, attempt, time.perf_counter() - t0)
            except urllib.error.HTTPError as e:
                retryable = e.code == 429 or 500 <= e.code < 600
                detail = ""
                try:
                    detail = e.read(2000).decode("utf-8", errors="replace")
                except Exception:
                    pass
                last = LLMError(f"HTTP {e.code} from {self.endpoint}: {detail[:300]}")
                if not retryable:
                    raise last from None
                delay = self._delay(attempt, e.headers.get("Retry-After") if e.headers else None)
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as e:
                last = LLMError(f"cannot reach {self.endpoint}: {getattr(e, 'reason', e)}")
                delay = self._delay(attempt, None)
            except LLMError as e:  # malformed body: a retry may get a good one
                last = e
                delay = self._delay(attempt, None)
            if attempt <= self.retries:
                time.sleep(delay)
        raise last if last else LLMError("no attempt made")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), 10.0)
            except ValueError:
                pass
        return self.backoff_s * (2 ** (attempt - 1))

    def _parse(self, raw: Any, attempt: int, latency: float) -> ChatResult:
        try:
            choice = raw["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"no choices[0].message.content in the response: {str(raw)[:300]}") from None
        if not isinstance(text, str):
            raise LLMError(f"message content is {type(text).__name__}, not a string")
        usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
        return ChatResult(text=text, model=str(raw.get("model", self.model)), attempts=attempt, latency_s=latency,
                          usage=usage, finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None)


def extract_json_object(text: str) -> Any:
    """The first JSON object in a model's answer (plain, or inside a ```json fence, or after prose).

    Raises ValueError when there is none."""
    if not isinstance(text, str):
        raise ValueError("answer is not text")
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        if s.rstrip().endswith("```"):
            s = s.rstrip()[:-3]
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    start = s.find("{")
    while start != -1:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(s)):
            c = s[i]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(s[start : i + 1])
                    except json.JSONDecodeError:
                        break
        start = s.find("{", start + 1)
    raise ValueError("no JSON object found in the answer")
