"""How fast are the capability environments?

For every registered ``trace/cap-*`` environment: the synthetic database alone, a full
``reset`` (database, case, slots, reference dry-run, prompt), ``reset`` without the
reference dry-run, and ``step`` while playing the reference solution.  Every operation is
timed with two clocks at once: process CPU time, which a busy shared machine disturbs far
less, and wall time.  Prints the median milliseconds per operation over the seeds;
``--repeat R`` times each seed's reset R times and keeps the fastest (resets are
deterministic per seed, so this filters out interruptions from other processes).
``--json`` prints the same as JSON.

Usage: ``python benchmarks/capability_envs_speed.py [--resets N] [--repeat R] [--backend auto|engine|builtin] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import trace_gym  # noqa: F401
from trace_gym.capabilities.spec import resolve_number
from trace_gym.capabilities.synthdb import GENERATORS

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def _timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[Any, dict[str, float]]:
    """``fn()``'s result and its fastest time over ``repeat`` runs, per clock (seconds)."""
    best = {"cpu": float("inf"), "wall": float("inf")}
    out = None
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        out = fn()
        dc, dw = time.process_time() - c, time.perf_counter() - w
        best["cpu"] = min(best["cpu"], dc)
        best["wall"] = min(best["wall"], dw)
    return out, best


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3) if samples else float("nan")


def bench_env(env_id: str, resets: int, backend: str, repeat: int = 1) -> dict[str, Any]:
    env = gym.make(env_id, backend=backend).unwrapped
    env.reset(seed=0)  # warm caches (domain data, schemas, compiled templates)
    gen = GENERATORS[env.cap_spec.domain]
    sizes = {k: int(resolve_number(v, env.knob_values)) for k, v in (env.cap_spec.data.get("db") or {}).items()}
    ops = ("db", "reset", "reset_no_dry_run", "step")
    samples: dict[str, dict[str, list[float]]] = {op: {"cpu": [], "wall": []} for op in ops}

    def add(op: str, t: dict[str, float]) -> None:
        for clock, v in t.items():
            samples[op][clock].append(v)

    for seed in range(resets):
        add("db", _timed(lambda seed=seed: gen(random.Random(seed), **sizes), repeat)[1])
        add("reset", _timed(lambda seed=seed: env.reset(seed=seed), repeat)[1])
        for action in env.reference_actions():
            (_, _, term, trunc, _), t = _timed(lambda action=action: env.step(action))
            add("step", t)
            if term or trunc:
                break
    env.verify_reference = False
    for seed in range(resets):
        add("reset_no_dry_run", _timed(lambda seed=seed: env.reset(seed=seed), repeat)[1])
    env.close()
    result: dict[str, Any] = {"backend": env.backend_kind}
    for op in ops:
        for clock in CLOCKS:
            result[f"{op}_{clock}_ms"] = _median_ms(samples[op][clock])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resets", type=int, default=100, help="seeds per environment")
    ap.add_argument("--repeat", type=int, default=1, help="time each seed's reset this many times and keep the fastest")
    ap.add_argument("--backend", default="auto", choices=["auto", "engine", "builtin"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ids = sorted(i for i in gym.registry if i.startswith("trace/cap-"))
    results = {i: bench_env(i, args.resets, args.backend, max(1, args.repeat)) for i in ids}
    if args.json:
        print(json.dumps({"python": platform.python_version(), "resets": args.resets, "repeat": args.repeat, "results": results}, indent=2))
        return
    print(f"median ms per operation over {args.resets} seeds (cpu = process CPU time, wall = wall-clock time"
          + (f"; each reset the fastest of {args.repeat}" if args.repeat > 1 else "") + ")")
    cols = [("db", "db"), ("reset", "reset"), ("reset_no_dry_run", "no-dry-run"), ("step", "step")]
    heads = [f"{label} {clock}" for _, label in cols for clock in CLOCKS]
    print(f"{'environment':40s} {'backend':8s} " + " ".join(f"{h:>15s}" for h in heads))
    for i, r in results.items():
        cells = " ".join(f"{r[f'{op}_{clock}_ms']:>15.3f}" for op, _ in cols for clock in CLOCKS)
        print(f"{i:40s} {r['backend']:8s} {cells}")

if __name__ == "__main__":
    main()
