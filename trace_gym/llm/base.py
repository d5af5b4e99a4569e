"""The chat seam: one call from messages (and tools) to one assistant reply.

Every component that asks a language model something — the LLM labeler, capability
discovery, spec drafting, the τ² NL-assertion judge, the LLM user simulators, the HTTP
policy — goes through a :class:`ChatClient`.  Messages are OpenAI chat dicts; tools are
OpenAI function schemas; the answer is a :class:`ChatReply`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatClient", "ChatReply", "LLMError", "wire_message", "ask_model"]


class LLMError(RuntimeError):
    """No usable answer: the endpoint was unreachable or refused, or its answer had the wrong shape."""


@dataclass(frozen=True)
class ChatReply:
    """One assistant answer: text (``content``) and/or tool calls.

    Each tool call is ``{"id": str | None, "name": str, "arguments": ...}`` where
    ``arguments`` is the decoded JSON (normally a dict), or the model's raw string when
    it is not valid JSON, so a caller can report the malformed call instead of guessing.
    """

    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()

    @property
    def text(self) -> str:
        return self.content or ""

    @classmethod
    def from_message(cls, message: Any) -> ChatReply:
        """Parse an OpenAI assistant message dict; :class:`LLMError` when it is malformed."""
        if not isinstance(message, Mapping):
            raise LLMError(f"the answer has no message: {json.dumps(message, default=str)[:300]}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise LLMError(f"the message content is {type(content).__name__}, not text")
        calls = []
        for call in message.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise LLMError(f"malformed tool call in the answer: {json.dumps(call, default=str)[:300]}")
            raw = fn.get("arguments")
            try:
                args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw if raw is not None else {})
            except json.JSONDecodeError:
                args = raw
            calls.append({"id": call.get("id"), "name": fn["name"], "arguments": args})
        return cls(content, tuple(calls))

    @classmethod
    def from_completion(cls, body: Any) -> ChatReply:
        """The first choice of a ``chat.completion`` response body."""
        choices = body.get("choices") if isinstance(body, Mapping) else None
        if not isinstance(choices, list) or not choices:
            raise LLMError(f"the server's response has no choices: {json.dumps(body, default=str)[:300]}")
        message = choices[0].get("message") if isinstance(choices[0], Mapping) else None
        if not isinstance(message, Mapping):
            raise LLMError(f"the server's first choice has no message: {json.dumps(choices[0], default=str)[:300]}")
        return cls.from_message(message)

    @classmethod
    def from_text(cls, text: str | None, tools: Sequence[Mapping[str, Any]] | None = None) -> ChatReply:
        """A model's plain text answer; with ``tools``, calls written as text (any syntax
        :func:`~trace_gym.core.toolcalls.parse_action` accepts) become tool calls."""
        if tools and text:
            from trace_gym.core.toolcalls import parse_action

            parsed = parse_action(text)
            if parsed.error is None and parsed.calls:
                return cls(None, tuple({"id": None, "name": n, "arguments": a} for n, a in parsed.calls))
        return cls(text)

    def to_message(self) -> dict[str, Any]:
        """The OpenAI assistant message dict for this reply (what a cassette stores)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.get("id"), "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                              else json.dumps(c["arguments"], ensure_ascii=False)}}
                for c in self.tool_calls
            ]
        return msg


@runtime_checkable
class ChatClient(Protocol):
    """A chat model behind one call.

    ``chat(messages, tools=None, seed=None, temperature=None, max_tokens=None)``:
    ``messages`` are OpenAI chat dicts, ``tools`` OpenAI function schemas (or ``None``),
    ``seed`` makes sampling repeatable where the model supports it, ``temperature`` and
    ``max_tokens`` override the client's defaults when given.  Returns a
    :class:`ChatReply`.

    Error contract: a client never invents an answer.  When it cannot get one — the
    endpoint is unreachable or keeps failing after its retries, answers an HTTP error
    that retrying cannot fix, or sends a body that is not a chat completion — it raises
    :class:`LLMError` with the endpoint and the reason; a replayed cassette without the
    request raises :class:`~trace_gym.llm.cassette.CassetteMiss` (an ``LLMError``).
    Bad arguments to the call itself (e.g. messages that are not dicts) raise
    ``TypeError``/``ValueError``.  A malformed tool call *inside* a well-formed answer is
    not an error: its raw arguments are kept for the caller to report.
    """

    model: str

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply: ...


def wire_message(m: Mapping[str, Any]) -> dict[str, Any]:
    """A chat dict as the API wants it: only the standard fields, ``tool_call_id`` only on tool messages."""
    out: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
    if m.get("tool_calls"):
        out["tool_calls"] = m["tool_calls"]
    if m["role"] == "tool":
        out["tool_call_id"] = m.get("tool_call_id")
        out["content"] = m.get("content") or ""
    elif out["content"] is None and not m.get("tool_calls"):
        out["content"] = ""
    return out


def ask_model(client: ChatClient, messages: Sequence[Mapping[str, Any]], *,
              tools: Sequence[Mapping[str, Any]] | None = None, seed: int | None = None) -> ChatReply:
    """One chat call on a user simulator's behalf; any failure becomes
    :class:`~trace_gym.core.users.UserError`."""
    from trace_gym.core.users import UserError

    try:
        return client.chat(messages, tools=tools or None, seed=seed)
    except Exception as exc:
        raise UserError(f"the user simulator's model failed: {type(exc).__name__}: {exc}") from exc
