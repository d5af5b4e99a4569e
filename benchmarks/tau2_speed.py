"""Speed of the τ²-bench gym environments, per domain.

Measures, with the offline user and no judge, every figure as a median of process CPU
time (``time.process_time``; a busy shared machine disturbs it far less than wall time):

* **tool-call steps/s** — one over the median time of an ``env.step`` that calls a tool,
  over a script of read calls, write calls (state-changing, some failing) and a
  calculation; the script is replayed ``--repeat`` times from the same reset and each
  step's fastest run is kept;
* **mixed steps/s** — the same over every step of the script with a user message and a
  malformed action added;
* **reset** — median time of ``env.reset`` over the domain's tasks (data already loaded;
  each the fastest of ``--repeat``);
* **evaluation** — median time of the end-of-episode evaluation of a gold trajectory
  (live state vs. the cached gold state, env assertions, action/communicate checks).

Run: ``python benchmarks/tau2_speed.py [--domains airline retail] [--repeat 5]``.
Targets: ≥ 30k tool-call steps/s on every domain, reset ≤ 2 ms, evaluation ≤ 2 ms; the
script prints whether each is met.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trace_gym.tau2.data import load_tasks
from trace_gym.tau2.env import Tau2Env
from trace_gym.tau2.evaluator import evaluate

try:
    from speed_targets import STEPS_PER_S, Target, best_of, cpu, median, report_targets
except ImportError:  # imported as benchmarks.tau2_speed
    from benchmarks.speed_targets import STEPS_PER_S, Target, best_of, cpu, median, report_targets

RESET_MS = 2.0
EVAL_MS = 2.0

# A mixed read/write script per domain (arguments are real ids of the shipped data).
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "airline": [
        {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}},
        {"name": "get_reservation_details", "arguments": {"reservation_id": "NO6JO3"}},
        {"name": "search_direct_flight", "arguments": {"origin": "JFK", "destination": "SFO", "date": "2024-05-16"}},
        {"name": "update_reservation_baggages", "arguments": {"reservation_id": "NO6JO3", "total_baggages": 2,
                                                              "nonfree_baggages": 0, "payment_id": "credit_card_4421486"}},
        {"name": "get_flight_status", "arguments": {"flight_number": "HAT001", "date": "2024-05-16"}},
        {"name": "send_certificate", "arguments": {"user_id": "mia_li_3668", "amount": 50}},
        {"name": "cancel_reservation", "arguments": {"reservation_id": "NOPE00"}},
        {"name": "calculate", "arguments": {"expression": "2 * (3 + 4)"}},
    ],
    "retail": [
        {"name": "find_user_id_by_email", "arguments": {"email": "yusuf.rossi7301@example.com"}},
        {"name": "get_user_details", "arguments": {"user_id": "yusuf_rossi_9620"}},
        {"name": "get_order_details", "arguments": {"order_id": "#W2378156"}},
        {"name": "get_product_details", "arguments": {"product_id": "1656367028"}},
        {"name": "modify_user_address", "arguments": {"user_id": "yusuf_rossi_9620", "address1": "1 Main St",
                                                      "address2": "", "city": "Austin", "state": "TX",
                                                      "country": "USA", "zip": "78701"}},
        {"name": "cancel_pending_order", "arguments": {"order_id": "#W2378156", "reason": "no longer needed"}},
        {"name": "list_all_product_types", "arguments": {}},
        {"name": "calculate", "arguments": {"expression": "100 - 12.5"}},
    ],
    "telecom": [
        {"name": "get_customer_by_phone", "arguments": {"phone_number": "555-123-2002"}},
        {"name": "get_details_by_id", "arguments": {"id": "L1001"}},
        {"name": "get_data_usage", "arguments": {"customer_id": "C1001", "line_id": "L1001"}},
        {"name": "enable_roaming", "arguments": {"customer_id": "C1001", "line_id": "L1001"}},
        {"name": "get_bills_for_customer", "arguments": {"customer_id": "C1001"}},
        {"name": "suspend_line", "arguments": {"customer_id": "C1001", "line_id": "L9999", "reason": "x"}},
    ],
    "mock": [
        {"name": "get_users", "arguments": {}},
        {"name": "create_task", "arguments": {"user_id": "user_1", "title": "Bench"}},
        {"name": "update_task_status", "arguments": {"task_id": "task_1", "status": "completed"}},
        {"name": "list_tasks", "arguments": {"user_id": "user_1"}},
    ],
}
EXTRA_ACTIONS = ["Could you tell me your user id, please?", '{"name": "broken", "arguments": {']


def _actions(domain: str) -> list[str]:
    calls = [json.dumps(c) for c in SCRIPTS[domain]]
    return calls + EXTRA_ACTIONS


def bench_steps(domain: str, repeat: int) -> tuple[float, float]:
    """(tool-call steps/s, mixed steps/s): one over the median step time, each step the fastest
    of ``repeat`` replays of the script from the same reset."""
    env = Tau2Env(domain, max_steps=10**9, max_errors=10**9)
    actions = _actions(domain)
    n_calls = len(SCRIPTS[domain])
    best = [float("inf")] * len(actions)
    for _ in range(max(1, repeat) + 1):  # the first replay warms caches
        env.reset(seed=0)
        for j, a in enumerate(actions):
            _, dt = cpu(lambda a=a: env.step(a))
            best[j] = min(best[j], dt)
    return 1 / median(best[:n_calls]), 1 / median(best)


def bench_reset(domain: str, repeat: int) -> float:
    """Median seconds of ``env.reset`` over the domain's tasks."""
    env = Tau2Env(domain)
    tasks = load_tasks(domain)
    env.reset(seed=0, options={"task_id": tasks[0]["id"]})
    return median(best_of(lambda t=t: env.reset(seed=0, options={"task_id": t["id"]}), repeat) for t in tasks)


