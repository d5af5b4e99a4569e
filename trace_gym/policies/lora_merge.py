"""LoRA adapters as merged weights: ``W + scale·BA`` computed once, so a forward costs what the base model's does.

Both adapter-serving paths use it: :class:`~trace_gym.route.policy.AdapterPolicy` (inference,
one weight set per adapter swapped into the plain model) and the GRPO rollout sampler
(:func:`trace_gym.train.generation.transformers_generate_fn`: a plain copy of the model whose
adapted weights are refreshed from the trained adapter before each batch of rollouts).
The delta is PEFT's own (``get_delta_weight``), added in the weight's dtype, which is what
PEFT's ``merge`` writes.  ``torch`` and ``peft`` are imported lazily.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lora_layers", "mergeable", "merged_weights"]


def lora_layers(peft_model: Any) -> list[tuple[str, Any]]:
    """``(path, layer)`` of every LoRA layer of a PEFT model; paths are relative to the wrapped model."""
    from peft.tuners.lora import LoraLayer

    return [(path, m) for path, m in peft_model.base_model.model.named_modules() if isinstance(m, LoraLayer)]


def mergeable(peft_model: Any, names: list[str]) -> bool:
    """Whether every adapter in ``names`` is a plain delta on its layers' ``weight`` (no DoRA magnitude, no LoRA bias)."""
    for n in names:
        config = getattr(peft_model, "peft_config", {}).get(n)
        if config is None or getattr(config, "use_dora", False) or getattr(config, "lora_bias", False):
            return False
    return all(hasattr(m.get_base_layer(), "weight") for _, m in lora_layers(peft_model))


def merged_weights(peft_model: Any, name: str | None) -> dict[str, Any]:
    """Each LoRA layer's merged weight for adapter ``name`` (``None``: its original weight, shared, not copied)."""
    import torch

    out: dict[str, Any] = {}
    with torch.no_grad():
        for path, layer in lora_layers(peft_model):
            weight = layer.get_base_layer().weight.data
            has = name is not None and (name in getattr(layer, "lora_A", {}) or name in getattr(layer, "lora_embedding_A", {}))
            out[path] = weight + layer.get_delta_weight(name).to(weight.dtype) if has else weight
    return out
