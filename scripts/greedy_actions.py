"""Greedy actions of a few ToolSandbox episodes, dumped to JSON: the before/after check of a refactor.

Plays the first ``--scenarios`` ToolSandbox scenarios tagged state dependency (not insufficient
information) with SmolLM2-135M-Instruct, greedy, through :func:`trace_gym.rollout.collect`, once per
mode, and writes every episode's actions (and reward and termination reason) to ``--out``:

* ``hf-single``: the ``transformers`` engine, one episode at a time;
* ``hf-batch``: the same, ``--batch`` episodes at a time (lock step, each slot starting its next
  episode as soon as its own ends);
* ``llamacpp-lockstep``: the llama.cpp engine (float copy), ``--batch`` episodes at a time, every
  batch of actions waiting for its longest one (the policy's continuous serving hidden);
* ``llamacpp-served``: the same engine serving the episodes continuously (``policy.serve``).

The llama.cpp modes run when ``llama_cpp`` imports.  ``--code`` imports ``trace_gym`` from another
checkout (a baseline commit exported with ``git archive``) instead of this one; ``--compare A B``
prints where two dumps differ and exits 1 when any action does.

    python scripts/greedy_actions.py --out after.json
    python scripts/greedy_actions.py --code /tmp/base --out before.json
    python scripts/greedy_actions.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ENV = "trace/toolsandbox-v0"
HF_MODES = ("hf-single", "hf-batch")
LLAMACPP_MODES = ("llamacpp-lockstep", "llamacpp-served")


def _use_code(code: str) -> None:
    """Import ``trace_gym`` from ``code`` (not from an editable install or the current folder)."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path.cwd().resolve()]
    sys.path.insert(0, str(Path(code).resolve()))
    for name in [m for m in sys.modules if m == "trace_gym" or m.startswith("trace_gym.")]:
        del sys.modules[name]


class _LockStep:
    """A policy without its continuous serving: every batch of actions waits for its longest one."""

    accepts_seeds = True

    def __init__(self, inner: Any):
        self.inner, self.policy_id = inner, inner.policy_id

    def act(self, messages: Any, tools: Any) -> str:
        return self.inner.act(messages, tools)

    def act_batch(self, requests: Any, seeds: Any = None) -> list[str]:
        return self.inner.act_batch(requests, seeds=seeds)


def scenarios(n: int) -> list[str]:
    from trace_gym.toolsandbox.scenarios import load_scenarios

    found = load_scenarios()
    names = sorted(k for k, s in found.items()
                   if "STATE_DEPENDENCY" in s.categories and "INSUFFICIENT_INFORMATION" not in s.categories)
    return names[:n]


def play(mode: str, names: list[str], batch: int, max_new: int) -> dict[str, Any]:
    from trace_gym.core.tasks import task_source_for
    from trace_gym.rollout import collect

    if mode.startswith("hf"):
        from trace_gym.policies.hf import HFPolicy

        policy: Any = HFPolicy.smollm2(greedy=True, batch_size=batch, max_new_tokens=max_new)
    else:
        from trace_gym.policies.llamacpp import LlamaCppPolicy

        policy = LlamaCppPolicy.smollm2(greedy=True, batch_size=batch, max_new_tokens=max_new)
        if mode == "llamacpp-lockstep":
            policy = _LockStep(policy)
    source = task_source_for(ENV)
    t0 = time.perf_counter()
    trajs = collect(ENV, policy, [0] * len(names), options=[source.reset_options(n) for n in names],
                    batch_size=1 if mode == "hf-single" else batch)
    return {"seconds": time.perf_counter() - t0,
            "episodes": [{"scenario": n, "actions": t.actions, "reward": t.reward, "reason": t.termination_reason}
                         for n, t in zip(names, trajs, strict=True)]}


def compare(a: dict[str, Any], b: dict[str, Any]) -> int:
    differ = 0
    for mode in sorted(set(a) | set(b)):
        if mode not in a or mode not in b:
            print(f"{mode}: only in {'the first' if mode in a else 'the second'}")
            continue
        same = 0
        for ea, eb in zip(a[mode]["episodes"], b[mode]["episodes"], strict=True):
            if ea == eb:
                same += 1
                continue
            differ += 1
            k = next((i for i, (x, y) in enumerate(zip(ea["actions"], eb["actions"], strict=False)) if x != y),
                     min(len(ea["actions"]), len(eb["actions"])))
            print(f"{mode} {ea['scenario']}: differs at action {k}")
        n_actions = sum(len(e["actions"]) for e in a[mode]["episodes"])
        print(f"{mode}: {same}/{len(a[mode]['episodes'])} episodes identical ({n_actions} actions); "
              f"{a[mode]['seconds']:.1f}s vs {b[mode]['seconds']:.1f}s")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--code", help="import trace_gym from this checkout")
    p.add_argument("--scenarios", type=int, default=6)
    p.add_argument("--batch", type=int, default=3)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--modes", default=",".join(HF_MODES + LLAMACPP_MODES))
    p.add_argument("--compare", nargs=2, type=Path)
    a = p.parse_args(argv)
    if a.compare:
        return compare(*(json.loads(f.read_text()) for f in a.compare))
    if a.out is None:
        p.error("--out is required (or --compare)")
    if a.code:
        _use_code(a.code)
    import trace_gym

    print(f"trace_gym from {Path(trace_gym.__file__).parent}", flush=True)
    names = scenarios(a.scenarios)
    has_llamacpp = importlib.util.find_spec("llama_cpp") is not None
    out: dict[str, Any] = {}
    for mode in a.modes.split(","):
        if mode in LLAMACPP_MODES and not has_llamacpp:
            print(f"{mode}: skipped (llama_cpp is not installed)", flush=True)
            continue
        out[mode] = play(mode, names, a.batch, a.max_new_tokens)
        print(f"{mode}: {sum(len(e['actions']) for e in out[mode]['episodes'])} actions in "
              f"{out[mode]['seconds']:.1f}s", flush=True)
        tmp = a.out.with_suffix(".tmp")  # after every mode, so an interrupted run keeps what it played
        tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False))
        os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
