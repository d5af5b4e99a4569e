"""Speed of ``trace/toolsandbox-v0``: reset and step latency per category, scoring time per episode.

Each episode replays a public oracle trajectory (when the scenario has one) through
the Gym env, so tool calls, user turns and the final upstream-faithful scoring are
all exercised.  Usage::

    python benchmarks/toolsandbox_speed.py [--episodes 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import gymnasium as gym

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core import format_tool_call
from trace_gym.datadirs import toolsandbox_data_dir
from trace_gym.toolsandbox.users import ReplayUser

CATEGORIES = ("SINGLE_TOOL_CALL", "MULTIPLE_TOOL_CALL", "MULTIPLE_USER_TURN", "STATE_DEPENDENCY",
              "CANONICALIZATION", "INSUFFICIENT_INFORMATION")


def _oracles() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in sorted((toolsandbox_data_dir() / "conformance").glob("*.jsonl")):
        for line in open(path):
            r = json.loads(line)
            if r["kind"] == "oracle":
                out[r["scenario"]] = r["steps"]
    return out


def _action(step: dict) -> str:
    if step["type"] == "tool_calls":
        return "\n".join(format_tool_call(c["name"], c["arguments"]) for c in step["calls"])
    return step["content"]


def run(episodes: int) -> dict[str, dict[str, float]]:
    env = gym.make("trace/toolsandbox-v0").unwrapped
    oracles = _oracles()
    from trace_gym.toolsandbox.evaluation import evaluate

    results = {}
    for cat in CATEGORIES:
        names = [n for n in oracles if cat in env._all[n].categories][:episodes]
        resets, steps, evals, rewards = [], [], [], []
        for name in names:
            env.user = ReplayUser(oracles[name])
            t = time.perf_counter()
            env.reset(seed=0, options={"scenario": name})
            resets.append(time.perf_counter() - t)
            for s in (s for s in oracles[name] if s["role"] == "agent"):
                t = time.perf_counter()
                _, r, term, trunc, _ = env.step(_action(s))
                steps.append(time.perf_counter() - t)
                if term or trunc:
                    rewards.append(r)
                    break
            t = time.perf_counter()
            evaluate(env.scenario, env.sandbox.messages, env.sandbox.db_snapshots())
            evals.append(time.perf_counter() - t)
        if not names:
            continue
        results[cat] = {
            "episodes": len(names),
            "reset_ms": 1e3 * statistics.mean(resets),
            "step_ms": 1e3 * statistics.mean(steps),
            "eval_ms_per_episode": 1e3 * statistics.mean(evals),
            "mean_reward": statistics.mean(rewards) if rewards else 0.0,
        }
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20, help="oracle episodes per category")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    run(2)  # warm-up: lazy imports (phonenumbers, pint, holidays, rouge) and caches
    res = run(args.episodes)
    print(f"{'category':26} {'eps':>4} {'reset ms':>9} {'step ms':>8} {'eval ms':>8} {'reward':>7}")
    for cat, r in res.items():
        print(f"{cat:26} {r['episodes']:>4} {r['reset_ms']:>9.2f} {r['step_ms']:>8.2f} "
              f"{r['eval_ms_per_episode']:>8.2f} {r['mean_reward']:>7.3f}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
