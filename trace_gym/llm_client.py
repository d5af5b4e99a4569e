"""Chat-completion clients for components that call an LLM (labelers, judges, drafters).

``ChatClient`` is the seam: ``complete(messages, *, seed, temperature) -> str``.

* :class:`OpenAIChatClient` talks to any OpenAI-compatible endpoint (vLLM, OpenAI, …)
  over the standard library's HTTP client.
* :class:`CassetteClient` records a real client's answers to a JSONL cassette and
  replays them offline, keyed by the exact request.  Tests use replay mode so the LLM
  path runs deterministically without a model; an unknown request in replay mode is
  an error that names the cassette, never a made-up answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatClient", "OpenAIChatClient", "CassetteClient", "CassetteMiss", "PolicyChatClient", "request_key"]


@runtime_checkable
class ChatClient(Protocol):
    model: str

    def complete(self, messages: list[dict[str, Any]], *, seed: int, temperature: float = 0.0) -> str: ...


class OpenAIChatClient:
    """POST ``{base_url}/chat/completions``; retries 5xx and timeouts with backoff."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 120.0, retries: int = 3,
                 max_tokens: int = 1024):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout, self.retries, self.max_tokens = timeout, retries, max_tokens

    def complete(self, messages: list[dict[str, Any]], *, seed: int, temperature: float = 0.0) -> str:
        body = json.dumps({"model": self.model, "messages": messages, "seed": seed, "temperature": temperature,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(f"{self.base_url}/chat/completions", body, headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    data = json.loads(resp.read())
                return data["choices"][0]["message"].get("content") or ""
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    raise RuntimeError(f"{self.base_url}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
                last = exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = exc
            time.sleep(min(8.0, 0.5 * 2**attempt))
        raise RuntimeError(f"{self.base_url}: no answer after {self.retries + 1} attempts: {last}")


def request_key(model: str, messages: list[dict[str, Any]], seed: int, temperature: float) -> str:
    blob = json.dumps({"model": model, "messages": messages, "seed": seed, "temperature": temperature},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class CassetteMiss(KeyError):
    """Replay mode met a request the cassette does not hold."""


class CassetteClient:
    """Record (``mode="record"``) or replay (``mode="replay"``) a client's answers."""

    def __init__(self, path: str | Path, mode: str = "replay", inner: ChatClient | None = None, model: str | None = None):
        if mode not in ("record", "replay"):
            raise ValueError(f"mode must be 'record' or 'replay', got {mode!r}")
        if mode == "record" and inner is None:
            raise ValueError("record mode needs the real client to record from (inner=...)")
        self.path, self.mode, self.inner = Path(path), mode, inner
        self.model = model or (inner.model if inner else "replay")
        self._answers: dict[str, str] = {}
        if self.path.exists():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    self._answers[rec["key"]] = rec["response"]
                except (json.JSONDecodeError, KeyError) as exc:
                    raise ValueError(f"{self.path}:{n}: corrupt cassette line ({exc})") from None
        elif mode == "replay":
            raise FileNotFoundError(f"cassette {self.path} does not exist; record it first (mode='record')")

    def complete(self, messages: list[dict[str, Any]], *, seed: int, temperature: float = 0.0) -> str:
        key = request_key(self.model, messages, seed, temperature)
        if key in self._answers:
            return self._answers[key]
        if self.mode == "replay":
            raise CassetteMiss(f"{self.path}: no recorded answer for request {key[:12]} (model {self.model}, seed {seed})")
        answer = self.inner.complete(messages, seed=seed, temperature=temperature)  # type: ignore[union-attr]
        self._answers[key] = answer
        line = json.dumps({"key": key, "model": self.model, "seed": seed, "request": messages, "response": answer},
                          ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return answer


class PolicyChatClient:
    """Use any trace-gym policy (e.g. a local Hugging Face model) as a chat client.

    The policy's own sampling settings apply; ``seed`` becomes its episode seed, so the
    same request with the same seed gives the same answer.
    """

    def __init__(self, policy: Any):
        self.policy = policy
        self.model = getattr(policy, "policy_id", type(policy).__name__)

    def complete(self, messages: list[dict[str, Any]], *, seed: int, temperature: float = 0.0) -> str:
        if hasattr(self.policy, "reset"):
            self.policy.reset(seed)
        return self.policy.act(messages, [])
