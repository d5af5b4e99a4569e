"""Record and replay a chat client's answers (cassettes).

A cassette is a JSONL file, one answer per line::

    {"key": sha256, "model": ..., "seed": ..., "request": [messages], "response": text,
     "tool_calls": [...]}            # "tool_calls" only when the answer has some

keyed by the exact request (:func:`request_key`).  Replay mode answers offline and
deterministically; a request the cassette does not hold raises :class:`CassetteMiss`,
never a made-up answer.  Record mode asks the real client on a miss and appends the
answer (each line is written and synced whole).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .base import ChatClient, ChatReply, LLMError

__all__ = ["CassetteClient", "CassetteMiss", "request_key"]


def request_key(model: str, messages: Sequence[Mapping[str, Any]], seed: int | None, temperature: float | None,
                *, tools: Sequence[Mapping[str, Any]] | None = None, max_tokens: int | None = None) -> str:
    """The cassette key of a request (tools and max_tokens count only when given)."""
    req: dict[str, Any] = {"model": model, "messages": list(messages), "seed": seed, "temperature": temperature}
    if tools:
        req["tools"] = list(tools)
    if max_tokens is not None:
        req["max_tokens"] = max_tokens
    blob = json.dumps(req, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class CassetteMiss(LLMError, KeyError):
    """Replay mode met a request the cassette does not hold."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CassetteClient:
    """Record (``mode="record"``, with the real client as ``inner``) or replay (``mode="replay"``) answers."""

    def __init__(self, path: str | Path, mode: str = "replay", inner: ChatClient | None = None,
                 model: str | None = None):
        if mode not in ("record", "replay"):
            raise ValueError(f"mode must be 'record' or 'replay', got {mode!r}")
        if mode == "record" and inner is None:
            raise ValueError("record mode needs the real client to record from (inner=...)")
        self.path, self.mode, self.inner = Path(path), mode, inner
        self.model = model or (inner.model if inner is not None else "replay")
        self._answers: dict[str, ChatReply] = {}
        if self.path.exists():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    self._answers[rec["key"]] = ChatReply(rec["response"], tuple(rec.get("tool_calls") or ()))
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ValueError(f"{self.path}:{n}: corrupt cassette line ({exc})") from None
        elif mode == "replay":
            raise FileNotFoundError(f"cassette {self.path} does not exist; record it first (mode='record')")

    def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
             seed: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> ChatReply:
        key = request_key(self.model, messages, seed, temperature, tools=tools, max_tokens=max_tokens)
        if key in self._answers:
            return self._answers[key]
        if self.mode == "replay" or self.inner is None:
            raise CassetteMiss(f"{self.path}: no recorded answer for request {key[:12]} (model {self.model}, seed {seed})")
        reply = self.inner.chat(messages, tools=tools, seed=seed, temperature=temperature, max_tokens=max_tokens)
        self._answers[key] = reply
        rec: dict[str, Any] = {"key": key, "model": self.model, "seed": seed, "request": list(messages),
                               "response": reply.content}
        if reply.tool_calls:
            rec["tool_calls"] = list(reply.tool_calls)
        self._append(json.dumps(rec, ensure_ascii=False) + "\n")
        return reply

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
