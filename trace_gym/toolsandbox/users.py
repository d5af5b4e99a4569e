"""The user side of a ToolSandbox episode, on the core user-simulator seam.

Each simulator implements :class:`~trace_gym.core.users.UserSimulator`: ``reset(scenario)``
per episode, then ``respond(bus)`` after the agent has written to the user (the last
bus row is the agent's message).  The answer is a :class:`~trace_gym.core.users.UserTurn`:
a message to the agent, or the end of the conversation (upstream's
``end_conversation()`` tool, ``end=True``).  Four implementations:

* :class:`~trace_gym.toolsandbox.offline_user.OfflineUser` -- the default: no model,
  deterministic; it answers the agent's questions with what the scenario's task tells the
  user, confirms, asks again when the agent gives up, and ends when the task is done.
* :class:`ScriptedUser` -- offline and deterministic: an optional list of canned
  replies, then it ends the conversation.  With no replies it ends as soon as the
  agent has answered, which is what a single-user-turn scenario needs.
* :class:`ReplayUser` -- the user steps of a recorded trajectory (corpus format).
* :class:`LLMUser` -- an LLM plays the user from the scenario's
  ``user_simulator_system_prompt`` and few-shot dialog, through any
  :class:`~trace_gym.llm.ChatClient` (an OpenAI-compatible endpoint,
  :class:`~trace_gym.llm.HFChatClient` for a local model, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trace_gym.core.users import ReplayTurns, UserError, UserSimulator, UserTurn, flip_roles
from trace_gym.llm import ask_model
from trace_gym.llm.base import ChatClient

from .offline_user import OfflineUser

__all__ = ["UserTurn", "UserSimulator", "OfflineUser", "ScriptedUser", "ReplayUser", "LLMUser", "user_view"]

END_MARKERS = ("end_conversation", "###STOP###")
_END = UserTurn(end=True)


class ScriptedUser(ReplayTurns):
    """Canned replies in order, then ``end_conversation``."""

    def __init__(self, replies: Sequence[str] = ()):
        self.replies = list(replies)
        super().__init__([UserTurn(r) for r in self.replies], _END)


class ReplayUser(ReplayTurns):
    """The user steps of a trajectory: ``{"role": "user", "type": "message"|"end_conversation", ...}``."""

    def __init__(self, steps: Sequence[Mapping[str, Any]]):
        self.steps = [s for s in steps if s.get("role") == "user"]
        super().__init__([_END if s.get("type") == "end_conversation" else UserTurn(str(s.get("content", "")))
                          for s in self.steps], _END)


def user_view(scenario: Any, bus: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The conversation as the user simulator sees it, as chat messages (the user is the assistant).

    System prompt, the few-shot dialog, then the episode's user/agent text rows.
    """
    first = scenario.first_user_sandbox_message_index
    rows = [*scenario.user_simulator_few_shot, *bus[first:]]
    agent_view = [{"role": "user" if r.get("sender") == "USER" else "assistant", "content": r.get("content") or ""}
                  for r in rows
                  if (r.get("sender"), r.get("recipient")) in (("USER", "AGENT"), ("AGENT", "USER"))]
    return [{"role": "system", "content": scenario.user_simulator_system_prompt}, *flip_roles(agent_view)]


class LLMUser:
    """An LLM role-plays the user over a chat client (a plain ``fn(messages) -> str`` is wrapped).

    A reply that mentions ``end_conversation`` (the user simulator's tool in upstream)
    or ``###STOP###``, or is empty, ends the conversation; ``max_turns`` bounds the
    user's messages.  A failing model raises :class:`~trace_gym.core.users.UserError`.
    """

    def __init__(self, client: ChatClient | Callable[[list[dict[str, str]]], str], max_turns: int = 8):
        if not hasattr(client, "chat"):
            from trace_gym.llm.local import FunctionChatClient

            client = FunctionChatClient(client)
        self.client: ChatClient = client  # type: ignore[assignment]
        self.max_turns = max_turns
        self.scenario: Any = None
        self._turns = 0

    def reset(self, scenario: Any, seed: int | None = None) -> None:
        self.scenario = scenario
        self._turns = 0

    def respond(self, bus: Sequence[Mapping[str, Any]]) -> UserTurn:
        if self.scenario is None:
            raise UserError("LLMUser.respond() before reset()")
        if self._turns >= self.max_turns:
            return _END
        self._turns += 1
        text = ask_model(self.client, user_view(self.scenario, bus)).text.strip()
        if not text or any(m in text for m in END_MARKERS):
            return _END
        return UserTurn(text)
