"""A memory estimate of one GRPO run, printed before it starts: does the run fit its device, and what to change.

The estimate is arithmetic on the model's configuration and the run's settings, not a
measurement; its terms, per device:

* **weights**: the loaded model's parameters as they are in memory (their dtype);
* **trainable**: the LoRA parameters, their gradients and AdamW's two states (float32);
* **sampler copy**: the transformers sampler's merged copy of the model (GRPO without vLLM or
  llama.cpp, one process, unsharded: :func:`~trace_gym.train.generation.sampler_model`);
* **activations**: the loss's forward and backward over one batch, ``B`` sequences of up to
  ``T = prompt + max_completion_length`` tokens.  Per layer and token a decoder layer keeps
  about ``(8·hidden + 3·intermediate)`` values for its backward (attention by SDPA or flash,
  no ``T × T`` scores); with activation checkpointing each layer keeps only its input
  (``hidden`` values) and one layer's activations are rebuilt at a time.  The shared prompt
  prefix is counted once per sequence (an upper bound: sharing saves more);
* **logits**: ``lm_head=full`` keeps ``B × completion × vocabulary × 12`` bytes; TRL's fused
  head keeps one chunk (not counted);
* **vLLM**: a colocated engine takes ``vllm_gpu_memory_utilization`` of the device (its
  weights and KV cache); with sleep mode it gives that back while the loss runs, so the peak
  is the larger of sampling (weights, trainable, vLLM) and training (all but vLLM).

The figure says nothing about memory fragmentation or CUDA's own context (about 0.5 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MemoryEstimate", "device_memory", "estimate_memory", "plan_memory"]

GIB = 1024**3


@dataclass
class MemoryEstimate:
    """Bytes per term (see the module docstring), the peak, and the device's memory when known."""

    weights: int
    trainable: int
    sampler_copy: int
    activations: int
    logits: int
    vllm: int
    peak: int
    sequences: int
    tokens: int
    checkpointing: bool
    device: str
    device_total: int | None = None
    advice: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool | None:
        return None if self.device_total is None else self.peak <= self.device_total

    def line(self) -> str:
        """One line for the terminal."""
        parts = [f"weights {self.weights / GIB:.1f}", f"LoRA + optimizer {self.trainable / GIB:.2f}"]
        if self.sampler_copy:
            parts.append(f"sampler copy {self.sampler_copy / GIB:.1f}")
        parts.append(f"activations {self.activations / GIB:.1f}")
        if self.logits:
            parts.append(f"logits {self.logits / GIB:.1f}")
        if self.vllm:
            parts.append(f"vLLM {self.vllm / GIB:.1f}")
        text = (f"memory estimate on {self.device} ({self.sequences} sequences x up to {self.tokens:,} tokens, "
                f"checkpointing {'on' if self.checkpointing else 'off'}): {', '.join(parts)} GiB; peak {self.peak / GIB:.1f} GiB")
        if self.device_total is not None:
            text += f" of {self.device_total / GIB:.1f} GiB" + ("" if self.fits else ": does not fit")
        if self.advice:
            text += " (" + "; ".join(self.advice) + ")"
        return text


def estimate_memory(cfg: Any, model: Any, *, device: str, prompt_tokens: int, use_vllm: bool, sampler_copy: bool,
                    sequences: int, device_total: int | None = None) -> MemoryEstimate:
    """The estimate for ``cfg`` training ``model`` (the LoRA-wrapped model, loaded) on ``device``.

    ``prompt_tokens``: a typical episode's prompt (the probe episode's); ``sequences``: the
    sequences of one forward and backward; ``sampler_copy``: whether the transformers sampler
    keeps a merged copy; ``device_total``: the device's memory in bytes (``None``: unknown).
    """
    conf = getattr(model, "config", None)
    hidden = int(getattr(conf, "hidden_size", 0) or 0)
    inter = int(getattr(conf, "intermediate_size", 0) or 4 * hidden)
    layers = int(getattr(conf, "num_hidden_layers", 0) or 0)
    vocab = int(getattr(conf, "vocab_size", 0) or 0)
    params = list(model.parameters())
    weights = sum(p.numel() * p.element_size() for p in params if not p.requires_grad)
    trained = sum(p.numel() for p in params if p.requires_grad)
    trainable = trained * 16  # float32 weights, gradients and AdamW's two states
    # activations are in the frozen weights' dtype (PEFT keeps the LoRA parameters in float32)
    act_bytes = max((p.element_size() for p in params if p.is_floating_point() and not p.requires_grad), default=4)
    tokens = int(prompt_tokens) + int(cfg.max_completion_length)
    checkpointing = cfg.gradient_checkpointing is not False
    per_layer = sequences * tokens * (8 * hidden + 3 * inter) * act_bytes
    if checkpointing:
        activations = layers * sequences * tokens * hidden * act_bytes + per_layer
    else:
        activations = layers * per_layer
    logits = sequences * int(cfg.max_completion_length) * vocab * 12 if cfg.lm_head == "full" else 0
    copy = weights + trained * act_bytes if sampler_copy else 0
    vllm = 0
    if use_vllm and cfg.vllm_mode == "colocate" and device_total is not None:
        vllm = int(cfg.vllm_gpu_memory_utilization * device_total)
    training = weights + trainable + copy + activations + logits
    peak = max(training, weights + trainable + vllm) if cfg.vllm_enable_sleep_mode else training + vllm
    est = MemoryEstimate(weights, trainable, copy, activations, logits, vllm, peak, sequences, tokens, checkpointing,
                         device, device_total)
    if est.fits is False:
        if not checkpointing:
            est.advice.append("turn gradient_checkpointing on")
        if vllm and not cfg.vllm_enable_sleep_mode:
            est.advice.append("vllm_enable_sleep_mode=true frees vLLM's share during the update")
        if sequences > 1:
            est.advice.append("a smaller micro_batch_size")
        est.advice.append("a shorter max_completion_length")
    return est


def plan_memory(cfg: Any, model: Any, *, device: str, prompt_tokens: int, use_vllm: bool, sampler_copy: bool,
                device_total: int | None) -> MemoryEstimate:
    """The estimate at the run's micro-batch: ``cfg.micro_batch_size`` when set; else, on a device whose memory
    is known, the largest divisor of the step's batch (``seeds_per_step × num_generations`` sequences) whose
    estimate fits (1 when none does); else the whole batch.  ``est.sequences`` is the micro-batch chosen."""
    batch = cfg.seeds_per_step * cfg.num_generations
    if cfg.micro_batch_size:
        sizes = [cfg.micro_batch_size]
    elif device_total is None:
        sizes = [batch]
    else:
        sizes = [m for m in range(batch, 0, -1) if batch % m == 0]
    for m in sizes:
        est = estimate_memory(cfg, model, device=device, prompt_tokens=prompt_tokens, use_vllm=use_vllm,
                              sampler_copy=sampler_copy, sequences=m, device_total=device_total)
        if est.fits is not False:
            break
    return est


def device_memory(device: str) -> int | None:
    """The device's total memory in bytes (CUDA), else ``None``."""
    if device != "cuda":
        return None
    import torch

    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
