"""The chat client against a scripted local HTTP server (stdlib http.server on 127.0.0.1 with a
random port, started by the ``llm_server`` fixture; it plays queued answers, no real model)."""

from __future__ import annotations

import pytest

from hercules.llm.client import ChatClient, LLMError, extract_json_object
from scripted_llm_server import Scripted


def client(server, **kw):
    kw.setdefault("timeout", 5)
    kw.setdefault("backoff_s", 0.01)
    return ChatClient(base_url=server.base_url, model="m", api_key="secret-key", **kw)


def test_chat_round_trip(llm_server):
    llm_server.play(Scripted(content="hello"))
    r = client(llm_server).chat([{"role": "user", "content": "hi"}], max_tokens=7)
    assert r.text == "hello" and r.attempts == 1 and r.usage["total_tokens"] == 15
    req = llm_server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["json"]["model"] == "m" and req["json"]["max_tokens"] == 7 and req["json"]["temperature"] == 0.0
    assert req["headers"]["Authorization"] == "Bearer secret-key"


def test_from_env(llm_server, monkeypatch):
    monkeypatch.setenv("HERCULES_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("HERCULES_LLM_MODEL", "env-model")
    monkeypatch.delenv("HERCULES_LLM_API_KEY", raising=False)
    c = ChatClient.from_env(timeout=5)
    llm_server.play(Scripted(content="ok"))
    assert c.chat([{"role": "user", "content": "x"}]).text == "ok"
    assert llm_server.requests[0]["json"]["model"] == "env-model"
    assert "Authorization" not in llm_server.requests[0]["headers"]
    monkeypatch.delenv("HERCULES_LLM_MODEL")
    with pytest.raises(LLMError, match="model"):
        ChatClient.from_env()


def test_retries_on_5xx_and_429_then_succeeds(llm_server):
    llm_server.play(Scripted(500, raw_body=b"boom"), Scripted(429, raw_body=b"slow down", headers={"Retry-After": "0"}),
                    Scripted(content="third time"))
    r = client(llm_server, retries=2).chat([{"role": "user", "content": "x"}])
    assert r.text == "third time" and r.attempts == 3 and len(llm_server.requests) == 3


def test_no_retry_on_4xx(llm_server):
    llm_server.play(Scripted(400, raw_body=b'{"error": "bad request"}'), Scripted(content="never"))
    with pytest.raises(LLMError, match="HTTP 400"):
        client(llm_server, retries=3).chat([{"role": "user", "content": "x"}])
    assert len(llm_server.requests) == 1


def test_malformed_body_and_missing_choices(llm_server):
    llm_server.play(Scripted(raw_body=b"{not json"), Scripted(raw_body=b'{"choices": []}'))
    with pytest.raises(LLMError):
        client(llm_server, retries=1).chat([{"role": "user", "content": "x"}])
    assert len(llm_server.requests) == 2


def test_timeout_is_retried_then_reported(llm_server):
    llm_server.play(Scripted(content="late", delay_s=1.0), Scripted(content="late", delay_s=1.0))
    with pytest.raises(LLMError, match="cannot reach|timed out"):
        client(llm_server, timeout=0.2, retries=1).chat([{"role": "user", "content": "x"}])


def test_oversized_response_is_refused(llm_server):
    llm_server.play(Scripted(content="x" * 5000))
    with pytest.raises(LLMError, match="larger than"):
        client(llm_server, retries=0, max_response_bytes=1000).chat([{"role": "user", "content": "x"}])


def test_unreachable_server():
    c = ChatClient(base_url="http://127.0.0.1:9/v1", model="m", timeout=1, retries=0)
    with pytest.raises(LLMError, match="cannot reach"):
        c.chat([{"role": "user", "content": "x"}])


@pytest.mark.parametrize("text, expect", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": {"b": [1, 2]}}\n```', {"a": {"b": [1, 2]}}),
    ('Sure! Here is the advice:\n{"a": "}{"} trailing words', {"a": "}{"}),
    ('{"broken": } then {"ok": true}', {"ok": True}),
])
def test_extract_json_object(text, expect):
    assert extract_json_object(text) == expect


@pytest.mark.parametrize("text", ["no json here", "", "[1, 2", "{'single': 'quotes'}"])
def test_extract_json_object_failures(text):
    with pytest.raises(ValueError):
        extract_json_object(text)
