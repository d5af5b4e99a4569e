"""Natural-language assertion judges for τ²-bench's ``NL_ASSERTION`` reward component.

A :class:`Judge` receives the conversation (τ²-style message dicts, see
:mod:`trace_gym.tau2.evaluator`) and the task's assertions, and returns one verdict per
assertion as ``{"nl_assertion", "met", "justification"}`` — the shape of tau2's
``NLAssertionCheck`` dump.

* :class:`OpenAICompatibleJudge` asks a chat model — any OpenAI-compatible
  ``/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp server, ...), or any other
  :class:`~trace_gym.llm.ChatClient`.  It is the counterpart of tau2's gpt-4.1 judge;
  the prompt wording is ours, the JSON contract
  (``results[].expectedOutcome / reasoning / metExpectation``) is the same.
* :class:`FunctionJudge` wraps a plain Python callable (tests, rule-based judges).

Without a judge the evaluator does **not** pass NL assertions: it reports them as not
judged (see :func:`trace_gym.tau2.evaluator.evaluate`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from trace_gym.llm.base import ChatClient, LLMError

__all__ = [
    "Judge",
    "JudgeError",
    "FunctionJudge",
    "OpenAICompatibleJudge",
    "render_conversation",
]


class JudgeError(RuntimeError):
    """The judge could not produce verdicts (endpoint down, unparseable answer, ...)."""


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
    """LLM judge over a chat model.

    By default it builds an :class:`~trace_gym.llm.OpenAIChatClient` for ``model`` at
    ``base_url`` (``$OPENAI_BASE_URL`` or OpenAI's; ``api_key`` defaults to
    ``$OPENAI_API_KEY``); ``client`` may pass any other chat client instead.  A model
    that cannot be reached, or whose answer is not the verdict JSON, is a :class:`JudgeError`.
    """

    def __init__(
        self,
        model: str = "gpt-4.1-2025-04-14",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 3,
        client: ChatClient | None = None,
    ):
        if client is None:
            from trace_gym.llm.http import OpenAIChatClient

            client = OpenAIChatClient(base_url, model, api_key=api_key, timeout=timeout, max_retries=max_retries)
        self.client = client
        self.model = model
        self.temperature = temperature

    def _messages(self, messages: Sequence[dict[str, Any]], assertions: Sequence[str]) -> list[dict[str, Any]]:
        listing = "\n".join(f"- {a}" for a in assertions)
        user = f"Conversation:\n{render_conversation(messages)}\n\nExpected outcomes:\n{listing}"
        return [{"role": "system", "content": _JUDGE_INSTRUCTIONS}, {"role": "user", "content": user}]

    def judge(self, messages: Sequence[dict[str, Any]], assertions: Sequence[str]) -> list[dict[str, Any]]:
        try:
            reply = self.client.chat(self._messages(messages, assertions), temperature=self.temperature)
        except LLMError as exc:
            raise JudgeError(str(exc)) from None
        return _parse_verdicts(reply.content, assertions)
