"""A short GRPO run on one GPU with vLLM: step time and peak GPU memory (needs CUDA and the ``vllm`` extra).

Trains a LoRA adapter for a few GRPO steps on a capability env with ``backend=vllm`` (colocated engine),
then prints one JSON line: the seconds of each step, the peak memory torch allocated, the GPU's own view of
its memory at the end, and the memory estimate the trainer printed before the run
(:mod:`trace_gym.train.memory`), so the estimate can be checked against a measurement.  The model must be
on the machine (a folder, or a Hugging Face id already in its cache): the run downloads nothing.

    python benchmarks/gpu_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --out runs/gpu-grpo
    python benchmarks/gpu_grpo.py --estimate      # the memory table of docs/gpu.md (no GPU needed)

Without a CUDA GPU or without vLLM it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Qwen2.5-Instruct's architectures (their config.json), for --estimate.
QWEN25 = {
    "0.5B": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "1.5B": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "3B": dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
               num_key_value_heads=2, tie_word_embeddings=True),
    "7B": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, tie_word_embeddings=False),
}
# The gpu preset's GRPO settings (benchmarks/trace_vs_baselines.py), and a prompt of about 5k tokens.
GPU_SETTINGS = dict(num_generations=8, seeds_per_step=2, max_new_tokens_per_turn=512, max_completion_length=8192,
                    lora_r=16, lora_alpha=32)
PROMPT_TOKENS = 5000


def estimate_table(device_gib: float = 80.0) -> list[dict[str, Any]]:
    """The memory estimate of the gpu preset's settings for each Qwen2.5 size on a ``device_gib`` GPU, with the
    micro-batch the trainer would choose (models built on the meta device: no weights, no GPU)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from trace_gym.train import TrainConfig
    from trace_gym.train.memory import plan_memory
    from trace_gym.train.models import wrap_lora

    cfg = TrainConfig(**GPU_SETTINGS).validate()
    rows = []
    for size, arch in QWEN25.items():
        with torch.device("meta"):
            model = wrap_lora(AutoModelForCausalLM.from_config(Qwen2Config(**arch), dtype=torch.bfloat16), cfg)
        for sleep in (False, True):
            c = TrainConfig(**{**cfg.to_dict(), "vllm_enable_sleep_mode": sleep})
            est = plan_memory(c, model, device="cuda", prompt_tokens=PROMPT_TOKENS, use_vllm=True, sampler_copy=False,
                              device_total=int(device_gib * 1024**3))
            rows.append({"model": f"Qwen2.5-{size}", "sleep_mode": sleep, "micro_batch": est.sequences,
                         "fits": est.fits, "peak_gib": round(est.peak / 1024**3, 1), "line": est.line()})
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import TrainerCallback

    from trace_gym.train import TrainConfig, train

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []
            self.t = time.perf_counter()

        def on_step_begin(self, a, state, control, **kw):  # noqa: ANN001
            self.t = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):  # noqa: ANN001
            torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.t)

    cfg = TrainConfig(env_id=args.env, model=args.model, out=args.out, backend="vllm", max_steps=args.steps,
                      num_generations=args.num_generations, seeds_per_step=args.seeds_per_step,
                      max_new_tokens_per_turn=args.max_new_tokens, max_completion_length=args.max_completion_length,
                      vllm_gpu_memory_utilization=args.vllm_memory, vllm_enable_sleep_mode=args.sleep_mode,
                      dtype="bfloat16", progress=False, save_steps=0, plot=False, manifest=False)
    clock = StepClock()
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    res = train(cfg, callbacks=[clock])
    free, total = torch.cuda.mem_get_info()
    return {"model": args.model, "env": args.env, "gpu": torch.cuda.get_device_name(), "steps": res.steps,
            "step_seconds": [round(t, 2) for t in clock.times], "wall_seconds": round(time.perf_counter() - started, 1),
            "rollouts": res.rollouts, "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 1024**3, 2),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 1024**3, 2),
            "gpu_used_at_end_gib": round((total - free) / 1024**3, 2), "config": cfg.to_dict()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a model folder or a cached Hugging Face id")
    ap.add_argument("--env", default="trace/cap-refund-policy-v0")
    ap.add_argument("--out", default="runs/gpu-grpo")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--seeds-per-step", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--max-completion-length", type=int, default=4096)
    ap.add_argument("--vllm-memory", type=float, default=0.3, help="vllm_gpu_memory_utilization")
    ap.add_argument("--sleep-mode", action="store_true", help="vllm_enable_sleep_mode")
    ap.add_argument("--estimate", action="store_true", help="only print the memory estimate table (no GPU needed)")
    args = ap.parse_args(argv)
    if args.estimate:
        for row in estimate_table():
            print(json.dumps(row))
        return 0
    import importlib.util

    import torch

    if not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None:
        print("gpu_grpo.py needs a CUDA GPU and vLLM (pip install 'trace-gym[vllm]' with torch's CUDA build); "
              f"here: cuda={torch.cuda.is_available()}, vllm={importlib.util.find_spec('vllm') is not None}",
              file=sys.stderr)
        return 2
    print(json.dumps(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
