"""Seconds per GRPO step and peak memory: a bare TRL GRPOTrainer vs trace-gym's trainer, sharing off and on.

Two cases, each trained on four sides with the same model, LoRA, group size G,
groups per step, completion length, sampling settings and steps:

* ``cap``: ``trace/cap-refund-policy-v0``, a capability env with a long opening
  (system prompt, policy, tool listing, first user message) and multi-turn episodes;
* ``toy``: a one-turn "say the word X" task with a short prompt.

Sides: ``bare`` is TRL's stock pipeline fed the same opening prompts (rendered as
trace-gym renders them) with a reward on the completion text: the anchor.  ``off``
is trace-gym's trainer (:class:`trace_gym.train.EnvRolloutFunc` through the env)
with ``shared_prefix`` off; ``on`` computes each group's shared prefix once, in the
loss (exact) and as a KV cache while sampling; ``detached`` also skips the
gradient of the shared prefix (the approximate mode).

Each side runs in a fresh process, so its peak resident memory is its own.  Per
side: median seconds per step (the first step excluded as warm-up), peak RSS (and
peak CUDA memory on a GPU), the ratio to bare TRL, the last step's mean reward and
the cosine between its LoRA update and the ``on`` side's: the sides see the same
rollouts on the first step, so ``off`` should give 1.000 and ``detached`` shows how
far dropping the prompt's gradient moves the update.

    python benchmarks/trainer_overhead.py [--model smollm2|tiny] [--steps 4] [--generations 4] \\
        [--max-tokens 256] [--cases cap,toy] [--sides bare,off,on,detached] [--threads 1] [--micro-batch 1]

Targets (``cap``): ``on`` >= 3x faster per step than ``bare``; ``off`` <= 1.1x ``bare``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import gymnasium as gym  # noqa: E402

from trace_gym.core import ToolEnv, ToolSet  # noqa: E402
from trace_gym.core.env import EpisodeOpening  # noqa: E402

WORDS = ["apple", "river", "stone", "cloud", "ember", "maple", "orbit", "tulip"]
SYSTEM = "You are a helpful assistant."
CAP_ENV = "trace/cap-refund-policy-v0"
SIDES = ("bare", "off", "on", "detached")
NUM_SEEDS = 64


def task(seed: int) -> tuple[str, str]:
    word = WORDS[seed % len(WORDS)]
    return word, f"Say the word {word}."


def score(word: str, text: str) -> float:
    return 0.5 * float(word in text.lower()) + 0.5 * min(len(text), 200) / 200


class SayWordEnv(ToolEnv):
    """The toy task as a one-turn env."""

    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=1, **kwargs)
        self.word = ""

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        seed = int(self.np_random.integers(1 << 30)) if options.get("seed") is None else int(options["seed"])
        self.word, prompt = task(seed)
        return EpisodeOpening(SYSTEM, ToolSet(), [{"role": "user", "content": prompt}])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return super().reset(seed=seed, options={**(options or {}), "seed": seed})

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("answered")
        return []

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        text = next((m.get("content") or "" for m in reversed(self.transcript()) if m["role"] == "assistant"), "")
        return score(self.word, text), {}


TOY_ENV = "trace-bench/say-word-v0"
if TOY_ENV not in gym.registry:
    gym.register(id=TOY_ENV, entry_point=SayWordEnv)


class StepTimer:
    def __init__(self):
        from transformers import TrainerCallback

        outer = self

        class _CB(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                outer._t = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                outer.times.append(time.perf_counter() - outer._t)

            def on_log(self, args, state, control, logs=None, **kw):
                if logs and "reward" in logs:
                    outer.rewards.append(float(logs["reward"]))

        self.times: list[float] = []
        self.rewards: list[float] = []
        self._t = 0.0
        self.callback = _CB()


def grpo_args(out: str, a: argparse.Namespace, side: str) -> Any:
    """The same GRPO settings on every side; ``--micro-batch`` splits a step's sequences into micro-batches on the
    unshared sides (bare, off), while the sharing sides keep each group in one batch, as sharing needs."""
    from trl import GRPOConfig

    batch = a.generations * a.groups
    micro = a.micro_batch if a.micro_batch and side in ("bare", "off") else batch
    if batch % micro:
        raise SystemExit(f"--micro-batch {micro} must divide G x groups = {batch}")
    return GRPOConfig(
        output_dir=out, per_device_train_batch_size=micro, gradient_accumulation_steps=batch // micro,
        num_generations=a.generations,
        max_completion_length=a.max_tokens, max_steps=a.steps + 1, learning_rate=1e-5, beta=0.0, epsilon=0.2,
        epsilon_high=0.28, loss_type="dapo", temperature=1.0, top_k=0, top_p=1.0, report_to="none", disable_tqdm=True,
        save_strategy="no", logging_steps=1, seed=0, use_cpu=a.device == "cpu", bf16=False, remove_unused_columns=False,
        gradient_checkpointing=a.gradient_checkpointing,
    )


def fresh_model(a: argparse.Namespace) -> tuple[Any, Any]:
    from trace_gym.train.config import TrainConfig
    from trace_gym.train.models import load_model_and_tokenizer, wrap_lora

    model, tok = load_model_and_tokenizer(a.model, seed=0)
    return wrap_lora(model, TrainConfig(lora_r=16, lora_alpha=32)), tok


def bare_dataset(case: str, tok: Any) -> tuple[Any, Any]:
    """The opening prompts trace-gym samples from, and a reward on the completion text, for the bare trainer."""
    from datasets import Dataset

    if case == "toy":
        prompts = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": task(s)[1]}] for s in range(NUM_SEEDS)]
        data = Dataset.from_dict({"prompt": prompts, "word": [task(s)[0] for s in range(NUM_SEEDS)]})

        def reward(completions, word, **_):
            texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
            return [score(w, t) for w, t in zip(word, texts, strict=True)]

        return data, reward
    from trace_gym.train.chat import ChatRenderer

    renderer = ChatRenderer(tok)
    env = gym.make(CAP_ENV, disable_env_checker=True)
    texts = []
    for s in range(NUM_SEEDS):
        _, info = env.reset(seed=s)
        texts.append(renderer.prompt_text(list(info["messages"]), list(info.get("tools") or [])))
    env.close()

    def length_reward(completions, **_):  # a stand-in: the anchor measures compute, not the task
        return [min(len(c if isinstance(c, str) else str(c)), 400) / 400 for c in completions]

    return Dataset.from_dict({"prompt": texts}), length_reward


def lora_state(model: Any) -> dict[str, Any]:
    return {n: p.detach().float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def worker(case: str, side: str, a: argparse.Namespace, out: str) -> dict[str, Any]:
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    model, tok = fresh_model(a)
    before = lora_state(model)
    timer = StepTimer()
    if side == "bare":
        from trl import GRPOTrainer

        data, reward = bare_dataset(case, tok)
        trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=grpo_args(out, a, side), train_dataset=data,
                              processing_class=tok, callbacks=[timer.callback])
    else:
        from trace_gym.integrations.trl import grpo_trainer_kwargs
        from trace_gym.train.trainer import grpo_trainer_class

        kwargs = grpo_trainer_kwargs(CAP_ENV if case == "cap" else TOY_ENV, seeds=range(NUM_SEEDS), num_generations=a.generations,
                                     max_new_tokens_per_turn=min(a.max_tokens, a.turn_tokens), max_completion_length=a.max_tokens,
                                     resample_constant_groups=False, shared_prefix=side != "off")
        trainer = grpo_trainer_class()(model=model, args=grpo_args(out, a, side), processing_class=tok, callbacks=[timer.callback], **kwargs)
        trainer.shared_prefix = side != "off"
        trainer.prefix_grad = "detached" if side == "detached" else "exact"
    if torch.cuda.is_available() and a.device != "cpu":
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    after = lora_state(model)
    delta = torch.cat([(after[n] - before[n]).flatten() for n in sorted(after)])
    torch.save(delta, os.path.join(out, "delta.pt"))
    result = {
        "times": timer.times,
        "rewards": timer.rewards,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "delta": os.path.join(out, "delta.pt"),
    }
    if torch.cuda.is_available() and a.device != "cpu":
        result["peak_cuda_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return result


def run_side(case: str, side: str, a: argparse.Namespace, tmp: str) -> dict[str, Any]:
    out = os.path.join(tmp, f"{case}-{side}")
    os.makedirs(out, exist_ok=True)
    return run_worker(__file__, [case, side], out, a.passthrough)


def run_worker(script: str, worker: list[str], out: str, passthrough: list[str]) -> dict[str, Any]:
    """Run ``script --worker *worker --out out *passthrough`` in a fresh process (its peak RSS is its own);
    its ``RESULT {json}`` line, or ``{"error": ...}`` with the end of its output."""
    cmd = [sys.executable, script, "--worker", *worker, "--out", out, *passthrough]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}


def cosine(a: Any, b: Any) -> float:
    import torch

    den = float(a.norm() * b.norm())
    return float(torch.dot(a, b)) / den if den > 0 else float("nan")


def report(case: str, results: dict[str, dict[str, Any]], a: argparse.Namespace) -> None:
    import torch

    print(f"\ncase {case}: model={a.model} G={a.generations} groups/step={a.groups} completion tokens={a.max_tokens} "
          f"timed steps={a.steps} gradient checkpointing={'on' if a.gradient_checkpointing else 'off'} "
          f"micro-batch on bare/off={a.micro_batch or a.generations * a.groups} threads={a.threads or 'default'}")
    print(f"{'side':<10}{'s/step':>9}{'x bare':>8}{'peak RSS GB':>13}{'reward':>8}{'cos(update, on)':>17}")
    med = {s: statistics.median(r["times"][1:] or r["times"]) for s, r in results.items() if "times" in r and r["times"]}
    ref = torch.load(results["on"]["delta"]) if "delta" in results.get("on", {}) else None
    for side, r in results.items():
        if "error" in r:
            print(f"{side:<10} failed: {r['error']}")
            continue
        ratio = f"{med[side] / med['bare']:.2f}" if "bare" in med else "-"
        cos = cosine(torch.load(r["delta"]), ref) if ref is not None else float("nan")
        cos = f"{cos:.3f}" if cos == cos else "-"  # "-": no update to compare (e.g. every reward equal)
        reward = f"{r['rewards'][-1]:.3f}" if r["rewards"] else "-"
        mem = f"{r['peak_rss_gb']:.2f}" + (f" ({r['peak_cuda_gb']:.2f} cuda)" if "peak_cuda_gb" in r else "")
        print(f"{side:<10}{med[side]:>9.3f}{ratio:>8}{mem:>13}{reward:>8}{cos:>17}")
    if case == "cap" and "bare" in med:
        if "on" in med:
            speed = med["bare"] / med["on"]
            print(f"sharing on vs bare TRL: {speed:.2f}x faster per step (target >= 3): {'met' if speed >= 3 else 'NOT met'}")
        if "off" in med:
            ratio = med["off"] / med["bare"]
            print(f"sharing off / bare TRL: {ratio:.2f} (target <= 1.1): {'met' if ratio <= 1.1 else 'NOT met'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2", help="smollm2 (the real case) or tiny (a quick check of the script)")
    p.add_argument("--steps", type=int, default=4, help="timed steps per side (one more is run as warm-up)")
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--groups", type=int, default=1, help="groups per step")
    p.add_argument("--max-tokens", type=int, default=256, help="completion tokens per episode (agent and env)")
    p.add_argument("--turn-tokens", type=int, default=64, help="tokens per agent turn on the trace-gym sides")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch default)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--micro-batch", type=int, default=0,
                   help="sequences per forward on the bare and off sides (0: the whole step); the rest accumulate")
    p.add_argument("--cases", default="cap,toy")
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--worker", nargs=2, metavar=("CASE", "SIDE"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        result = worker(a.worker[0], a.worker[1], a, a.out)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    a.passthrough = [x for x in sys.argv[1:]]
    sides = [s for s in a.sides.split(",") if s]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        p.error(f"unknown sides {unknown}; choose from {SIDES}")
    with tempfile.TemporaryDirectory() as tmp:
        for case in [c for c in a.cases.split(",") if c]:
            if case not in ("cap", "toy"):
                p.error(f"unknown case {case!r}; choose from cap, toy")
            results = {side: run_side(case, side, a, tmp) for side in sides}
            report(case, results, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
