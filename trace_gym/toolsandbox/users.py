"""The user side of a ToolSandbox episode, behind one small protocol.

A :class:`UserSimulator` sees the message bus after the agent has written to the user
and answers with a :class:`UserTurn`: a message to the agent, or the end of the
conversation (upstream's ``end_conversation()`` tool).  Three implementations:

* :class:`ScriptedUser` -- offline and deterministic: an optional list of canned
  replies, then it ends the conversation.  With no replies it ends as soon as the
  agent has answered, which is what a single-user-turn scenario needs.
* :class:`ReplayUser` -- the user steps of a recorded trajectory (corpus format).
* :class:`LLMUser` -- an LLM plays the user from the scenario's
  ``user_simulator_system_prompt`` and few-shot dialog, through a text generator:
  :class:`OpenAICompatibleGenerator` (any ``/v1/chat/completions`` endpoint) or
  :class:`HFGenerator` (a local Hugging Face chat model, loaded lazily).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "UserTurn", "UserSimulator", "ScriptedUser", "ReplayUser", "LLMUser", "OpenAICompatibleGenerator",
    "HFGenerator", "user_view",
]

END_MARKERS = ("end_conversation", "###STOP###")


@dataclass(frozen=True)
class UserTurn:
    """A user reply (``content``) or the end of the conversation (``end=True``)."""

    content: str | None = None
    end: bool = False


@runtime_checkable
class UserSimulator(Protocol):
    def reset(self, scenario: Any, seed: int | None = None) -> None:
        """Prepare for a new episode of ``scenario``."""

    def respond(self, bus: Sequence[Mapping[str, Any]]) -> UserTurn:
        """The user's answer; the last bus row is the agent's message to the user."""


class ScriptedUser:
    """Canned replies in order, then ``end_conversation``."""

    def __init__(self, replies: Sequence[str] = ()):
        self.replies = list(replies)
        self._next = 0

    def reset(self, scenario: Any, seed: int | None = None) -> None:
        self._next = 0

    def respond(self, bus: Sequence[Mapping[str, Any]]) -> UserTurn:
        if self._next < len(self.replies):
            self._next += 1
            return UserTurn(self.replies[self._next - 1])
        return UserTurn(end=True)


class ReplayUser:
    """The user steps of a trajectory: ``{"role": "user", "type": "message"|"end_conversation", ...}``."""

    def __init__(self, steps: Sequence[Mapping[str, Any]]):
        self.steps = [s for s in steps if s.get("role") == "user"]
        self._next = 0

    def reset(self, scenario: Any, seed: int | None = None) -> None:
        self._next = 0

    def respond(self, bus: Sequence[Mapping[str, Any]]) -> UserTurn:
        if self._next >= len(self.steps):
            return UserTurn(end=True)
        step = self.steps[self._next]
        self._next += 1
        if step.get("type") == "end_conversation":
            return UserTurn(end=True)
        return UserTurn(str(step.get("content", "")))


def user_view(scenario: Any, bus: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The conversation as the user simulator sees it, as chat messages (the user is the assistant).

    System prompt, the few-shot dialog, then the episode's user/agent text rows.
    """
    msgs: list[dict[str, str]] = [{"role": "system", "content": scenario.user_simulator_system_prompt}]
    for row in scenario.user_simulator_few_shot:
        if row.get("sender") == "USER" and row.get("recipient") == "AGENT":
            msgs.append({"role": "assistant", "content": row.get("content") or ""})
        elif row.get("sender") == "AGENT" and row.get("recipient") == "USER":
            msgs.append({"role": "user", "content": row.get("content") or ""})
    first = scenario.first_user_sandbox_message_index
    for row in bus[first:]:
        if row["sender"] == "USER" and row["recipient"] == "AGENT":
            msgs.append({"role": "assistant", "content": row.get("content") or ""})
        elif row["sender"] == "AGENT" and row["recipient"] == "USER":
            msgs.append({"role": "user", "content": row.get("content") or ""})
    return msgs


class LLMUser:
    """An LLM role-plays the user; ``generate(messages) -> str`` is any chat generator.

    A reply that mentions ``end_conversation`` (the user simulator's tool in upstream)
    or ``###STOP###`` ends the conversation; ``max_turns`` bounds the user's messages.
    """

    def __init__(self, generate: Callable[[list[dict[str, str]]], str], max_turns: int = 8):
        self.generate = generate
        self.max_turns = max_turns
        self.scenario: Any = None
        self._turns = 0

    def reset(self, scenario: Any, seed: int | None = None) -> None:
        self.scenario = scenario
        self._turns = 0

    def respond(self, bus: Sequence[Mapping[str, Any]]) -> UserTurn:
        if self.scenario is None:
            raise RuntimeError("LLMUser.respond() before reset()")
        if self._turns >= self.max_turns:
            return UserTurn(end=True)
        self._turns += 1
        try:
            text = (self.generate(user_view(self.scenario, bus)) or "").strip()
        except Exception as exc:  # an unreachable model must not crash the episode
            raise RuntimeError(f"the user simulator's model failed: {type(exc).__name__}: {exc}") from exc
        if not text or any(m in text for m in END_MARKERS):
            return UserTurn(end=True)
        return UserTurn(text)


class OpenAICompatibleGenerator:
    """Chat completions from an OpenAI-compatible server (vLLM, llama.cpp, OpenAI, ...)."""

    def __init__(self, model: str, base_url: str = "http://localhost:8000/v1", api_key: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 256, timeout: float = 60.0):
        self.model, self.base_url, self.api_key = model, base_url.rstrip("/"), api_key
        self.temperature, self.max_tokens, self.timeout = temperature, max_tokens, timeout

    def __call__(self, messages: list[dict[str, str]]) -> str:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": self.temperature,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            data = json.loads(resp.read().decode())
        return data["choices"][0]["message"].get("content") or ""


class HFGenerator:
    """Greedy generation with a local Hugging Face chat model (imported and loaded on first use)."""

    def __init__(self, model_name: str, max_new_tokens: int = 128, device: str | None = None):
        self.model_name, self.max_new_tokens, self.device = model_name, max_new_tokens, device
        self._tok: Any = None
        self._model: Any = None

    def __call__(self, messages: list[dict[str, str]]) -> str:
        if self._model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(self.model_name)
            self._model = AutoModelForCausalLM.from_pretrained(self.model_name)
            if self.device:
                self._model.to(self.device)
        enc = self._tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        ids = enc["input_ids"].to(self._model.device)
        mask = enc["attention_mask"].to(self._model.device)
        pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else self._tok.eos_token_id
        out = self._model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=self.max_new_tokens,
                                   do_sample=False, pad_token_id=pad)
        return self._tok.decode(out[0, ids.shape[-1]:], skip_special_tokens=True)
