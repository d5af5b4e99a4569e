"""The HTTP transport: any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp, ...).

Only the standard library is used, and ``urllib`` is imported on the first request, so
importing this module (or building a client) costs nothing until a model is asked.
Connection failures, timeouts, HTTP 408/409/429 and 5xx answers are retried with
exponential backoff (``backoff * 2**attempt`` seconds, or the server's ``Retry-After``,
capped at ``max_backoff``); anything else is an :class:`~trace_gym.llm.base.LLMError`
that says what the server answered.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .base import ChatReply, LLMError, wire_message

__all__ = ["OpenAIChatClient", "chat_url", "DEFAULT_BASE_URL"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def chat_url(base_url: str) -> str:
    """The chat-completions endpoint for a server address such as ``http://host:8000/v1``."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"server URL must start with http:// or https://, got {base_url!r}")
    if url.endswith("/chat/completions"):
        return url
    return f"{url}/chat/completions"


class OpenAIChatClient:
    """A :class:`~trace_gym.llm.base.ChatClient` over HTTP.

    ``base_url`` is the API root (``http://127.0.0.1:8000/v1``) or the full
    ``.../chat/completions`` URL; it defaults to ``$OPENAI_BASE_URL``, then OpenAI's.
    ``api_key`` defaults to ``$OPENAI_API_KEY`` (vLLM needs none).  ``temperature``,
    ``max_tokens`` and ``seed`` given to :meth:`chat` override the client's defaults;
    ``extra_body`` is merged into every request.  ``max_retries`` retries follow the
    first attempt; ``requests_sent`` counts attempts.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str = "default",
        *,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        extra_body: Mapping[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not model:
            raise ValueError("a model name is required (the name the server serves)")
        if max_retries < 0 or timeout <= 0:
            raise ValueError("max_retries must be >= 0 and timeout > 0")
        self.url = chat_url(base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.temperature, self.max_tokens = temperature, max_tokens
        self.timeout, self.max_retries = timeout, max_retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests_sent = 0

    def __getstate__(self) -> dict[str, Any]:  # picklable (vector envs, multiprocessing): the lock is per process
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def request_body(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                     seed: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        """The JSON body :meth:`chat` sends (unset options are left to the server)."""
        body: dict[str, Any] = {"model": self.model, "messages": [wire_message(m) for m in messages]}
        if tools:
            body["tools"] = list(tools)
        options = {"temperature": self.temperature if temperature is None else temperature,
                   "max_tokens": self.max_tokens if max_tokens is None else max_tokens, "seed": seed}
        body.update({k: v for k, v in options.items() if v is not None})
        body.update(self.extra_body)
        return body

    def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
             seed: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> ChatReply:
        body = self.request_body(messages, tools=tools, seed=seed, temperature=temperature, max_tokens=max_tokens)
        answer = self.post(body)
        try:
            return ChatReply.from_completion(answer)
        except LLMError as exc:
            raise LLMError(f"{self.url}: {exc}") from None

    def post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` with retries; the decoded JSON response, or :class:`LLMError`."""
        import urllib.error
        import urllib.request

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
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - user-configured endpoint
                    raw = resp.read()
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                if exc.code not in _RETRY_STATUS:
                    raise LLMError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
                last = f"HTTP {exc.code}: {detail}"
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                if retry_after is not None:
                    try:
                        wait = min(self.max_backoff, max(0.0, float(retry_after)))
                    except ValueError:
                        pass
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"cannot reach the server ({type(reason).__name__}: {reason})"
            else:
                try:
                    return json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise LLMError(f"{self.url} returned a body that is not JSON ({exc}): {raw[:200]!r}") from None
            if attempt < self.max_retries:
                self._sleep(wait)
        raise LLMError(f"{self.url}: no answer after {self.max_retries + 1} attempts; last error: {last}")


def _error_detail(exc: Any) -> str:
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
    return text[:300] or str(exc.reason or "") or "no details"
