"""One LoRA forward and backward pass of SmolLM2-135M on this CPU: fp32 or bf16, with or without
gradient checkpointing.

Each setting runs in its own process (so peak memory is its own): a forward and backward pass over
a batch of 4 × 1,200 random tokens with the trainer's default LoRA (best of 3, seconds), then
a batched greedy decode (batch 4, 64 steps after a 300-token prompt, tokens/s).  Run it on an idle
machine: figures are wall-clock.

    python benchmarks/train_dtype.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

SETTINGS = [("float32", True), ("float32", False), ("bfloat16", True), ("bfloat16", False)]
BATCH, LENGTH, PROMPT, DECODE = 4, 1200, 300, 64


def measure(dtype_name: str, checkpointing: bool) -> dict[str, float]:
    import torch

    from trace_gym.policies import hf
    from trace_gym.train import TrainConfig
    from trace_gym.train.models import wrap_lora

    torch.manual_seed(0)
    model, _ = hf.load_smollm2(dtype=getattr(torch, dtype_name))
    model = wrap_lora(model, TrainConfig(env_id="-", model="smollm2", out="."))  # the trainer's default LoRA
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.train()
    ids = torch.randint(100, 40000, (BATCH, LENGTH))
    times = []
    for _ in range(3):
        t = time.perf_counter()
        logp = torch.log_softmax(model(input_ids=ids).logits.float(), -1)
        (-logp[:, :-1].gather(-1, ids[:, 1:, None]).mean()).backward()
        model.zero_grad()
        times.append(time.perf_counter() - t)
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.randint(100, 40000, (BATCH, PROMPT)), use_cache=True)
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t = time.perf_counter()
        for _ in range(DECODE):
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
            cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        decode = BATCH * DECODE / (time.perf_counter() - t)
    return {"fwd_bwd_s": min(times), "decode_tokens_per_s": decode,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}


def main() -> int:
    if len(sys.argv) == 3:
        print(json.dumps(measure(sys.argv[1], sys.argv[2] == "on")))
        return 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    print(f"| dtype | gradient checkpointing | forward+backward {BATCH}×{LENGTH} tokens, s | decode tokens/s | peak RSS, GB |")
    print("|---|---|---|---|---|")
    for dtype_name, ckpt in SETTINGS:
        res = subprocess.run([sys.executable, __file__, dtype_name, "on" if ckpt else "off"], env=env, check=True,
                             capture_output=True, text=True)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        print(f"| {dtype_name} | {'on' if ckpt else 'off'} | {r['fwd_bwd_s']:.1f} | {r['decode_tokens_per_s']:.1f} | "
              f"{r['peak_rss_gb']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
