"""Seconds per GRPO step: trace-gym's env-driven trainer vs a bare TRL GRPOTrainer.

Both sides train the same model with the same LoRA, batch, group size, sampling
settings and completion length on the same single-turn task ("say the word X";
reward = the word is present, plus a length term).  The bare side is TRL's
stock pipeline: a dataset of chat prompts and a reward function on the completion
text.  The trace-gym side goes through :class:`trace_gym.train.EnvRolloutFunc`:
env reset, chat-template rendering, generation, env step and env reward.

    python benchmarks/trainer_overhead.py [--model tiny|smollm2] [--steps 4] [--threads 1]

Prints the median seconds per step (first step excluded as warm-up) for each side
and their ratio; the target is a ratio of at most 1.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
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

from trace_gym.core import ToolEnv, ToolSet  # noqa: E402
from trace_gym.core.env import Episode  # noqa: E402

WORDS = ["apple", "river", "stone", "cloud", "ember", "maple", "orbit", "tulip"]
SYSTEM = "You are a helpful assistant."


def task(seed: int) -> tuple[str, str]:
    word = WORDS[seed % len(WORDS)]
    return word, f"Say the word {word}."


def score(word: str, text: str) -> float:
    return 0.5 * float(word in text.lower()) + 0.5 * min(len(text), 200) / 200


class SayWordEnv(ToolEnv):
    """The benchmark task as a one-turn env."""

    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=1, **kwargs)
        self.word = ""

    def _start(self, options: dict[str, Any]) -> Episode:
        seed = int(self.np_random.integers(1 << 30)) if options.get("seed") is None else int(options["seed"])
        self.word, prompt = task(seed)
        return Episode(SYSTEM, ToolSet(), [{"role": "user", "content": prompt}])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return super().reset(seed=seed, options={**(options or {}), "seed": seed})

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("answered")
        return []

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        text = next((m.get("content") or "" for m in reversed(self.transcript()) if m["role"] == "assistant"), "")
        return score(self.word, text), {}


ENV_ID = "trace-bench/say-word-v0"
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=SayWordEnv)


class StepTimer:
    def __init__(self):
        from transformers import TrainerCallback

        outer = self

        class _CB(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                outer._t = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                outer.times.append(time.perf_counter() - outer._t)

        self.times: list[float] = []
        self._t = 0.0
        self.callback = _CB()


def grpo_args(out: str, a: argparse.Namespace) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out, per_device_train_batch_size=a.generations * a.groups, num_generations=a.generations,
        max_completion_length=a.max_tokens, max_steps=a.steps + 1, learning_rate=1e-5, beta=0.0, epsilon=0.2,
        epsilon_high=0.28, loss_type="dapo", temperature=1.0, top_k=0, top_p=1.0, report_to="none", disable_tqdm=True,
        save_strategy="no", logging_steps=1, seed=0, use_cpu=a.device == "cpu", remove_unused_columns=False,
    )


def fresh_model(a: argparse.Namespace) -> tuple[Any, Any]:
    from trace_gym.train.config import TrainConfig
    from trace_gym.train.models import load_model_and_tokenizer, wrap_lora

    model, tok = load_model_and_tokenizer(a.model, seed=0)
    return wrap_lora(model, TrainConfig(lora_r=16, lora_alpha=32)), tok


def run_bare(a: argparse.Namespace, out: str) -> list[float]:
    from datasets import Dataset
    from trl import GRPOTrainer

    seeds = list(range(64))
    prompts = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": task(s)[1]}] for s in seeds]
    data = Dataset.from_dict({"prompt": prompts, "word": [task(s)[0] for s in seeds]})

    def reward(completions, word, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [score(w, t) for w, t in zip(word, texts, strict=True)]

    model, tok = fresh_model(a)
    timer = StepTimer()
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=grpo_args(out, a), train_dataset=data,
                          processing_class=tok, callbacks=[timer.callback])
    trainer.train()
    return timer.times


def run_trace(a: argparse.Namespace, out: str) -> list[float]:
    from trl import GRPOTrainer

    from trace_gym.train import grpo_trainer_kwargs

    model, tok = fresh_model(a)
    timer = StepTimer()
    kwargs = grpo_trainer_kwargs(ENV_ID, seeds=range(64), num_generations=a.generations, max_new_tokens_per_turn=a.max_tokens,
                                 max_completion_length=a.max_tokens, resample_constant_groups=False)
    trainer = GRPOTrainer(model=model, args=grpo_args(out, a), processing_class=tok, callbacks=[timer.callback], **kwargs)
    trainer.train()
    return timer.times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--steps", type=int, default=4, help="timed steps per side (one more is run as warm-up)")
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--groups", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch default)")
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        trace_times = run_trace(a, os.path.join(tmp, "trace"))
        bare_times = run_bare(a, os.path.join(tmp, "bare"))
    trace_s = statistics.median(trace_times[1:])
    bare_s = statistics.median(bare_times[1:])
    print(f"model={a.model} G={a.generations} groups/step={a.groups} max_tokens={a.max_tokens} timed steps={a.steps}")
    print(f"bare TRL GRPOTrainer : {bare_s:.3f} s/step  (all: {', '.join(f'{t:.2f}' for t in bare_times)})")
    print(f"trace-gym trainer    : {trace_s:.3f} s/step  (all: {', '.join(f'{t:.2f}' for t in trace_times)})")
    print(f"ratio trace-gym / bare: {trace_s / bare_s:.3f}  (target <= 1.1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
