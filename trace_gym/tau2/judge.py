"""Natural-language assertion judges for τ²-bench's ``NL_ASSERTION`` reward component.

A :class:`Judge` receives the conversation (τ²-style message dicts, see
:mod:`trace_gym.tau2.evaluator`) and the task's assertions, and returns one verdict per
assertion as ``{"nl_assertion", "met", "justification"}`` — the shape of tau2's
``NLAssertionCheck`` dump.

* :class:`OpenAICompatibleJudge` asks a chat model over any OpenAI-compatible
  ``/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp server, ...).  It is the
  counterpart of tau2's gpt-4.1 judge; the prompt wording is ours, the JSON contract
  (``results[].expectedOutcome / reasoning / metExpectation``) is the same.
* :class:`FunctionJudge` wraps a plain Python callable (tests, rule-based judges).

Without a judge the evaluator does **not** pass NL assertions: it reports them as not
judged (see :func:`trace_gym.tau2.evaluator.evaluate`).

:func:`post_chat_completion` is the small HTTP client shared with the LLM user
simulator; it needs no third-party package.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Judge",
    "JudgeError",
    "FunctionJudge",
    "OpenAICompatibleJudge",
    "render_conversation",
    "post_chat_completion",
    "EndpointError",
]


class JudgeError(RuntimeError):
    """The judge could not produce verdicts (endpoint down, unparseable answer, ...)."""


class EndpointError(RuntimeError):
    """An OpenAI-compatible endpoint could not be reached or answered with an error."""


@runtime_checkable
class Judge(Protocol):
    """Decides, for each natural-language assertion, whether the conversation satisfies it."""

    def judge(self, messages: Sequence[dict[str, Any]], assertions: Sequence[str]) -> list[dict[str, Any]]:
        """One ``{"nl_assertion", "met", "justification"}`` dict per assertion, in order."""
        ...


def render_conversation(messages: Sequence[dict[str, Any]]) -> str:
    """``role: content`` per line, as tau2's judge sees the conversation (tool calls show ``None``)."""
    return "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages)


class FunctionJudge:
    """Adapter that turns ``fn(messages, assertion) -> bool | (bool, reason)`` into a :class:`Judge`."""

    def __init__(self, fn: Callable[[Sequence[dict[str, Any]], str], Any]):
        self._fn = fn

    def judge(self, messages: Sequence[dict[str, Any]], assertions: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for a in assertions:
            res = self._fn(messages, a)
            met, why = (res if isinstance(res, tuple) else (res, ""))
            out.append({"nl_assertion": a, "met": bool(met), "justification": str(why)})
        return out


def post_chat_completion(
    base_url: str,
    payload: dict[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """POST ``payload`` to ``{base_url}/chat/completions`` and return the first choice's message."""
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - user-configured endpoint
            body = json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        raise EndpointError(f"{url} answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise EndpointError(f"cannot reach {url}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise EndpointError(f"{url} did not answer JSON: {exc}") from None
    try:
        return body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise EndpointError(f"{url}: unexpected response shape: {str(body)[:300]}") from None


_JUDGE_INSTRUCTIONS = """You grade a customer-service conversation between an agent and a customer.
You receive the conversation and a list of expected outcomes. For every expected outcome, decide
independently whether the agent's behaviour in the conversation satisfies it.

Answer with one JSON object and nothing else, of the form
{"results": [{"expectedOutcome": "<the outcome, copied from the list>",
              "reasoning": "<one or two sentences>",
              "metExpectation": true or false}]}
with exactly one entry per expected outcome, in the given order."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)


def _parse_verdicts(text: str | None, assertions: Sequence[str]) -> list[dict[str, Any]]:
    if not text:
        raise JudgeError("the judge returned an empty answer")
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"the judge's answer is not JSON ({exc.msg}): {body[:200]!r}") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise JudgeError("the judge's answer has no 'results' list")
    by_text: dict[str, dict[str, Any]] = {}
    for r in results:
        if isinstance(r, dict) and isinstance(r.get("expectedOutcome"), str):
            by_text.setdefault(r["expectedOutcome"].strip(), r)
    out = []
    for i, a in enumerate(assertions):
        r = by_text.get(a.strip())
        if r is None and i < len(results) and isinstance(results[i], dict):
            r = results[i]  # judges sometimes paraphrase the outcome; fall back to position
        if r is None:
            out.append({"nl_assertion": a, "met": False, "justification": "the judge gave no verdict for this outcome"})
            continue
        met = r.get("metExpectation")
        if isinstance(met, str):
            met = met.strip().lower() == "true"
        out.append({"nl_assertion": a, "met": bool(met), "justification": str(r.get("reasoning", ""))})
    return out


class OpenAICompatibleJudge:
    """LLM judge over an OpenAI-compatible chat endpoint.

    ``api_key`` defaults to ``$OPENAI_API_KEY``; ``base_url`` to ``$OPENAI_BASE_URL`` or
    OpenAI's.  ``transport`` may replace the HTTP call (``fn(payload) -> message dict``).
    """

    def __init__(
        self,
        model: str = "gpt-4.1-2025-04-14",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        timeout: float = 120.0,
        transport: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ):
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self.timeout = timeout
        self._transport = transport

    def _payload(self, messages: Sequence[dict[str, Any]], assertions: Sequence[str]) -> dict[str, Any]:
        listing = "\n".join(f"- {a}" for a in assertions)
        user = f"Conversation:\n{render_conversation(messages)}\n\nExpected outcomes:\n{listing}"
        return {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [{"role": "system", "content": _JUDGE_INSTRUCTIONS}, {"role": "user", "content": user}],
        }

    def judge(self, messages: Sequence[dict[str, Any]], assertions: Sequence[str]) -> list[dict[str, Any]]:
        payload = self._payload(messages, assertions)
        try:
            if self._transport is not None:
                msg = self._transport(payload)
            else:
                msg = post_chat_completion(self.base_url, payload, api_key=self.api_key, timeout=self.timeout)
        except EndpointError as exc:
            raise JudgeError(str(exc)) from None
        return _parse_verdicts(msg.get("content") if isinstance(msg, dict) else None, assertions)
