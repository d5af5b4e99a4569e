"""Small test-only environments for the trainer, registered under ``trace-test/train-*``.

* ``trace-test/train-single-v0`` — one agent turn: the user asks for a short
  answer; the reward grows with the answer's length up to 200 characters, so even a
  random model gets rewards that differ within a group.
* ``trace-test/train-multi-v0`` — a tool (``lookup``), a scripted user who answers
  twice before ending the conversation, and an optional hint in the system prompt
  (``options={"hint": True}``), reported as ``hint_shown`` with the hint-free
  opening in ``prompt_messages_without_hint``, like the capability envs.
* ``trace-test/train-constant-v0`` — every episode scores 0.5 (constant groups).
* ``trace-test/train-spread-v0`` — one agent turn scored by a digest of its text (groups that differ
  even when every answer is cut at the same length).
* ``trace-test/train-turns-v0`` — the user wants 1 to 3 replies (drawn from the seed: seed 11 wants 1,
  seed 0 wants 3) and says "Go on." until then; the reward grows with the replies' length, except that
  an episode of 3 replies always scores 0.5 (its groups are constant, so they are drawn again).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from trace_gym.core import Tool, ToolEnv, ToolSet
from trace_gym.core.env import EpisodeOpening

HINT = "HINT: look the code up with the lookup tool first."
WORDS = ["apple", "river", "stone", "cloud", "ember", "maple", "orbit", "tulip"]


class SingleTurnEnv(ToolEnv):
    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=1, **kwargs)
        self.word = ""

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.word = WORDS[int(self.np_random.integers(len(WORDS)))]
        return EpisodeOpening("You are a helpful assistant.", ToolSet(), [{"role": "user", "content": f"Say the word {self.word}."}])

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("answered")
        return []

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        replies = [m for m in self.transcript() if m["role"] == "assistant"]
        text = (replies[-1].get("content") or "") if replies else ""
        length = min(len(text), 200) / 200
        hit = 1.0 if self.word in text.lower() else 0.0
        return round(0.5 * length + 0.5 * hit, 4), {"length": length, "word": hit}


class MultiTurnEnv(ToolEnv):
    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=4, **kwargs)
        self.code = ""
        self.user_turns = 0
        self.looked_up = False

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.code = f"C{int(self.np_random.integers(100, 999))}"
        self.user_turns = 0
        self.looked_up = False
        hint = bool(options.get("hint", False))
        base = "You are a support agent."
        system = f"{base}\n{HINT}" if hint else base
        opening = [{"role": "user", "content": "What is my code?"}]
        tools = ToolSet([Tool("lookup", "Look up the user's code.", {"type": "object", "properties": {}}, self._lookup, kind="read")])
        info = {"hint_shown": hint, "prompt_messages_without_hint": [{"role": "system", "content": base}, *opening]}
        return EpisodeOpening(system, tools, opening, info)

    def _lookup(self) -> str:
        self.looked_up = True
        return self.code

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.user_turns += 1
        if self.user_turns >= 2:
            self.end("user_done")
            return [{"role": "user", "content": "Bye."}]
        return [{"role": "user", "content": "Anything else?"}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        said = " ".join((m.get("content") or "") for m in self.transcript() if m["role"] == "assistant")
        told = 1.0 if self.code in said else 0.0
        length = min(len(said), 400) / 400
        return round(0.4 * told + 0.3 * float(self.looked_up) + 0.3 * length, 4), {"told": told, "looked_up": self.looked_up}


class ConstantEnv(SingleTurnEnv):
    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        return 0.5, {}


class SpreadEnv(SingleTurnEnv):
    """Rewards that differ within a group even when every answer is long: a digest of the answer's text."""

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        replies = [m for m in self.transcript() if m["role"] == "assistant"]
        text = (replies[-1].get("content") or "") if replies else ""
        return sum(text.encode()) % 5 / 4, {}


class TurnsEnv(ToolEnv):
    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=8, **kwargs)
        self.turns = self.replies = 0

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.turns, self.replies = int(self.np_random.integers(1, 4)), 0
        return EpisodeOpening("You are a helpful assistant.", ToolSet(), [{"role": "user", "content": f"Reply {self.turns} times."}])

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.replies += 1
        if self.replies >= self.turns:
            self.end("answered")
            return []
        return [{"role": "user", "content": "Go on."}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        if self.turns == 3:
            return 0.5, {}
        said = " ".join((m.get("content") or "") for m in self.transcript() if m["role"] == "assistant")
        return round(min(len(said), 200) / 200, 4), {}


IDS = {
    "trace-test/train-single-v0": "tests.train.envs:SingleTurnEnv",
    "trace-test/train-multi-v0": "tests.train.envs:MultiTurnEnv",
    "trace-test/train-constant-v0": "tests.train.envs:ConstantEnv",
    "trace-test/train-spread-v0": "tests.train.envs:SpreadEnv",
    "trace-test/train-turns-v0": "tests.train.envs:TurnsEnv",
}
for _id, _entry in IDS.items():
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_entry)
