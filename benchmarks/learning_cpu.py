"""Does a short GRPO+LoRA run on CPU move SmolLM2-135M's reward on held-out seeds?

    python benchmarks/learning_cpu.py [--env ENV_ID] [--steps 8] [--eval-seeds 16] [--samples 2]

1. Evaluate the base model: mean env reward over held-out seeds (never trained
   on), ``--samples`` sampled episodes per seed at the training temperature.
2. Train a LoRA adapter with ``trace_gym.train.train`` for ``--steps`` steps on the
   training seeds.
3. Evaluate base + adapter on the same held-out seeds with the same sampling seeds.

Prints both means with 95% bootstrap confidence intervals (resampling seeds) and
the paired difference with its interval.  Without ``--env`` the task is a built-in
one-turn env, "say the word X" (half the reward for saying the word, half for
saying little else), on which the base model is mediocre, so there is room to move.
Any registered text env works with ``--env`` (capability envs included).  The
numbers are what they are: a few CPU steps are a smoke test of learning, not a
result about the method.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from trace_gym.core import ToolEnv, ToolSet  # noqa: E402
from trace_gym.core.env import Episode  # noqa: E402

WORDS = ["apple", "river", "stone", "cloud", "ember", "maple", "orbit", "tulip", "amber", "cedar", "delta", "frost"]


class SayWordEnv(ToolEnv):
    """One turn: the user asks for a word; 0.5 for saying it, up to 0.5 more for saying little else."""

    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=1, **kwargs)
        self.word = ""

    def _start(self, options: dict[str, Any]) -> Episode:
        self.word = WORDS[int(self.np_random.integers(len(WORDS)))]
        return Episode("You are a helpful assistant.", ToolSet(), [{"role": "user", "content": f"Reply with just the word {self.word}."}])

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("answered")
        return []

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        text = next((m.get("content") or "" for m in reversed(self.transcript()) if m["role"] == "assistant"), "")
        said = float(self.word in text.lower())
        words = len(text.split())
        brevity = max(0.0, 1.0 - max(0, words - 1) / 10)
        return round(0.5 * said + 0.5 * said * brevity, 4), {"said": said, "words": words}


DEFAULT_ENV = "trace-bench/say-word-short-v0"
if DEFAULT_ENV not in gym.registry:
    gym.register(id=DEFAULT_ENV, entry_point=SayWordEnv)


def bootstrap_ci(values: np.ndarray, n: int = 5000, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(n, len(values)))
    means = values[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def evaluate(model: Any, tok: Any, env_id: str, seeds: list[int], samples: int, a: argparse.Namespace) -> np.ndarray:
    """Mean reward per held-out seed (``samples`` sampled episodes each, fixed sampling seed)."""
    import torch

    from trace_gym.train.chat import ChatRenderer
    from trace_gym.train.episodes import EpisodeRequest, run_token_episodes
    from trace_gym.train.trainer import make_env_factory

    renderer = ChatRenderer(tok)
    eos = tok.eos_token_id
    model.eval()

    def generate(prompts: list[list[int]], max_new: int) -> list[list[int]]:
        width = max(map(len, prompts))
        ids = torch.full((len(prompts), width), tok.pad_token_id or eos, dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            att[i, width - len(p):] = 1
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=att, max_new_tokens=max_new, do_sample=True,
                                 temperature=a.temperature, top_k=0, top_p=1.0, pad_token_id=tok.pad_token_id or eos)
        rows = []
        for row in out[:, width:].tolist():
            rows.append(row[: row.index(eos) + 1] if eos in row else row)
        return rows

    torch.manual_seed(12345)
    requests = [EpisodeRequest(s) for s in seeds for _ in range(samples)]
    eps = []
    for i in range(0, len(requests), a.eval_batch):
        eps += run_token_episodes(make_env_factory(env_id), requests[i : i + a.eval_batch], renderer, generate,
                                  stop_texts=[tok.eos_token], max_new_tokens_per_turn=a.max_tokens,
                                  max_completion_length=a.max_completion)
    rewards = np.array([e.reward for e in eps]).reshape(len(seeds), samples)
    return rewards.mean(axis=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default=DEFAULT_ENV)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--seeds-per-step", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=32, help="tokens per agent turn")
    p.add_argument("--max-completion", type=int, default=256)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--eval-seeds", type=int, default=16)
    p.add_argument("--eval-seed-start", type=int, default=100_000, help="held-out seeds start here (training uses 0..)")
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--eval-batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    p.add_argument("--out", default=None, help="keep the adapter here (default: a temporary folder)")
    a = p.parse_args()

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    from peft import PeftModel

    from trace_gym.train import TrainConfig, train
    from trace_gym.train.models import load_model_and_tokenizer
    from trace_gym.train.trainer import make_env_factory

    held_out = list(range(a.eval_seed_start, a.eval_seed_start + a.eval_seeds))
    t0 = time.perf_counter()
    base, tok = load_model_and_tokenizer(a.model)
    before = evaluate(base, tok, a.env, held_out, a.samples, a)
    t_eval = time.perf_counter() - t0

    tmp = tempfile.TemporaryDirectory()
    out = a.out or os.path.join(tmp.name, "adapters", "learning_cpu")
    cfg = TrainConfig(env_id=a.env, model=a.model, out=out, max_steps=a.steps, num_generations=a.generations,
                      seeds_per_step=a.seeds_per_step, learning_rate=a.lr, lora_r=a.lora_r, lora_alpha=2 * a.lora_r,
                      max_new_tokens_per_turn=a.max_tokens, max_completion_length=a.max_completion, temperature=a.temperature,
                      num_train_seeds=max(64, a.steps * a.seeds_per_step), progress=False, manifest=a.out is not None)
    t1 = time.perf_counter()
    result = train(cfg, model=base, tokenizer=tok, env_factory=make_env_factory(a.env))
    t_train = time.perf_counter() - t1

    fresh, tok2 = load_model_and_tokenizer(a.model)
    tuned = PeftModel.from_pretrained(fresh, out)
    after = evaluate(tuned, tok2, a.env, held_out, a.samples, a)
    diff = after - before
    lo_b, hi_b = bootstrap_ci(before)
    lo_a, hi_a = bootstrap_ci(after)
    lo_d, hi_d = bootstrap_ci(diff)
    print(f"env={a.env} model={a.model} steps={result.steps} G={a.generations} lr={a.lr} lora_r={a.lora_r}")
    print(f"env rollouts consumed in training: {result.rollouts}  (stats: {result.rollout_stats})")
    print(f"training reward per step: {', '.join(f'{r:.3f}' for _, r in result.reward_curve)}")
    print(f"held-out seeds: {len(held_out)} x {a.samples} samples at temperature {a.temperature}")
    print(f"mean reward before: {before.mean():.3f}  95% CI [{lo_b:.3f}, {hi_b:.3f}]")
    print(f"mean reward after : {after.mean():.3f}  95% CI [{lo_a:.3f}, {hi_a:.3f}]")
    print(f"paired difference : {diff.mean():+.3f}  95% CI [{lo_d:+.3f}, {hi_d:+.3f}]"
          + ("  (CI excludes 0)" if lo_d > 0 or hi_d < 0 else "  (CI includes 0: no detectable change)"))
    print(f"time: eval {t_eval:.0f}s, train {t_train:.0f}s ({t_train / max(1, result.steps):.1f}s/step)")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
