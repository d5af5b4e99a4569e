"""Sampling back ends for the rollout function: transformers ``generate`` or TRL's vLLM helper.

Both take the token ids of several partial episodes and return the ids each one
sampled for its next turn, with everything after the first stop token removed
(the stop token itself is kept, as the loss must learn to stop).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["transformers_generate_fn", "vllm_generate_fn", "stop_token_ids"]


def stop_token_ids(trainer: Any) -> list[int]:
    ids = getattr(trainer, "eos_token_ids", None)
    if ids:
        return [int(i) for i in ids]
    eos = trainer.processing_class.eos_token_id
    return [int(eos)] if eos is not None else []


def _cut_after_stop(ids: list[int], stops: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in stops:
            return ids[: i + 1]
    return ids


def transformers_generate_fn(trainer: Any):
    """A ``GenerateFn`` that samples with the trainer's (LoRA) model and its generation config."""
    import torch
    from trl.models import unwrap_model_for_generation

    tok = trainer.processing_class
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else stop_token_ids(trainer)[0]
    stops = set(stop_token_ids(trainer))
    device = trainer.accelerator.device

    def generate(prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding
            input_ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attention[i, width - len(p):] = 1
        config = copy.deepcopy(trainer.generation_config)
        config.max_new_tokens = int(max_new_tokens)
        gen_kwargs = dict(getattr(trainer, "generation_kwargs", {}) or {})
        gen_kwargs["max_new_tokens"] = int(max_new_tokens)
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                generation_kwargs=gen_kwargs,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
        ):
            out = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device), generation_config=config)
        new = out[:, width:].cpu().tolist()
        return [_cut_after_stop(row, stops) for row in new]

    return generate


def vllm_generate_fn(trainer: Any):
    """A ``GenerateFn`` over TRL's vLLM generation helper (weights are synced by the trainer before each rollout call).

    vLLM's per-request length limit is the trainer's ``max_completion_length``; the
    per-turn limit is applied by truncating what comes back.
    """
    stops = set(stop_token_ids(trainer))

    def generate(prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        _, completion_ids, _, _ = trainer.vllm_generation.generate(prompts=prompts, images=None, num_generations=1)
        return [_cut_after_stop(list(ids)[:max_new_tokens], stops) for ids in completion_ids]

    return generate
