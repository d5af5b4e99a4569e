"""LoRA adapters as merged weights: ``W + scale·BA`` computed once, so a forward costs what the base model's does.

Both adapter-serving paths use it: :class:`~trace_gym.route.policy.AdapterPolicy` (inference,
one weight set per adapter swapped into the plain model) and the GRPO rollout samplers
(:func:`trace_gym.train.generation.transformers_generate_fn`: a plain copy of the model whose
adapted weights are refreshed from the trained adapter before each batch of rollouts; and
:mod:`trace_gym.train.vllm`, which sends the merged weights to vLLM one layer at a time).
Each merged weight is a new tensor: the base weight is never changed, so merging again and
again does not drift.
The delta is PEFT's own (``get_delta_weight``), added in the weight's dtype, which is what
PEFT's ``merge`` writes.  ``torch`` and ``peft`` are imported lazily.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lora_layers", "mergeable", "merged_weight", "merged_weights"]


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


def merged_weight(layer: Any, name: str | None) -> Any:
    """One LoRA layer's weight with adapter ``name`` added, as a new tensor in the weight's dtype (``None``, or an
    adapter the layer does not hold: the base weight itself, shared, not copied)."""
    import torch

    weight = layer.get_base_layer().weight.data
    if name is None or not (name in getattr(layer, "lora_A", {}) or name in getattr(layer, "lora_embedding_A", {})):
        return weight
    with torch.no_grad():
        return weight + layer.get_delta_weight(name).to(weight.dtype)


def merged_weights(peft_model: Any, name: str | None) -> dict[str, Any]:
    """Each LoRA layer's merged weight for adapter ``name`` (:func:`merged_weight`; ``None``: its original weight)."""
    return {path: merged_weight(layer, name) for path, layer in lora_layers(peft_model)}
