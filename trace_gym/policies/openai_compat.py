"""A policy that asks an OpenAI-compatible chat-completions server (vLLM, ...).

Only the standard library is used (``urllib``).  The conversation and the tool
schemas are sent as they are; structured ``tool_calls`` in the reply are turned
back into text (``<tool_call>`` blocks after the reply's content, if any) so the
environment parses them like any other action.  Connection failures, timeouts,
HTTP 429 and 5xx answers are retried with exponential backoff; anything else is a
:class:`~trace_gym.policies.base.PolicyError` that says what the server answered.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.toolcalls import format_tool_call
from .base import PolicyError, Request

__all__ = ["OpenAICompatPolicy", "completion_to_action", "chat_url"]

_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def chat_url(base_url: str) -> str:
    """The chat-completions endpoint for a server address such as ``http://host:8000/v1``."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"server URL must start with http:// or https://, got {base_url!r}")
    if url.endswith("/chat/completions"):
        return url
    return f"{url}/chat/completions"


def completion_to_action(body: dict[str, Any]) -> str:
    """The text action for a chat-completions response body (first choice)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices:
        raise PolicyError(f"the server's response has no choices: {json.dumps(body)[:300]}")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise PolicyError(f"the server's first choice has no message: {json.dumps(choices[0])[:300]}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise PolicyError(f"the message content is {type(content).__name__}, not text")
    parts = [content.strip()] if content and content.strip() else []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise PolicyError(f"malformed tool call in the server's response: {json.dumps(call)[:300]}")
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw if raw is not None else {})
        except json.JSONDecodeError:
            args = raw  # keep the model's broken arguments: the environment reports the format error
        if isinstance(args, dict):
            parts.append(format_tool_call(fn["name"], args, style="hermes"))
        else:
            payload = json.dumps({"name": fn["name"], "arguments": args}, ensure_ascii=False)
            parts.append(f"<tool_call>\n{payload}\n</tool_call>")
    return "\n".join(parts)


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
        if not model:
            raise ValueError("a model name is required (the name the server serves)")
        if max_retries < 0 or concurrency < 1 or timeout <= 0:
            raise ValueError("max_retries must be >= 0, concurrency >= 1 and timeout > 0")
        self.url = chat_url(base_url)
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.seed = seed
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self.policy_id = policy_id or f"openai:{model}"
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests_sent = 0  # attempts, retries included

    # -- request building --------------------------------------------------------------
    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [_wire_message(m) for m in messages]}
        if tools:
            body["tools"] = tools
        for key in ("temperature", "max_tokens", "top_p", "seed"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        body.update(self.extra_body)
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            with self._lock:
                self.requests_sent += 1
            wait = min(self.max_backoff, self.backoff * (2**attempt))
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                if exc.code not in _RETRY_STATUS:
                    raise PolicyError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
                last = f"HTTP {exc.code}: {detail}"
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                if retry_after is not None:
                    try:
                        wait = min(self.max_backoff, max(0.0, float(retry_after)))
                    except ValueError:
                        pass
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{type(reason).__name__}: {reason}"
            else:
                try:
                    return json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise PolicyError(f"{self.url} returned a body that is not JSON ({exc}): {raw[:200]!r}") from None
            if attempt < self.max_retries:
                self._sleep(wait)
        raise PolicyError(f"{self.url}: no answer after {self.max_retries + 1} attempts; last error: {last}")

    # -- acting --------------------------------------------------------------------------
    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return completion_to_action(self._post(self.request_body(messages, tools)))

    def act_batch(self, requests: Sequence[Request]) -> list[str]:
        if len(requests) <= 1 or self.concurrency == 1:
            return [self.act(m, t) for m, t in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(lambda r: self.act(r[0], r[1]), requests))


def _wire_message(m: dict[str, Any]) -> dict[str, Any]:
    """A chat dict as the API wants it: only the standard fields, ``name`` only where allowed."""
    out: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
    if m.get("tool_calls"):
        out["tool_calls"] = m["tool_calls"]
    if m["role"] == "tool":
        out["tool_call_id"] = m.get("tool_call_id")
        out["content"] = m.get("content") or ""
    elif out["content"] is None and not m.get("tool_calls"):
        out["content"] = ""
    return out


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read().decode("utf-8", "replace")
    except Exception:
        text = ""
    try:
        err = json.loads(text).get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    except (ValueError, AttributeError):
        pass
    return text[:300] or exc.reason or "no details"