def bench_eval(domain: str, repeat: int) -> float:
    """Median end-of-episode evaluation time over gold trajectories played through the gym."""
    env = Tau2Env(domain)
    tasks = load_tasks(domain)
    times = []
    for task in tasks:
        env.reset(seed=0, options={"task_id": task["id"]})
        for a in (task.get("evaluation_criteria") or {}).get("actions") or []:
            if (a.get("requestor") or "assistant") == "assistant":
                env.step(json.dumps({"name": a["name"], "arguments": a.get("arguments") or {}}))
                if env._done:
                    break
        if env._done:
            continue
        evaluate(task, env.tau2_trajectory(), "user_stop", domain, predicted=env.tau2_env)  # warm the gold cache
        traj = env.tau2_trajectory()
        times.append(best_of(lambda task=task, traj=traj: evaluate(task, traj, "user_stop", domain, predicted=env.tau2_env), repeat))
    return median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--domains", nargs="+", default=["airline", "retail", "telecom", "mock"])
    p.add_argument("--repeat", type=int, default=5, help="runs of each operation; the fastest is kept")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    for d in args.domains:
        calls, mixed = bench_steps(d, args.repeat)
        results[d] = {"tool_call_steps_per_s": calls, "mixed_steps_per_s": mixed,
                      "reset_ms": bench_reset(d, args.repeat) * 1000, "eval_ms": bench_eval(d, args.repeat) * 1000}
    step_t = Target("tool-call step", STEPS_PER_S, True, "steps/s")
    reset_t, eval_t = Target("reset", RESET_MS, False, "ms"), Target("evaluation", EVAL_MS, False, "ms")
    if args.json:
        print(json.dumps({"targets": {"tool_call_steps_per_s": STEPS_PER_S, "reset_ms": RESET_MS, "eval_ms": EVAL_MS},
                          "results": results}, indent=2))
        return 0
    print(f"{'domain':<8} {'call steps/s':>13} {'mixed steps/s':>14} {'reset ms':>9} {'eval ms':>8}   (medians, CPU time)")
    for d, r in results.items():
        print(f"{d:<8} {r['tool_call_steps_per_s']:>13,.0f} {r['mixed_steps_per_s']:>14,.0f} {r['reset_ms']:>9.3f} {r['eval_ms']:>8.3f}")
    checks = []
    for d, r in results.items():
        checks += [(f"tau2-{d} tool-call step", step_t, r["tool_call_steps_per_s"]),
                   (f"tau2-{d} reset", reset_t, r["reset_ms"]), (f"tau2-{d} evaluation", eval_t, r["eval_ms"])]
    report_targets(checks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
