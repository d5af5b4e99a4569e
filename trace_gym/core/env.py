"""``ToolEnv``: the Gymnasium base class for multi-turn, tool-using conversations.

Actions and observations are text (:class:`~trace_gym.core.spaces.TextSpace`).

* ``reset()`` returns the system prompt, the tool list and the opening messages,
  rendered as text; ``info["messages"]`` holds the same conversation as OpenAI chat
  dicts and ``info["tools"]`` the OpenAI function schemas — everything an LLM policy
  needs, and never a gold answer.
* ``step(action)`` parses the action (:func:`~trace_gym.core.toolcalls.parse_action`):
  tool calls are executed and their results observed; a plain message goes to the
  user side (:meth:`ToolEnv._respond`), whose reply is observed.  The observation is
  the text of what happened since the agent's last action.  This is the only step
  loop: environment families change what an action does through the hooks below,
  never by replacing ``step``; an override of ``reset`` only wraps ``super().reset()``
  (a capability env keeps the seed it was given, and restores it when a reset is refused).
* A malformed action is answered with an observation that explains the problem
  (``info["action_error"]``); it is recorded in the policy's view of the conversation
  (so an LLM can recover) but is not part of the scored transcript and changes no state.
* ``terminated`` when the conversation ends (the agent or user stops, a transfer, ...);
  ``truncated`` when the step limit is hit (or the environment ends the episode with
  the reason ``"max_steps"``); :meth:`ToolEnv.truncate` does the same between steps
  for a caller with a limit of its own (a trainer's token budget).  The reward is given once, at the end, with its
  components in ``info["reward_info"]``.

Subclasses implement :meth:`_start`, :meth:`_respond` and :meth:`_evaluate`, and may
override the other hooks:

* :meth:`_call_tool` — run one tool call (default: the episode's :class:`ToolSet`);
* :meth:`_act_calls` / :meth:`_act_message` — carry out a valid action's calls or
  message as a whole (defaults: each call through :meth:`_call_tool`; the message to
  :meth:`_respond`), using :meth:`_record_calls` / :meth:`_record_result` to keep
  ``messages`` in the standard shape;
* :meth:`_reject` — record a malformed action (extend it, e.g. to count the attempt);
* :meth:`_after_step` — run after every valid action;
* :meth:`_info_fields` / :meth:`_final_info` — extra ``info`` entries on every call /
  on the step that ends the episode.

Call :meth:`end` to finish the conversation; it may be called in :meth:`_start` too
(the opening itself ended the episode), and then the first ``step`` executes nothing
and only reports the end.  Randomness comes only from ``self.np_random``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym

from .pickling import PicklableByValue
from .spaces import DEFAULT_MAX_LENGTH, TextSpace
from .toolcalls import ParsedAction, parse_action
from .tools import ToolResult, ToolSet

__all__ = ["ToolEnv", "EpisodeOpening", "render_messages", "declared_reset_options", "LIMIT_REASONS", "TRUNCATED"]

FEEDBACK_NAME = "env_feedback"
TRUNCATED = "max_steps"  # the termination reason that means truncation
# Termination reasons that mean a limit stopped the conversation, not its participants
# (an env's own message cap, the policy's context length): an episode that ends for one of
# these did not end with the agent's answer.
LIMIT_REASONS = frozenset({TRUNCATED, "max_messages", "context_length"})


@dataclass(slots=True)
class EpisodeOpening:
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
    if len(messages) == 1:  # a step's usual observation
        return _render_one(messages[0])
    return "\n\n".join([_render_one(m) for m in messages])


def declared_reset_options(env: Any) -> frozenset[str] | None:
    """The reset option keys ``env`` (an instance, wrapped or not, or an env class) reads, when it
    declares them (``reset_option_keys``); ``None`` when it does not."""
    base = env if isinstance(env, type) else getattr(env, "unwrapped", env)
    declared = getattr(base, "reset_option_keys", None)
    return frozenset(declared) if declared is not None else None


class ToolEnv(PicklableByValue, gym.Env[str, str]):
    """Base class for text-in, text-out, tool-using conversation environments.

    Args:
        max_steps: the step limit: the step that reaches it ends the episode as truncated.
        render_mode: ``"ansi"`` (``render()`` returns the conversation as text), ``"human"`` (printed after
            every reset and step) or None.
        max_action_length: the longest action, in characters (the action space's ``max_length``); a longer one
            is rejected as an action error.
        max_observation_length: the longest observation, in characters; a longer one is cut with a marker.
        tools_in_observation: list the tools in the reset observation (they are in ``info["tools"]`` either way).
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    # The reset option keys the env reads, when it declares them (front ends refuse other keys); None: undeclared.
    reset_option_keys: frozenset[str] | None = None
    # What the env reference (``trace_gym.env_reference``, docs/env-reference.md) says of an env; each family
    # declares its own.  Every ``info["termination_reason"]`` the env can report, and what it means:
    termination_reasons: ClassVar[Mapping[str, str]] = {
        TRUNCATED: "the step limit was reached, or the caller ended the episode with `truncate()`"}
    # The entries of ``info["reward_info"]`` on the step that ends an episode, and what each holds:
    reward_info_keys: ClassVar[Mapping[str, str]] = {}

    def reference_tables(self) -> dict[str, list[tuple[str, str]]]:
        """What the env reference shows of this env beyond its arguments, spaces, reward entries and ends:
        ``{title: [(name, meaning), ...]}`` (a capability env: its cases' reward checks and its knobs)."""
        return {}

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
    def _start(self, options: dict[str, Any]) -> EpisodeOpening:  # pragma: no cover - abstract
        raise NotImplementedError

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        """The user side's answer to an agent text message; call :meth:`end` to stop."""
        raise NotImplementedError

    def _evaluate(self) -> tuple[float, dict[str, Any]]:  # pragma: no cover - abstract
        """Final reward and its components, called once when the episode ends."""
        raise NotImplementedError

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return self.tools.call(name, arguments)

    def _act_calls(self, parsed: ParsedAction, extra: dict[str, Any]) -> None:
        """Carry out a valid action that calls tools (``parsed.calls`` is not empty).

        The default records the calls, runs each through :meth:`_call_tool` in order and
        records its result.  Entries added to ``extra`` appear in this step's ``info``.
        """
        tool_calls = self._record_calls(parsed)
        for tc, (name, arguments) in zip(tool_calls, parsed.calls, strict=True):
            self._record_result(tc, self._call_tool(name, arguments), extra)

    def _act_message(self, parsed: ParsedAction, extra: dict[str, Any]) -> None:
        """Carry out a valid action that is a message to the user (``parsed.content``).

        The default records it and appends the user side's answer (:meth:`_respond`).
        """
        msg = {"role": "assistant", "content": parsed.content}
        self.messages.append(msg)
        self.messages.extend(self._respond(msg))

    def _reject(self, action: Any, error: str, extra: dict[str, Any]) -> None:
        """Record a malformed action and the feedback that explains it (kept out of the
        scored transcript; no state changes).  Overrides call ``super()`` first."""
        before = len(self.messages)
        self._invalid.update((before, before + 1))
        raw = action if isinstance(action, str) else repr(action)
        self.messages.append({"role": "assistant", "content": raw[: self.action_space.max_length]})
        feedback = f"Your last action was not executed: {error}."
        self.messages.append({"role": "user", "name": FEEDBACK_NAME, "content": feedback})
        extra["action_error"] = error

    def _after_step(self) -> None:
        """Hook run after every valid agent action (e.g. sync derived state)."""

    def _info_fields(self) -> dict[str, Any]:
        """Extra entries for every ``info`` (after ``messages``, ``tools`` and ``step``), e.g. counters."""
        return {}

    def _final_info(self) -> dict[str, Any]:
        """Extra entries for the ``info`` of the step that ends the episode (after ``reward_info``
        and ``termination_reason``)."""
        return {}

    def truncate(self) -> tuple[float, dict[str, Any]]:
        """End the episode now, between steps, as if its step limit had been reached, and score it.

        For callers that stop an episode for a reason of their own (a trainer's token budget):
        the episode is scored exactly as a step-limit truncation would be, so partial credit
        the env gives a truncated episode is kept.  Returns ``(reward, reward_info)``.  An
        episode the opening already ended keeps its own reason.  Raises ``RuntimeError`` on a
        finished episode (like :meth:`step`).
        """
        if self._done:
            raise RuntimeError("truncate() called on a finished episode: call reset() first")
        self.end(TRUNCATED)
        return self._close()

    def _close(self) -> tuple[float, dict[str, Any]]:
        """Finish the episode and evaluate it (the one place an episode's reward is computed)."""
        self._done = True
        reward, breakdown = self._evaluate()
        return float(reward), breakdown

    # ------------------------------------------------------------------ helpers for subclasses
    def end(self, reason: str, *, replace: bool = False) -> None:
        """Mark the conversation finished; the current step returns ``terminated=True``
        (``truncated=True`` for the reason ``"max_steps"``).  The first reason given in a step
        stands unless ``replace`` is true (e.g. a limit that overrides a stop)."""
        if replace or self._termination_reason is None:
            self._termination_reason = reason

    def _record_calls(self, parsed: ParsedAction) -> list[dict[str, Any]]:
        """Append the assistant message carrying ``parsed``'s calls; returns them as OpenAI
        ``tool_calls`` (ids ``call_<n>``, numbered across the episode)."""
        tool_calls = parsed.openai_tool_calls(start=self._call_counter)
        self._call_counter += len(tool_calls)
        self.messages.append({"role": "assistant", "content": parsed.content, "tool_calls": tool_calls})
        return tool_calls

    def _record_result(self, tool_call: dict[str, Any], result: ToolResult, extra: dict[str, Any]) -> None:
        """Append the tool message answering ``tool_call``; an error result is listed in
        ``info["tool_errors"]``."""
        self.messages.append({"role": "tool", "tool_call_id": tool_call["id"], "name": tool_call["function"]["name"],
                              "content": result.content})
        if result.error:
            extra.setdefault("tool_errors", []).append(tool_call["id"])

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

    def _info(self, extra: dict[str, Any]) -> dict[str, Any]:
        info = {"messages": list(self.messages), "tools": self.tools.schemas(), "step": self._steps}
        fields = self._info_fields()
        if fields:
            info.update(fields)
        if extra:
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
        """Start an episode.  A reset that raises (options the env refuses) leaves the generator and the
        episode in play as they were, so far as the family's ``_start`` checks its options before it
        changes anything."""
        before = (self._np_random, self._np_random_seed, self._termination_reason)
        super().reset(seed=seed)
        self._termination_reason = None  # _start may end the episode already
        try:
            episode = self._start(dict(options or {}))
        except BaseException:
            self._np_random, self._np_random_seed, self._termination_reason = before
            raise
        self.tools = episode.tools
        self.messages = []
        if episode.system_prompt is not None:
            self.messages.append({"role": "system", "content": episode.system_prompt})
        self.messages.extend(episode.messages)
        self._invalid = set()
        self._steps = 0
        self._call_counter = 0
        self._done = False
        parts = [render_messages(self.messages[:1])] if episode.system_prompt is not None else []
        if self.tools_in_observation and len(self.tools):
            listing = self.tools.listing()
            parts.append(f"[tools]\n{listing}")
        start = 1 if episode.system_prompt is not None else 0
        if len(self.messages) > start:
            parts.append(render_messages(self.messages[start:]))
        self._last_obs = self._clip("\n\n".join(parts))
        info = self._info(episode.info)
        if self.render_mode == "human":
            self.render()
        return self._last_obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError("step() called on a finished episode: call reset() first")
        self._steps += 1
        before = len(self.messages)
        extra: dict[str, Any] = {}
        if self._termination_reason is None:  # else the opening ended the episode: only report it
            parsed = parse_action(action)
            if parsed.error is None and isinstance(action, str) and len(action) > self.action_space.max_length:
                parsed.error = f"action too long: {len(action)} characters, the limit is {self.action_space.max_length}"
                parsed.calls = []
            if parsed.error is not None:
                self._reject(action, parsed.error, extra)
            else:
                if parsed.calls:
                    self._act_calls(parsed, extra)
                else:
                    self._act_message(parsed, extra)
                self._after_step()
        if self._termination_reason is None and self._steps >= self.max_steps:
            self._termination_reason = TRUNCATED
        truncated = self._termination_reason == TRUNCATED
        terminated = self._termination_reason is not None and not truncated
        reward = 0.0
        if terminated or truncated:
            reward, breakdown = self._close()
            extra["reward_info"] = breakdown
            extra["termination_reason"] = self._termination_reason
            extra.update(self._final_info())
        # The agent knows what it sent: observe only what came back.
        obs = render_messages(self.messages[before + 1 :])
        if len(obs) > self.observation_space.max_length:
            obs = self._clip(obs)
        self._last_obs = obs
        if self.render_mode == "human":
            self.render()
        return obs, float(reward), terminated, truncated, self._info(extra)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return render_messages(self.messages)
        if self.render_mode == "human":
            from ..render import print_transcript

            print_transcript(self.messages)
        return None
