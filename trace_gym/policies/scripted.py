"""A policy that replays a fixed list of actions, or asks a Python callable."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .base import PolicyError

__all__ = ["ScriptedPolicy", "ScriptExhausted", "load_actions", "parse_actions"]

ActionFn = Callable[[list[dict[str, Any]], list[dict[str, Any]]], "str | None"]


class ScriptExhausted(PolicyError):
    """The script has no action left but the episode is still running."""


def parse_actions(text: str) -> list[str]:
    """Actions from a script text: a JSON list of strings, or else one action per non-blank line.

    A JSON list lets one action span several lines (a ``<tool_call>`` block); the
    line format is handy for short calls such as ``read_note(key="x")``.
    """
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return [line for line in text.splitlines() if line.strip()]


def load_actions(path: str | Path) -> list[str]:
    """Read a script file (see :func:`parse_actions`); ``"-"`` reads standard input."""
    if str(path) == "-":
        import sys

        return parse_actions(sys.stdin.read())
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"action script not found: {p}")
    return parse_actions(p.read_text(encoding="utf-8"))


class ScriptedPolicy:
    """Replays ``actions`` in order, starting over at every episode.

    ``actions`` is a sequence of strings, or a callable ``fn(messages, tools)``
    returning the next action (``None`` when it has nothing more to say).  When the
    script runs out, :meth:`act` raises :class:`ScriptExhausted` and sets
    :attr:`exhausted` so callers can tell a short script from a finished episode.
    """

    def __init__(self, actions: Sequence[str] | ActionFn, policy_id: str = "scripted"):
        if callable(actions):
            self._fn: ActionFn | None = actions
            self._actions: list[str] = []
        else:
            bad = [i for i, a in enumerate(actions) if not isinstance(a, str)]
            if bad:
                raise TypeError(f"scripted actions must be strings; item {bad[0]} is {type(actions[bad[0]]).__name__}")
            self._fn = None
            self._actions = list(actions)
        self.policy_id = policy_id
        # A list script is one episode's sequence: episodes played in lock step would share it.
        self.batchable = self._fn is not None
        self.position = 0
        self.exhausted = False

    @classmethod
    def from_file(cls, path: str | Path, policy_id: str | None = None) -> ScriptedPolicy:
        return cls(load_actions(path), policy_id=policy_id or f"scripted:{Path(str(path)).name}")

    def reset(self, seed: int | None = None) -> None:
        """Start the script from its first action (called at every episode start)."""
        self.position = 0
        self.exhausted = False

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if self._fn is not None:
            action = self._fn(messages, tools)
            if action is None:
                self.exhausted = True
                raise ScriptExhausted(f"{self.policy_id}: the action function returned None after {self.position} actions")
            if not isinstance(action, str):
                raise PolicyError(f"{self.policy_id}: the action function returned {type(action).__name__}, not str")
        else:
            if self.position >= len(self._actions):
                self.exhausted = True
                raise ScriptExhausted(
                    f"{self.policy_id}: the script ran out after {len(self._actions)} actions "
                    "but the episode has not ended"
                )
            action = self._actions[self.position]
        self.position += 1
        return action
