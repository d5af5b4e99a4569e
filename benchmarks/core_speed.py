"""How fast is the torch-free core?

* ``parse_action`` on a mix of action styles (plain text, ``<tool_call>`` blocks,
  bare JSON, Python call syntax, fenced JSON, reasoning + call, malformed);
* ``ToolEnv.step`` overhead on a tiny in-memory env (a counter tool and an echoing
  user), for tool-call actions and for messages to the user.

Every figure is the median over batches of the batch's rate, each batch timed with process
CPU time (a busy shared machine disturbs it far less than wall time).  Target: a tool-call
step ≥ 30,000 steps/s (the core's share of an environment's step must leave room for the
environment's own work); the script prints whether it is met.

Usage: ``python benchmarks/core_speed.py [--seconds S] [--json]``.  Prints parses/s
and steps/s.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from typing import Any

from trace_gym.core import EpisodeOpening, Tool, ToolEnv, ToolSet, parse_action

try:
    from speed_targets import STEPS_PER_S, Target, median, report_targets
except ImportError:  # imported as benchmarks.core_speed
    from benchmarks.speed_targets import STEPS_PER_S, Target, median, report_targets

ACTIONS = [
    "Sure, I can help with that. Could you give me your order number?",
    '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}\n</tool_call>',
    '{"name": "find_user_id_by_email", "arguments": {"email": "yusuf.rossi@example.com"}}',
    'get_user_details(user_id="yusuf_rossi_9620")',
    '```json\n{"name": "calculate", "arguments": {"expression": "(1 + 2) * 3"}}\n```',
    '<think>The user wants a refund; check the order first.</think>\n<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1"}}\n</tool_call>',
    'search_messages(query="dinner", limit=5)\nsend_message(recipient="+12453344098", content="On my way")',
    '{"name": "get_order_details", "arguments": {"order_id": ',  # malformed
]


class CounterEnv(ToolEnv):
    """A minimal env: one write tool, a user that echoes, never ends before max_steps."""

    def __init__(self, max_steps: int = 1_000_000):
        super().__init__(max_steps=max_steps)
        self.count = 0

    def _add(self, amount: int) -> dict[str, int]:
        self.count += amount
        return {"count": self.count}

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.count = 0
        tools = ToolSet(
            [
                Tool(
                    "add",
                    "Add to the counter.",
                    {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
                    self._add,
                    kind="write",
                )
            ]
        )
        return EpisodeOpening("Count things.", tools, [{"role": "user", "content": "start"}])

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"you said {len(message.get('content') or '')} characters"}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        return float(self.count), {"count": self.count}


def _rate(fn: Callable[[], int], seconds: float) -> float:
    """Median operations per CPU second of ``fn`` (which returns how many operations it did)
    over the batches run in ``seconds`` of CPU time (at least five)."""
    fn()  # warm up
    rates: list[float] = []
    spent = 0.0
    while spent < seconds or len(rates) < 5:
        c = time.process_time()
        done = fn()
        dt = time.process_time() - c
        spent += dt
        if dt > 0:
            rates.append(done / dt)
    return median(rates)


def bench_parse(seconds: float) -> float:
    def batch() -> int:
        for a in ACTIONS:
            parse_action(a)
        return len(ACTIONS)

    return _rate(batch, seconds)


def bench_steps(seconds: float, action: str, episode_len: int = 50) -> float:
    env = CounterEnv(max_steps=episode_len)

    spent_steps = [0.0]

    def episode() -> int:
        env.reset(seed=0)
        c = time.process_time()
        for _ in range(episode_len):
            env.step(action)
        spent_steps[0] = time.process_time() - c  # the batch's rate counts its steps, not its reset
        return episode_len

    rates: list[float] = []
    spent = 0.0
    episode()  # warm up
    while spent < seconds or len(rates) < 5:
        episode()
        dt = spent_steps[0]
        spent += dt
        if dt > 0:
            rates.append(episode_len / dt)
    return median(rates)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="time per measurement (default 1)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    results = {
        "parse_action_per_s": bench_parse(args.seconds),
        "step_tool_call_per_s": bench_steps(args.seconds, '<tool_call>\n{"name": "add", "arguments": {"amount": 2}}\n</tool_call>'),
        "step_python_call_per_s": bench_steps(args.seconds, "add(amount=2)"),
        "step_message_per_s": bench_steps(args.seconds, "Counting along, all good."),
        "step_malformed_per_s": bench_steps(args.seconds, '{"name": "add", "arguments": '),
        "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"parse_action        {results['parse_action_per_s']:>12,.0f} parses/s  (mix of {len(ACTIONS)} styles)")
    print(f"step (tool call)    {results['step_tool_call_per_s']:>12,.0f} steps/s")
    print(f"step (python call)  {results['step_python_call_per_s']:>12,.0f} steps/s")
    print(f"step (message)      {results['step_message_per_s']:>12,.0f} steps/s")
    print(f"step (malformed)    {results['step_malformed_per_s']:>12,.0f} steps/s")
    target = Target("tool-call step", STEPS_PER_S, True, "steps/s")
    report_targets([("core ToolEnv: step (tool call)", target, results["step_tool_call_per_s"])])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
