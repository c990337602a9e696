"""LLM access shared by the products: an OpenAI-compatible chat client (stdlib only)."""

from .client import ChatClient, ChatResult, LLMError, extract_json_object

__all__ = ["ChatClient", "ChatResult", "LLMError", "extract_json_object"]
