"""How fast are the capability environments?

For every registered ``trace/cap-*`` environment: the synthetic database alone, a full
``reset`` (database, case, slots, reference dry-run, prompt), and ``step`` while
playing the reference solution.  Prints milliseconds per operation (median over the
runs) of process CPU time, which a busy shared machine disturbs far less than wall
time (``--clock wall`` for wall time); ``--json`` prints the same as JSON.

Usage: ``python benchmarks/capability_envs_speed.py [--resets N] [--backend auto|engine|builtin] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time

import gymnasium as gym

import trace_gym  # noqa: F401
from trace_gym.capabilities.synthdb import GENERATORS


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


CLOCK = time.process_time


def bench_env(env_id: str, resets: int, backend: str) -> dict[str, float]:
    env = gym.make(env_id, backend=backend).unwrapped
    env.reset(seed=0)  # warm caches (domain data, schemas)
    gen = GENERATORS[env.cap_spec.domain]
    sizes = {k: int(v if not isinstance(v, dict) else env.knob_values[v["knob"]]) for k, v in (env.cap_spec.data.get("db") or {}).items()}
    db_t, reset_t, step_t, reset_noverify_t = [], [], [], []
    for seed in range(resets):
        t = CLOCK()
        gen(random.Random(seed), **sizes)
        db_t.append(CLOCK() - t)
        t = CLOCK()
        env.reset(seed=seed)
        reset_t.append(CLOCK() - t)
        for action in env.reference_actions():
            t = CLOCK()
            _, _, term, trunc, _ = env.step(action)
            step_t.append(CLOCK() - t)
            if term or trunc:
                break
    env.verify_reference = False
    for seed in range(resets):
        t = CLOCK()
        env.reset(seed=seed)
        reset_noverify_t.append(CLOCK() - t)
    env.close()
    return {"db_ms": _median_ms(db_t), "reset_ms": _median_ms(reset_t), "reset_no_dry_run_ms": _median_ms(reset_noverify_t),
            "step_ms": _median_ms(step_t), "backend": env.backend_kind}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resets", type=int, default=100)
    ap.add_argument("--backend", default="auto", choices=["auto", "engine", "builtin"])
    ap.add_argument("--clock", default="cpu", choices=["cpu", "wall"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    ids = sorted(i for i in gym.registry if i.startswith("trace/cap-"))
    results = {i: bench_env(i, args.resets, args.backend) for i in ids}
    if args.json:
        print(json.dumps({"python": platform.python_version(), "clock": args.clock, "results": results}, indent=2))
        return
    print(f"median ms per operation ({args.clock} time)")
    print(f"{'environment':45s} {'backend':8s} {'db ms':>7s} {'reset ms':>9s} {'reset (no dry-run)':>19s} {'step ms':>8s}")
    for i, r in results.items():
        print(f"{i:45s} {r['backend']:8s} {r['db_ms']:7.3f} {r['reset_ms']:9.3f} {r['reset_no_dry_run_ms']:19.3f} {r['step_ms']:8.3f}")


if __name__ == "__main__":
    main()
