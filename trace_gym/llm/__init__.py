"""One LLM layer: the chat seam, its HTTP transport, in-process clients and cassettes.

* :class:`ChatClient` — the seam: ``chat(messages, tools=, seed=, temperature=, max_tokens=) -> ChatReply``
  (error contract in its docstring).
* :class:`OpenAIChatClient` — any OpenAI-compatible ``/chat/completions`` endpoint, stdlib
  only, ``urllib`` imported on the first request.
* :class:`CassetteClient` — record a client's answers to JSONL and replay them offline.
* :class:`PolicyChatClient`, :class:`HFChatClient`, :class:`FunctionChatClient` — a
  trace-gym policy, a local Hugging Face model, a Python function.
"""

from .base import ChatClient, ChatReply, LLMError, ask_model, wire_message
from .cassette import CassetteClient, CassetteMiss, request_key
from .http import OpenAIChatClient, chat_url
from .local import ByteTokenizer, FunctionChatClient, HFChatClient, PolicyChatClient

__all__ = [
    "ByteTokenizer", "CassetteClient", "CassetteMiss", "ChatClient", "ChatReply", "FunctionChatClient",
    "HFChatClient", "LLMError", "OpenAIChatClient", "PolicyChatClient", "ask_model", "chat_url", "request_key", "wire_message",
]
