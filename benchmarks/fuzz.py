"""Hostile input, measured: every registered id driven with generated actions of every hostile shape.

Each id gets ``--actions`` actions (20,000 by default), drawn from a seeded generator:
the shapes of :data:`trace_gym.testing.HOSTILE_SHAPES` (deeply nested JSON and Python
call expressions, thousands of repeated ``<tool_call>``/``<think>`` tags, huge strings
and numbers, unicode with control characters and lone surrogates, wrong types, unknown
tools) at sizes from a few characters to about a megabyte, mixed with calls to the env's
own tools with junk arguments and plain messages.  Episodes run on; a finished one is
reset with the next seed.

Per id it prints: actions, actions/s (step time only), **exceptions** raised by
``step`` (target 0), **rejected calls that changed state** — an action error, or a call
whose every tool call returned an error, after which ``env.unwrapped.state_fingerprint()``
differs (target 0) — the slowest action (target under one second) and whether the
targets are met.  Exit status 0 when every id meets them, 1 otherwise.

Usage::

    python benchmarks/fuzz.py [--actions N] [--warmup N] [--ids ID ...] [--seed S] [--max-size N] [--json] [--trace-slow N]

An id whose benchmark data is missing is reported as skipped.  Timings depend on the
machine: run it on an idle one.  Each id starts from a collected, frozen heap
(``gc.freeze``), so the collections its steps trigger do not traverse what earlier ids
and the loaded data left; ``--trace-slow N`` prints each id's N slowest actions with
their CPU time, the part of it spent in the garbage collector, and where in the episode
they ran.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import random
import sys
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.testing import seeded_hostile_action

SLOWEST_TARGET_S = 1.0


@dataclass
class IdReport:
    env_id: str
    actions: int = 0
    seconds: float = 0.0
    exceptions: int = 0
    changed_state: int = 0
    episodes: int = 0
    slowest_s: float = 0.0
    slowest_shape: str = ""
    skipped: str | None = None
    shapes: dict[str, int] = field(default_factory=dict)
    exception_samples: list[str] = field(default_factory=list)
    changed_samples: list[str] = field(default_factory=list)
    slow: list[tuple[float, str]] = field(default_factory=list)  # the slowest actions, with where they ran

    @property
    def actions_per_s(self) -> float:
        return self.actions / self.seconds if self.seconds > 0 else math.nan

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.exceptions == 0 and self.changed_state == 0 and self.slowest_s < SLOWEST_TARGET_S


class _GcClock:
    """CPU seconds spent in the garbage collector (a step's time includes any collection it triggers)."""

    def __init__(self) -> None:
        self.total, self._t0 = 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.process_time()
        else:
            self.total += time.process_time() - self._t0


_GC = _GcClock()


def _make(env_id: str) -> Any:

    env = gym.make(env_id, disable_env_checker=True)
    env.reset(seed=0)
    return env


def fuzz_id(env_id: str, n_actions: int, seed: int, max_size: int, warmup: int = 200, trace_slow: int = 0) -> IdReport:
    """Drive one id; the first ``warmup`` actions are checked like the others but not timed
    (a first episode end may import a scorer's dependencies).  ``trace_slow`` keeps the
    slowest actions with their action index, episode seed and step in the episode."""
    rep = IdReport(env_id)
    if trace_slow and _GC not in gc.callbacks:
        gc.callbacks.append(_GC)
    env = _make(env_id)
    if isinstance(env, str):
        rep.skipped = env
        return rep
    gc.collect()
    gc.freeze()  # what the process holds so far (earlier ids, loaded data) is not traversed by this id's collections
    u = env.unwrapped
    rng = random.Random(f"{seed}:{env_id}")
    episode_seed = seed
    _, info = env.reset(seed=episode_seed)
    tools = [t["function"]["name"] for t in info.get("tools", [])]
    shapes: Counter[str] = Counter()
    done = False
    for k in range(warmup + n_actions):
        timed = k >= warmup
        if done:
            episode_seed += 1
            try:
                _, info = env.reset(seed=episode_seed)
            except Exception:  # a reset failure is counted like a step failure
                rep.exceptions += 1
                rep.exception_samples.append(f"reset(seed={episode_seed}): {traceback.format_exc(limit=3)}")
                continue
            rep.episodes += 1
            done = False
        shape, action = seeded_hostile_action(rng, tools, max_size)
        shapes[shape] += 1
        fp_before = u.state_fingerprint()
        n_before = len(u.messages)
        chars_before = sum(len(str(m.get("content") or "")) for m in u.messages) if trace_slow else 0
        t0, c0, g0 = time.perf_counter(), time.process_time(), _GC.total
        try:
            _, _, term, trunc, info = env.step(action)
        except Exception as exc:
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            rep.exceptions += 1
            if len(rep.exception_samples) < 5:
                rep.exception_samples.append(f"{shape} ({len(action)} chars): {type(exc).__name__}: {str(exc)[:200]}")
            done = True
        else:
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            done = term or trunc
            new = u.messages[n_before:]
            calls = [tc for m in new if m.get("role") == "assistant" for tc in (m.get("tool_calls") or [])]
            rejected = "action_error" in info or (calls and len(info.get("tool_errors", [])) == len(calls))
            if rejected and u.state_fingerprint() != fp_before:
                rep.changed_state += 1
                if len(rep.changed_samples) < 5:
                    rep.changed_samples.append(f"{shape}: {action[:200]!r}")
        if not timed:
            continue
        rep.actions += 1
        rep.seconds += dt
        if trace_slow and (len(rep.slow) < trace_slow or dt > rep.slow[-1][0]):
            end = "ended" if done else "ran on"
            where = (f"action {k} ({shape}, {len(action)} chars), {cpu * 1000:.0f}ms CPU "
                     f"({(_GC.total - g0) * 1000:.0f}ms in gc): "
                     f"episode seed {episode_seed}, step {u.step_count}, "
                     f"{n_before} earlier messages of {chars_before} chars, episode {end}")
            rep.slow = sorted([*rep.slow, (dt, where)], reverse=True)[:trace_slow]
        if dt > rep.slowest_s:
            rep.slowest_s, rep.slowest_shape = dt, f"{shape} ({len(action)} chars)"
    rep.shapes = dict(shapes)
    env.close()
    gc.unfreeze()
    return rep


def _table(reports: list[IdReport]) -> str:
    head = f"{'id':40s} {'actions':>8s} {'actions/s':>10s} {'exceptions':>10s} {'changed':>8s} {'slowest':>9s}  targets"
    lines = [head, "-" * len(head)]
    for r in reports:
        if r.skipped:
            lines.append(f"{r.env_id:40s} skipped: {r.skipped[:80]}")
            continue
        lines.append(f"{r.env_id:40s} {r.actions:8d} {r.actions_per_s:10.0f} {r.exceptions:10d} {r.changed_state:8d} "
                     f"{r.slowest_s * 1000:7.0f}ms  {'met' if r.ok else 'NOT MET'}  (slowest: {r.slowest_shape})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actions", type=int, default=20_000, help="generated actions per id (default 20000)")
    ap.add_argument("--ids", nargs="*", help="env ids (default: every registered trace/* id)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=200, help="actions per id checked but not timed, first (default 200)")
    ap.add_argument("--max-size", type=int, default=250_000, help="largest shape size n (actions reach about 1 MB)")
    ap.add_argument("--json", action="store_true", help="print the reports as JSON")
    ap.add_argument("--trace-slow", type=int, default=0, metavar="N",
                    help="also print each id's N slowest actions with where in the episode they ran")
    a = ap.parse_args(argv)
    ids = a.ids or sorted(i for i in gym.registry if i.startswith("trace/"))
    reports = []
    for env_id in ids:
        rep = fuzz_id(env_id, a.actions, a.seed, a.max_size, a.warmup, a.trace_slow)
        reports.append(rep)
        if not a.json:
            print(_table([rep]).splitlines()[-1], flush=True)
    if a.json:
        print(json.dumps([{**asdict(r), "actions_per_s": r.actions_per_s, "ok": r.ok} for r in reports], indent=2, default=str))
    else:
        print()
        print(f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
              f"{a.actions} timed actions per id after {a.warmup} untimed, seed {a.seed}")
        print(_table(reports))
        for r in reports:
            for s in r.exception_samples + r.changed_samples:
                print(f"{r.env_id}: {s}")
            for dt, where in r.slow:
                print(f"{r.env_id}: slow {dt * 1000:.0f}ms: {where}")
    return 0 if all(r.ok or r.skipped for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
