"""The user side of a capability episode: a scripted user, or a simulator policy.

The scripted user answers each agent message with the first rule whose phrases occur in
it (case-insensitive), else the next fallback line; it ends the conversation on a rule
marked ``end`` or once it has replied ``max_turns`` times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["ScriptedUser", "SimulatedUser", "UserSide"]

DEFAULT_FALLBACK = ["Could you please help me with my request?"]


class UserSide(Protocol):
    def reply(self, agent_text: str, history: list[dict[str, Any]]) -> tuple[str, bool]: ...


@dataclass
class ScriptedUser:
    rules: list[dict[str, Any]]
    fallback: list[str] = field(default_factory=lambda: list(DEFAULT_FALLBACK))
    max_turns: int = 8
    turns: int = 0
    _fired: set[int] = field(default_factory=set)
    _fallback_i: int = 0

    def _matches(self, rule: dict[str, Any], text: str) -> bool:
        if "when_any" in rule and not any(p.lower() in text for p in rule["when_any"]):
            return False
        if "when_all" in rule and not all(p.lower() in text for p in rule["when_all"]):
            return False
        return True

    def reply(self, agent_text: str, history: list[dict[str, Any]]) -> tuple[str, bool]:
        text = agent_text.lower()
        self.turns += 1
        for i, rule in enumerate(self.rules):
            if rule.get("once") and i in self._fired:
                continue
            if self._matches(rule, text):
                self._fired.add(i)
                return rule["say"], bool(rule.get("end")) or self.turns >= self.max_turns
        line = self.fallback[min(self._fallback_i, len(self.fallback) - 1)]
        self._fallback_i += 1
        return line, self.turns >= self.max_turns


@dataclass
class SimulatedUser:
    """A user played by any object with ``act(messages, tools) -> str`` (e.g. an LLM policy)."""

    policy: Any
    instructions: str
    stop_token: str = "###STOP###"
    max_turns: int = 8
    turns: int = 0

    def reply(self, agent_text: str, history: list[dict[str, Any]]) -> tuple[str, bool]:
        self.turns += 1
        msgs: list[dict[str, Any]] = [{"role": "system", "content": self.instructions + f"\nWhen your request is settled, reply with {self.stop_token}."}]
        for m in history:  # the simulator sees the conversation from the user's side
            if m["role"] == "user" and m.get("name") is None:
                msgs.append({"role": "assistant", "content": m.get("content") or ""})
            elif m["role"] == "assistant" and not m.get("tool_calls"):
                msgs.append({"role": "user", "content": m.get("content") or ""})
        try:
            out = str(self.policy.act(msgs, []))
        except Exception as exc:  # a failing simulator ends the episode cleanly
            return f"(user simulator failed: {type(exc).__name__})", True
        done = self.stop_token in out or self.turns >= self.max_turns
        text = out.replace(self.stop_token, "").strip() or "Thanks, that's all."
        return text, done
