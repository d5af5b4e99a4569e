"""Speed of the τ²-bench gym environments, per domain.

Measures, with the offline user and no judge:

* **steps/s** — ``env.step`` throughput on a mixed script of read calls, write calls
  (state-changing, some failing), user messages and malformed actions;
* **reset** — mean time of ``env.reset`` over the domain's tasks (data already loaded);
* **evaluation** — mean time of the end-of-episode evaluation of a gold trajectory
  (live state vs. the cached gold state, env assertions, action/communicate checks).

Run: ``python benchmarks/tau2_speed.py [--domains airline retail] [--seconds 2]``.
Targets: ≥ 30k steps/s, reset ≤ 2 ms, evaluation ≤ 2 ms (retail/airline).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from trace_gym.tau2.data import load_tasks
from trace_gym.tau2.env import Tau2Env
from trace_gym.tau2.evaluator import evaluate

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


def bench_steps(domain: str, seconds: float) -> float:
    env = Tau2Env(domain, max_steps=10**9, max_errors=10**9)
    actions = _actions(domain)
    env.reset(seed=0)
    n = 0
    i = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for _ in range(200):
            _, _, term, trunc, _ = env.step(actions[i % len(actions)])
            i += 1
            n += 1
            if term or trunc or len(env.messages) > 400:
                env.reset(seed=n)
                i = 0
    return n / (time.perf_counter() - t0)


def bench_reset(domain: str, rounds: int = 3) -> float:
    env = Tau2Env(domain)
    tasks = load_tasks(domain)
    env.reset(seed=0, options={"task_id": tasks[0]["id"]})
    t0 = time.perf_counter()
    n = 0
    for _ in range(rounds):
        for t in tasks:
            env.reset(seed=n, options={"task_id": t["id"]})
            n += 1
    return (time.perf_counter() - t0) / n


def bench_eval(domain: str) -> float:
    """Mean end-of-episode evaluation time over gold trajectories played through the gym."""
    env = Tau2Env(domain)
    tasks = load_tasks(domain)
    total = 0.0
    n = 0
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
        t0 = time.perf_counter()
        evaluate(task, traj, "user_stop", domain, predicted=env.tau2_env)
        total += time.perf_counter() - t0
        n += 1
    return total / max(n, 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--domains", nargs="+", default=["airline", "retail", "telecom", "mock"])
    p.add_argument("--seconds", type=float, default=2.0, help="duration of the steps/s measurement per domain")
    args = p.parse_args(argv)
    print(f"{'domain':<8} {'steps/s':>10} {'reset ms':>9} {'eval ms':>8}")
    for d in args.domains:
        sps = bench_steps(d, args.seconds)
        reset = bench_reset(d) * 1000
        ev = bench_eval(d) * 1000
        print(f"{d:<8} {sps:>10,.0f} {reset:>9.3f} {ev:>8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
