"""Seconds per SFT warm-start step and peak memory: plain SFT vs the detached-prompt approximation.

For each env (default: ``trace/cap-refund-policy-v0``, long τ²-style prompts, and
``trace/cap-ts-location-dependency-v0``, short ToolSandbox prompts), two sides train
the same LoRA adapter on the same reference episodes (train-split tasks) for the
same steps with the same batch and learning rate:

* ``exact``: TRL's ``SFTTrainer`` as trace-gym's warm start runs it by default;
* ``detached``: ``sft_prefix_grad="detached"``: each batch's prompt runs once without
  gradient (:func:`trace_gym.train.shared_prefix.detached_prompt_loss`).

Each side runs in a fresh process (its peak RSS is its own).  Printed per side: the
median seconds per optimizer step (first step excluded as warm-up), peak RSS, the
ratio to ``exact``, and the effect on learning: the loss per assistant token on
held-out demonstrations (tasks after the training ones) before and after training.

    python benchmarks/sft_overhead.py [--envs ID,ID] [--steps 5] [--demos 16] [--batch 4] [--model smollm2|tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trainer_overhead import StepTimer, run_worker  # noqa: E402

ENVS = ("trace/cap-refund-policy-v0", "trace/cap-ts-location-dependency-v0")
SIDES = ("exact", "detached")


def worker(env_id: str, side: str, a: argparse.Namespace, out: str) -> dict[str, Any]:
    import torch

    from trace_gym.train.chat import ChatRenderer
    from trace_gym.train.config import TrainConfig
    from trace_gym.train.demos import build_demonstrations, tokenize_demonstration
    from trace_gym.train.models import load_lora, load_model_and_tokenizer
    from trace_gym.train.sft import demo_loss, warm_start

    if a.threads:
        torch.set_num_threads(a.threads)
    cfg = TrainConfig(env_id=env_id, model=a.model, out=out, sft_envs=[env_id], sft_seeds_per_env=a.demos,
                      sft_max_steps=a.steps, sft_batch_size=a.batch, sft_learning_rate=a.lr, lora_r=16, lora_alpha=32,
                      sft_prefix_grad=side, progress=False, manifest=False, seed=0)
    model, tok = load_model_and_tokenizer(a.model, seed=0)
    renderer = ChatRenderer(tok, cfg.tools_in_prompt, cfg.tool_listing, cfg.tool_format)
    held = build_demonstrations([env_id], a.held_out, start=a.demos).demos
    held_rows = [tokenize_demonstration(renderer, d, cfg.sft_max_length) for d in held]
    before = demo_loss(model, held_rows)
    timer = StepTimer()
    res = warm_start(cfg, model=model, tokenizer=tok, manifest=False, loss_sample=0, callbacks=[timer.callback])
    after = demo_loss(load_lora(model, out, cfg), held_rows)
    return {"times": timer.times, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "held_out_before": before, "held_out_after": after, "steps": res.steps, "demos": res.demos,
            "tokens": {k: res.record[k] for k in ("tokens", "trained_tokens")}}


def run_side(env_id: str, side: str, a: argparse.Namespace, tmp: str) -> dict[str, Any]:
    return run_worker(__file__, [env_id, side], os.path.join(tmp, f"{env_id.replace('/', '_')}-{side}"), a.passthrough)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default=",".join(ENVS))
    p.add_argument("--model", default="smollm2", help="smollm2 (the real case) or tiny (a quick check of the script)")
    p.add_argument("--steps", type=int, default=5, help="optimizer steps per side (the first is excluded from the timing)")
    p.add_argument("--demos", type=int, default=16, help="training demonstrations (train-split tasks 0..demos-1)")
    p.add_argument("--held-out", type=int, default=8, help="held-out demonstrations (the tasks after them)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--worker", nargs=2, metavar=("ENV", "SIDE"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a, _ = p.parse_known_args()
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker[0], a.worker[1], a, a.out)), flush=True)
        return 0
    a.passthrough = [f"--model={a.model}", f"--steps={a.steps}", f"--demos={a.demos}", f"--held-out={a.held_out}",
                     f"--batch={a.batch}", f"--lr={a.lr}", f"--threads={a.threads}"]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for env_id in [e for e in a.envs.split(",") if e]:
            results[env_id] = {}
            for side in SIDES:
                print(f"[{env_id} {side}] training {a.steps} steps", file=sys.stderr, flush=True)
                results[env_id][side] = run_side(env_id, side, a, tmp)
    print(f"\nmodel {a.model}, LoRA r16, batch {a.batch}, lr {a.lr}, {a.steps} steps, {a.demos} training / "
          f"{a.held_out} held-out demonstrations per env, threads {a.threads or 'default'}\n")
    print("| env | side | tokens per demo (trained) | s/step (median) | speed-up vs exact | peak RSS GB | held-out loss before → after |")
    print("|---|---|---|---|---|---|---|")
    for env_id, sides in results.items():
        exact = sides.get("exact", {})
        base = statistics.median(exact["times"][1:] or exact["times"]) if exact.get("times") else None
        for side, r in sides.items():
            if "error" in r:
                print(f"| {env_id} | {side} | failed: {r['error']} | | | | |")
                continue
            sec = statistics.median(r["times"][1:] or r["times"])
            tokens = r["tokens"]
            per_demo = f"{tokens['tokens'] / max(1, r['demos']):.0f} ({tokens['trained_tokens'] / max(1, r['demos']):.0f})"
            ratio = f"{base / sec:.2f}x" if base else "n/a"
            print(f"| {env_id} | {side} | {per_demo} | {sec:.2f} | {ratio} | {r['peak_rss_gb']:.2f} | "
                  f"{r['held_out_before']:.3f} → {r['held_out_after']:.3f} |")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
