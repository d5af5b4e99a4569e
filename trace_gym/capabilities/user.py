"""The user side of a capability episode: a scripted user, or a simulator model.

Both implement the core seam :class:`~trace_gym.core.users.UserSimulator`; ``respond``
gets the conversation so far (OpenAI chat dicts, the agent's message last) and returns a
:class:`~trace_gym.core.users.UserTurn` whose ``end`` closes the episode.

The scripted user answers each agent message with the first rule whose phrases occur in
it (case-insensitive), else the next fallback line; it ends the conversation on a rule
marked ``end`` or once it has replied ``max_turns`` times.  **Dual control** (telecom): a rule
with ``do`` also runs the user's own tools on their device — each ``{call, args}`` in order,
through the ``device`` callable the environment gives (the benchmark engine's user tools on the
episode's phone) — and its reply is the rule's line followed by each result, so the agent reads
what the phone showed.  A failed device call is reported in the reply like any result; it never
raises.  Without a ``device`` the rule only says its line.  The simulated user is a chat
model (a :class:`~trace_gym.llm.ChatClient`, or any policy with ``act(messages, tools)``)
that plays the scenario's instructions; when its model fails, the conversation ends with
a turn that says so (this family's documented fallback).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.users import STOP, UserError, UserTurn, flip_roles
from ..llm import ask_model

__all__ = ["ScriptedUser", "SimulatedUser"]

DEFAULT_FALLBACK = ["Could you please help me with my request?"]


def _agent_text(messages: Sequence[Mapping[str, Any]]) -> str:
    last = messages[-1] if messages else {}
    return (last.get("content") or "") if last.get("role") == "assistant" else ""


@dataclass
class ScriptedUser:
    rules: list[dict[str, Any]]
    fallback: list[str] = field(default_factory=lambda: list(DEFAULT_FALLBACK))
    max_turns: int = 8
    device: Callable[[str, dict[str, Any]], Any] | None = None  # dual control: runs one user tool call -> ToolResult
    turns: int = 0
    _fired: set[int] = field(default_factory=set)
    _fallback_i: int = 0

    def reset(self, context: Any = None) -> None:
        self.turns, self._fallback_i = 0, 0
        self._fired = set()

    def _matches(self, rule: dict[str, Any], text: str) -> bool:
        if "when_any" in rule and not any(p.lower() in text for p in rule["when_any"]):
            return False
        if "when_all" in rule and not all(p.lower() in text for p in rule["when_all"]):
            return False
        return True

    def respond(self, messages: Sequence[Mapping[str, Any]]) -> UserTurn:
        text = _agent_text(messages).lower()
        self.turns += 1
        for i, rule in enumerate(self.rules):
            if rule.get("once") and i in self._fired:
                continue
            if self._matches(rule, text):
                self._fired.add(i)
                return UserTurn(self._act(rule), end=bool(rule.get("end")) or self.turns >= self.max_turns)
        line = self.fallback[min(self._fallback_i, len(self.fallback) - 1)]
        self._fallback_i += 1
        return UserTurn(line, end=self.turns >= self.max_turns)

    def _act(self, rule: dict[str, Any]) -> str:
        """The rule's line, then the result of each device call it makes (dual control)."""
        if not rule.get("do") or self.device is None:
            return rule["say"]
        shown = [str(getattr(self.device(step["call"], dict(step.get("args") or {})), "content", "")) for step in rule["do"]]
        return "\n".join([rule["say"], *shown])


@dataclass
class SimulatedUser:
    """A user played by a chat model, or by any object with ``act(messages, tools) -> str`` (e.g. an LLM policy)."""

    policy: Any
    instructions: str
    stop_token: str = STOP
    max_turns: int = 8
    turns: int = 0

    def reset(self, context: Any = None) -> None:
        self.turns = 0

    def respond(self, messages: Sequence[Mapping[str, Any]]) -> UserTurn:
        from ..llm.local import PolicyChatClient

        self.turns += 1
        system = {"role": "system",
                  "content": self.instructions + f"\nWhen your request is settled, reply with {self.stop_token}."}
        client = self.policy if hasattr(self.policy, "chat") else PolicyChatClient(self.policy)
        try:
            out = ask_model(client, [system, *flip_roles(messages)]).text
        except UserError as exc:  # a failing simulator ends the episode cleanly
            return UserTurn(f"(user simulator failed: {type(exc.__cause__).__name__})", end=True)
        done = self.stop_token in out or self.turns >= self.max_turns
        return UserTurn(out.replace(self.stop_token, "").strip() or "Thanks, that's all.", end=done)
