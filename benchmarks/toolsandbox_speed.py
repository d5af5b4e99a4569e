"""Speed of ``trace/toolsandbox-v0``: reset and step latency per category, scoring time per episode.

Each episode replays a public oracle trajectory (when the scenario has one) through the Gym
env, so tool calls, user turns and the final upstream-faithful scoring are all exercised;
the scorer alone is also timed on each recorded episode of the first corpus file. The oracle
trajectories come from the conformance corpora, which the package does not ship: the script
finds them as the tests do (``tests/corpora.py``) and stops, saying so, without them. A
second table times the first call of the tools with heavy dependencies (holidays, units,
distances, phone numbers) in a fresh process, each in its own interpreter. Every figure is a
median of process CPU time (a busy shared machine disturbs it far less than wall time); the
cold-start figures are wall time of one fresh interpreter each.

Targets (the script prints whether each is met): a step ≤ 1 ms and a reset ≤ 5 ms
(medians, every category), and the first call of every heavy tool in a fresh process
≤ 100 ms (what its own work needs, no avoidable import).  Usage::

    python benchmarks/toolsandbox_speed.py [--episodes 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core import format_tool_call
from trace_gym.toolsandbox.users import ReplayUser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its tests find the conformance corpora
from tests.corpora import corpus_files, missing  # noqa: E402

try:
    from speed_targets import Target, report_targets
except ImportError:  # imported as benchmarks.toolsandbox_speed
    from benchmarks.speed_targets import Target, report_targets

STEP_MS, RESET_MS, FIRST_CALL_MS = 1.0, 5.0, 100.0

CATEGORIES = ("SINGLE_TOOL_CALL", "MULTIPLE_TOOL_CALL", "MULTIPLE_USER_TURN", "STATE_DEPENDENCY",
              "CANONICALIZATION", "INSUFFICIENT_INFORMATION")


def _oracles() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    files = corpus_files("toolsandbox")
    if not files:  # the oracle trajectories are recorded in the corpora, which the package does not ship
        raise SystemExit(missing("toolsandbox"))
    for path in files:
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
            t = time.process_time()
            env.reset(seed=0, options={"scenario": name})
            resets.append(time.process_time() - t)
            for s in (s for s in oracles[name] if s["role"] == "agent"):
                t = time.process_time()
                _, r, term, trunc, _ = env.step(_action(s))
                steps.append(time.process_time() - t)
                if term or trunc:
                    rewards.append(r)
                    break
            t = time.process_time()
            evaluate(env.scenario, env.sandbox.messages, env.sandbox.db_snapshots())
            evals.append(time.process_time() - t)
        if not names:
            continue
        results[cat] = {
            "episodes": len(names),
            "reset_ms": 1e3 * statistics.median(resets),
            "step_ms": 1e3 * statistics.median(steps),
            "eval_ms_per_episode": 1e3 * statistics.median(evals),
            "mean_reward": statistics.mean(rewards) if rewards else 0.0,
        }
    return results


COLD_CALLS = {
    "search_holiday": ("search_holiday", {"holiday_name": "Thanksgiving dinner"}),
    "unit_conversion": ("unit_conversion", {"amount": 3.0, "from_unit": "mile", "to_unit": "km"}),
    "calculate_lat_lon_distance": ("calculate_lat_lon_distance", {"latitude_0": 37.3, "longitude_0": -122.0,
                                                                  "latitude_1": 37.8, "longitude_1": -122.4}),
    "search_contacts": ("search_contacts", {"phone_number": "+11233344455"}),
}
_COLD = """
import json, sys, time
t0 = time.perf_counter()
from trace_gym.toolsandbox.toolbox import ToolBox
from trace_gym.toolsandbox.world import World
box = ToolBox(World.from_tables({}), [sys.argv[1]])
t1 = time.perf_counter()
out = box.call(sys.argv[1], json.loads(sys.argv[2]))
t2 = time.perf_counter()
assert out.error is None, out.error
print(json.dumps({"setup_ms": 1e3 * (t1 - t0), "first_call_ms": 1e3 * (t2 - t1)}))
"""


def cold_start() -> dict[str, dict[str, float]]:
    """Milliseconds to set up a tool box and to make the first call, each tool in a fresh interpreter."""
    res = {}
    for label, (tool, args) in COLD_CALLS.items():
        out = subprocess.run([sys.executable, "-c", _COLD, tool, json.dumps(args)], capture_output=True, text=True,
                             check=True)
        res[label] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def conformance_scoring() -> dict[str, float]:
    """Median CPU milliseconds to score one recorded conformance episode of the first corpus file."""
    from trace_gym.toolsandbox.conformance import score_record
    from trace_gym.toolsandbox.scenarios import load_scenarios

    files = corpus_files("toolsandbox")
    scenarios = load_scenarios()
    records = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]
    score_record(records[0], scenarios)  # warm-up: imports rouge-score / nltk
    times = []
    for record in records:
        t = time.process_time()
        score_record(record, scenarios)
        times.append(time.process_time() - t)
    return {"file": files[0].name, "records": len(records), "score_ms": 1e3 * statistics.median(times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20, help="oracle episodes per category")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    cold = cold_start()
    print(f"{'first call in a fresh process':32} {'setup ms':>9} {'call ms':>8}")
    for label, r in cold.items():
        print(f"{label:32} {r['setup_ms']:>9.1f} {r['first_call_ms']:>8.1f}")
    run(2)  # warm-up: lazy imports (phonenumbers, pint, rouge) and caches
    res = run(args.episodes)
    print(f"{'category (medians, CPU time)':26} {'eps':>4} {'reset ms':>9} {'step ms':>8} {'eval ms':>8} {'reward':>7}")
    for cat, r in res.items():
        print(f"{cat:26} {r['episodes']:>4} {r['reset_ms']:>9.2f} {r['step_ms']:>8.2f} "
              f"{r['eval_ms_per_episode']:>8.2f} {r['mean_reward']:>7.3f}")
    step_t, reset_t = Target("step", STEP_MS, False, "ms"), Target("reset", RESET_MS, False, "ms")
    first_t = Target("first call", FIRST_CALL_MS, False, "ms")
    checks = [(f"{cat} step", step_t, r["step_ms"]) for cat, r in res.items()]
    checks += [(f"{cat} reset", reset_t, r["reset_ms"]) for cat, r in res.items()]
    checks += [(f"fresh process: first {label}", first_t, r["first_call_ms"]) for label, r in cold.items()]
    scoring = conformance_scoring()
    print(f"\nscoring a recorded conformance episode ({scoring['file']}, {scoring['records']} records): "
          f"{scoring['score_ms']:.2f} ms (median, CPU time)")
    report_targets(checks)
    if args.json:
        args.json.write_text(json.dumps({"episodes": res, "cold_start": cold, "conformance_scoring": scoring, "targets": {
            "step_ms": STEP_MS, "reset_ms": RESET_MS, "first_call_ms": FIRST_CALL_MS}}, indent=2))


if __name__ == "__main__":
    main()
