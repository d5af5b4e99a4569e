"""A trace-gym episode as a chat between a text-only model and the env (for SkyRL-gym and verifiers).

The model sees chat messages with string contents only: the env's system prompt with its
tools listed and the calling convention (``<tool_call>`` JSON blocks, or SmolLM2's list
form), tool results as ``<tool_response>`` user turns, the user side's replies as user
turns — the rendering trace-gym's own policies use without native tool templates
(:func:`trace_gym.policies.prompting.template_messages`).  The model's reply is one env
action, parsed by the env's action grammar.
"""

from __future__ import annotations

from typing import Any

from ..core.env import TRUNCATED
from ..episode import Episode
from ..policies.prompting import template_messages

__all__ = ["ChatEpisode", "DEFAULT_TOOL_LISTING"]

DEFAULT_TOOL_LISTING = "json"


class ChatEpisode:
    """One env, one episode at a time, in chat messages.

    ``open(seed)`` resets and returns the opening messages; ``act(text)`` steps and returns
    ``(new messages, reward, done, info)``; ``close_scored()`` ends an open episode as a
    step-limit truncation (:meth:`trace_gym.episode.Episode.cut`, scored as the env scores a
    truncated episode) and returns its reward (its parts in ``info["reward_info"]``).  ``act``
    before ``open`` or on a finished episode raises ``RuntimeError``.  The episode is played
    through :class:`trace_gym.episode.Episode` (:attr:`episode`).
    """

    def __init__(self, env: Any, *, tool_format: str = "hermes", tool_listing: str = DEFAULT_TOOL_LISTING):
        self.env = env
        self.tool_format = tool_format
        self.tool_listing = tool_listing
        self.episode: Episode | None = None
        self.reward = 0.0
        self.info: dict[str, Any] = {}

    @property
    def done(self) -> bool:
        return self.episode is None or self.episode.done

    def _chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return template_messages(messages, tools, False, tool_listing=self.tool_listing, tool_format=self.tool_format)

    def open(self, seed: int | None, options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self.episode = Episode(self.env, "chat", seed, options)
        self.episode.start()
        self.reward, self.info = 0.0, self.episode.info
        return self._chat(list(self.info["messages"]), list(self.info.get("tools") or []))

    def act(self, text: str) -> tuple[list[dict[str, Any]], float, bool, dict[str, Any]]:
        if self.episode is None:
            raise RuntimeError("ChatEpisode.act before open()")
        before = len(self.env.unwrapped.messages)
        _, reward, _, _, info = self.episode.apply(text)
        self.info = info
        new = [m for m in info["messages"][before:] if m.get("role") != "assistant"]  # the agent knows what it sent
        self.reward = float(reward)
        return self._chat(new, []), self.reward, self.done, info

    def close_scored(self) -> float:
        if not self.done:
            self.episode.cut(TRUNCATED)
            self.reward = self.episode.final_reward
            self.info = {**self.info, "reward_info": self.episode.traj.reward_info}
        return self.reward
