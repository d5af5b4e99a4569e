"""A tiny ToolEnv used to test the core: a counter with a read and a write tool."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from trace_gym.core import EpisodeOpening, Tool, ToolEnv, ToolSet


class CounterEnv(ToolEnv):
    """Reach ``target`` with ``add`` calls, then say ``bye``.  Reward 1 when the count equals the target."""

    def __init__(self, max_steps: int = 8, render_mode: str | None = None):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.count = 0
        self.target = 0

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.count = int(options.get("start", 0))
        self.target = int(self.np_random.integers(1, 10))
        tools = ToolSet(
            [
                Tool("get_count", "Read the counter.", {"type": "object", "properties": {}}, lambda: {"count": self.count}, "read"),
                Tool(
                    "add",
                    "Add an amount to the counter.",
                    {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
                    self._add,
                    "write",
                ),
            ]
        )
        return EpisodeOpening("You run a counter.", tools, [{"role": "user", "content": f"Please bring the counter to {self.target}."}])

    def _add(self, amount: int) -> dict[str, int]:
        self.count += amount
        return {"count": self.count}

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        if "bye" in (message.get("content") or "").lower():
            self.end("agent_stop")
            return []
        return [{"role": "user", "content": "ok"}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        ok = self.count == self.target and self.termination_reason == "agent_stop"
        return float(ok), {"count": self.count, "target": self.target}

    def state_fingerprint(self) -> Any:
        return self.count


if "trace-test/counter-v0" not in gym.registry:
    gym.register("trace-test/counter-v0", entry_point=CounterEnv)
