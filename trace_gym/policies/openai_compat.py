"""A policy that asks an OpenAI-compatible chat-completions server (vLLM, ...).

The request goes through the one HTTP transport, :class:`trace_gym.llm.OpenAIChatClient`
(standard library only, retries with backoff on connection failures, timeouts, HTTP 429
and 5xx).  The conversation and the tool schemas are sent as they are; structured
``tool_calls`` in the reply are turned back into text (``<tool_call>`` blocks after the
reply's content, if any) so the environment parses them like any other action.  A
failure is a :class:`~trace_gym.policies.base.PolicyError` that says what the server
answered.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.toolcalls import format_tool_call
from ..llm.base import ChatReply, LLMError
from ..llm.http import OpenAIChatClient, chat_url
from .base import PolicyError, Request

__all__ = ["OpenAICompatPolicy", "completion_to_action", "reply_to_action", "chat_url"]


def reply_to_action(reply: ChatReply) -> str:
    """The text action for a chat reply: its content, then one ``<tool_call>`` block per call."""
    content = reply.content
    parts = [content.strip()] if content and content.strip() else []
    for call in reply.tool_calls:
        args = call["arguments"]
        if isinstance(args, dict):
            parts.append(format_tool_call(call["name"], args, style="hermes"))
        else:  # keep the model's broken arguments: the environment reports the format error
            payload = json.dumps({"name": call["name"], "arguments": args}, ensure_ascii=False)
            parts.append(f"<tool_call>\n{payload}\n</tool_call>")
    return "\n".join(parts)


def completion_to_action(body: dict[str, Any]) -> str:
    """The text action for a chat-completions response body (first choice)."""
    try:
        return reply_to_action(ChatReply.from_completion(body))
    except LLMError as exc:
        raise PolicyError(str(exc)) from None


class OpenAICompatPolicy:
    """Chat completions over HTTP.

    ``base_url`` is the server's API root (``http://127.0.0.1:8000/v1``) or the full
    ``.../chat/completions`` URL; ``api_key`` defaults to ``$OPENAI_API_KEY`` (vLLM
    needs none).  ``temperature``, ``max_tokens``, ``top_p`` and ``seed`` are sent
    when set, ``extra_body`` is merged into every request.  ``max_retries`` retries
    after the first attempt, sleeping ``backoff * 2**attempt`` seconds (or the
    server's ``Retry-After``, capped at ``max_backoff``).  ``act_batch`` sends up to
    ``concurrency`` requests at once.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        concurrency: int = 8,
        extra_body: dict[str, Any] | None = None,
        policy_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        extra = {"top_p": top_p} if top_p is not None else {}
        extra.update(extra_body or {})
        self.client = OpenAIChatClient(base_url, model, api_key=api_key, temperature=temperature,
                                       max_tokens=max_tokens, timeout=timeout, max_retries=max_retries,
                                       backoff=backoff, max_backoff=max_backoff, extra_body=extra, sleep=sleep)
        self.url, self.model = self.client.url, model
        self.temperature, self.max_tokens, self.top_p, self.seed = temperature, max_tokens, top_p, seed
        self.concurrency = concurrency
        self.policy_id = policy_id or f"openai:{model}"

    def with_model(self, model: str, *, policy_id: str | None = None) -> OpenAICompatPolicy:
        """The same server and settings asking for another served ``model`` (e.g. a LoRA adapter vLLM serves
        under that name)."""
        import copy

        other = copy.copy(self)
        other.client = copy.copy(self.client)  # its own lock and request count
        other.client.model, other.client.requests_sent, other.model = model, 0, model
        other.policy_id = policy_id or f"openai:{model}"
        return other

    @property
    def requests_sent(self) -> int:
        """HTTP attempts so far, retries included."""
        return self.client.requests_sent

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return self.client.request_body(messages, tools=tools, seed=self.seed)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        try:
            return reply_to_action(self.client.chat(messages, tools=tools, seed=self.seed))
        except LLMError as exc:
            raise PolicyError(str(exc)) from None

    def act_batch(self, requests: Sequence[Request]) -> list[str]:
        if len(requests) <= 1 or self.concurrency == 1:
            return [self.act(m, t) for m, t in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(lambda r: self.act(r[0], r[1]), requests))
