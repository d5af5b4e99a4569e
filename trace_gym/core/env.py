"""``ToolEnv``: the Gymnasium base class for multi-turn, tool-using conversations.

Actions and observations are text (:class:`~trace_gym.core.spaces.TextSpace`).

* ``reset()`` returns the system prompt, the tool list and the opening messages,
  rendered as text; ``info["messages"]`` holds the same conversation as OpenAI chat
  dicts and ``info["tools"]`` the OpenAI function schemas — everything an LLM policy
  needs, and never a gold answer.
* ``step(action)`` parses the action (:func:`~trace_gym.core.toolcalls.parse_action`):
  tool calls are executed and their results observed; a plain message goes to the
  user side (:meth:`ToolEnv._respond`), whose reply is observed.  The observation is
  the text of what happened since the agent's last action.
* A malformed action is answered with an observation that explains the problem
  (``info["action_error"]``); it is recorded in the policy's view of the conversation
  (so an LLM can recover) but is not part of the scored transcript and changes no state.
* ``terminated`` when the conversation ends (the agent or user stops, a transfer, ...);
  ``truncated`` when the step limit is hit.  The reward is given once, at the end,
  with its components in ``info["reward_info"]``.

Subclasses implement :meth:`_start`, :meth:`_respond` and :meth:`_evaluate`, and
may override :meth:`_call_tool`.  Randomness comes only from ``self.np_random``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from .spaces import DEFAULT_MAX_LENGTH, TextSpace
from .toolcalls import parse_action
from .tools import ToolResult, ToolSet

__all__ = ["ToolEnv", "Episode", "render_messages"]

FEEDBACK_NAME = "env_feedback"


@dataclass(slots=True)
class Episode:
    """What :meth:`ToolEnv._start` returns: the opening of one episode."""

    system_prompt: str | None
    tools: ToolSet
    messages: list[dict[str, Any]] = field(default_factory=list)  # opening messages after the system prompt
    info: dict[str, Any] = field(default_factory=dict)  # extra reset info (task id, ...)


def _render_one(m: dict[str, Any]) -> str:
    role = m["role"]
    if role == "tool":
        return f"[tool {m.get('name') or m.get('tool_call_id')}]\n{m.get('content') or ''}"
    if role == "assistant" and m.get("tool_calls"):
        calls = "\n".join(
            f"{tc['function']['name']}({tc['function']['arguments']})" for tc in m["tool_calls"]
        )
        pre = f"{m['content']}\n" if m.get("content") else ""
        return f"[assistant]\n{pre}{calls}"
    label = "env" if m.get("name") == FEEDBACK_NAME else role
    return f"[{label}]\n{m.get('content') or ''}"


def render_messages(messages: list[dict[str, Any]]) -> str:
    """Plain-text rendering of chat messages (used for observations and ``ansi`` render)."""
    return "\n\n".join(_render_one(m) for m in messages)


class ToolEnv(gym.Env[str, str]):
    """Base class for text-in, text-out, tool-using conversation environments."""

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        *,
        max_steps: int = 100,
        render_mode: str | None = None,
        max_action_length: int = DEFAULT_MAX_LENGTH,
        max_observation_length: int = DEFAULT_MAX_LENGTH,
        tools_in_observation: bool = True,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.tools_in_observation = tools_in_observation
        self.action_space = TextSpace(max_action_length)
        self.observation_space = TextSpace(max_observation_length)
        self.tools = ToolSet()
        self.messages: list[dict[str, Any]] = []
        self._invalid: set[int] = set()
        self._steps = 0
        self._call_counter = 0
        self._done = True
        self._termination_reason: str | None = None
        self._last_obs = ""

    # ------------------------------------------------------------------ hooks
    def _start(self, options: dict[str, Any]) -> Episode:  # pragma: no cover - abstract
        raise NotImplementedError

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        """The user side's answer to an agent text message; call :meth:`end` to stop."""
        raise NotImplementedError

    def _evaluate(self) -> tuple[float, dict[str, Any]]:  # pragma: no cover - abstract
        """Final reward and its components, called once when the episode ends."""
        raise NotImplementedError

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return self.tools.call(name, arguments)

    def _after_step(self) -> None:
        """Hook run after every valid agent action (e.g. sync derived state)."""

    # ------------------------------------------------------------------ helpers for subclasses
    def end(self, reason: str) -> None:
        """Mark the conversation finished; the current step returns ``terminated=True``."""
        if self._termination_reason is None:
            self._termination_reason = reason

    def state_fingerprint(self) -> Any:
        """A value that changes whenever the environment's world state changes (e.g. a DB hash).

        The contract tests use it to prove that rejected actions change nothing.  The base
        class has no world state of its own and returns ``None``.
        """
        return None

    @property
    def termination_reason(self) -> str | None:
        return self._termination_reason

    @property
    def step_count(self) -> int:
        return self._steps

    def transcript(self) -> list[dict[str, Any]]:
        """The scored conversation: ``messages`` without rejected actions and their feedback."""
        if not self._invalid:
            return list(self.messages)
        return [m for i, m in enumerate(self.messages) if i not in self._invalid]

    def _info(self, **extra: Any) -> dict[str, Any]:
        info = {"messages": list(self.messages), "tools": self.tools.schemas(), "step": self._steps}
        info.update(extra)
        return info

    def _clip(self, text: str) -> str:
        limit = self.observation_space.max_length
        if len(text) <= limit:
            return text
        marker = "\n[... observation truncated ...]"
        return text[: max(0, limit - len(marker))] + marker[: limit]

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        episode = self._start(dict(options or {}))
        self.tools = episode.tools
        self.messages = []
        if episode.system_prompt is not None:
            self.messages.append({"role": "system", "content": episode.system_prompt})
        self.messages.extend(episode.messages)
        self._invalid = set()
        self._steps = 0
        self._call_counter = 0
        self._done = False
        self._termination_reason = None
        parts = [render_messages(self.messages[:1])] if episode.system_prompt is not None else []
        if self.tools_in_observation and len(self.tools):
            listing = self.tools.listing()
            parts.append(f"[tools]\n{listing}")
        start = 1 if episode.system_prompt is not None else 0
        if len(self.messages) > start:
            parts.append(render_messages(self.messages[start:]))
        self._last_obs = self._clip("\n\n".join(parts))
        info = self._info(**episode.info)
        if self.render_mode == "human":
            self.render()
        return self._last_obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError("step() called on a finished episode: call reset() first")
        self._steps += 1
        before = len(self.messages)
        extra: dict[str, Any] = {}
        parsed = parse_action(action)
        if parsed.error is None and isinstance(action, str) and len(action) > self.action_space.max_length:
            parsed.error = f"action too long: {len(action)} characters, the limit is {self.action_space.max_length}"
            parsed.calls = []
        if parsed.error is not None:
            self._invalid.update((before, before + 1))
            raw = action if isinstance(action, str) else repr(action)
            self.messages.append({"role": "assistant", "content": raw[: self.action_space.max_length]})
            feedback = f"Your last action was not executed: {parsed.error}."
            self.messages.append({"role": "user", "name": FEEDBACK_NAME, "content": feedback})
            extra["action_error"] = parsed.error
        elif parsed.calls:
            tool_calls = parsed.openai_tool_calls(start=self._call_counter)
            self._call_counter += len(tool_calls)
            self.messages.append({"role": "assistant", "content": parsed.content, "tool_calls": tool_calls})
            for tc, (name, arguments) in zip(tool_calls, parsed.calls, strict=True):
                res = self._call_tool(name, arguments)
                self.messages.append({"role": "tool", "tool_call_id": tc["id"], "name": name, "content": res.content})
                if res.error:
                    extra.setdefault("tool_errors", []).append(tc["id"])
            self._after_step()
        else:
            msg = {"role": "assistant", "content": parsed.content}
            self.messages.append(msg)
            self.messages.extend(self._respond(msg))
            self._after_step()
        terminated = self._termination_reason is not None
        truncated = not terminated and self._steps >= self.max_steps
        reward = 0.0
        if terminated or truncated:
            self._done = True
            if truncated:
                self._termination_reason = "max_steps"
            reward, breakdown = self._evaluate()
            extra["reward_info"] = breakdown
            extra["termination_reason"] = self._termination_reason
        # The agent knows what it sent: observe only what came back.
        new = self.messages[before + 1 :]
        self._last_obs = self._clip(render_messages(new))
        if self.render_mode == "human":
            self.render()
        return self._last_obs, float(reward), terminated, truncated, self._info(**extra)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return render_messages(self.messages)
        if self.render_mode == "human":
            from ..render import print_transcript

            print_transcript(self.messages)
        return None
