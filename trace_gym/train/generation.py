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


def transformers_generate_fn(trainer: Any, *, prefix_cache: bool = True, min_prefix_tokens: int = 16):
    """A ``GenerateFn`` that samples with the trainer's (LoRA) model and its generation config.

    With ``prefix_cache`` the keys and values of tokens already seen are reused
    (:class:`~trace_gym.policies.prefix_cache.PrefixKVCache`, the cache the policy
    uses too): the prefix a batch's episodes share is run once, and each episode's
    next turn starts from the cache of its previous one.  The samples are the ones
    the uncached call draws: the same model inputs at the same positions, the same
    random draws.  The cache lives as long as the returned function, which the
    rollout function makes afresh for each batch of rollouts (the weights change
    between batches).
    """
    import torch
    from trl.models import unwrap_model_for_generation

    from ..policies.prefix_cache import PrefixKVCache, cache_argument
    from .shared_prefix import supported

    tok = trainer.processing_class
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else stop_token_ids(trainer)[0]
    stops = set(stop_token_ids(trainer))
    device = trainer.accelerator.device
    use_cache = prefix_cache and supported()
    state: dict[str, Any] = {"store": None}

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
            extra: dict[str, Any] = {}
            # A cache the generation config asks for (e.g. static) is generate's own to build.
            if use_cache and getattr(config, "cache_implementation", None) is None:
                if state["store"] is None or state["store"].model is not model:
                    state["store"] = PrefixKVCache(min_tokens=min_prefix_tokens, max_entries=4 * len(prompts) + 4)
                cache = _prefilled_cache(state["store"], model, prompts, width, device)
                if cache is not None:
                    extra[cache_argument(model)] = cache
                config.return_dict_in_generate = True
            out = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device), generation_config=config, **extra)
        cached = not isinstance(out, torch.Tensor)
        sequences = out.sequences if cached else out
        new = [_cut_after_stop(row, stops) for row in sequences[:, width:].cpu().tolist()]
        if cached and state["store"] is not None:
            _store_rows(state["store"], model, prompts, new, width, getattr(out, "cache", None) or getattr(out, "past_key_values", None))
        return new

    generate.prefix_state = state  # type: ignore[attr-defined]
    return generate


def _prefilled_cache(store: Any, model: Any, prompts: list[list[int]], width: int, device: Any) -> Any:
    """A cache holding, for each left-padded row, the keys/values of its known leading tokens.

    Row ``i`` (``pad_i`` padding columns) has the columns ``[0, c)`` cached, where ``c``
    is the same for all rows; its columns before ``pad_i`` are padding (masked, left
    zero) and the rest come from the store.  ``None`` when nothing is known.
    """
    from ..policies.prefix_cache import make_cache, stack_prefixes

    found = store.row_prefixes(model, prompts, device)
    known = [n for n, _ in found]
    c = width - max(len(p) - n for p, n in zip(prompts, known, strict=True))
    if c <= 0:
        return None
    # Row i's real tokens in the cached columns: c - pad_i of them (<= its known n by the choice of c).
    placements = [(width - len(p), c - (width - len(p))) for p in prompts]
    return make_cache(model, stack_prefixes(found, c, placements))


def _store_rows(store: Any, model: Any, prompts: list[list[int]], new: list[list[int]], width: int, cache: Any) -> None:
    """Keep each row's prompt and sampled turn (as far as their keys/values were computed) for its next turn."""
    if cache is None or not getattr(cache, "layers", None):
        return
    total = cache.layers[0].keys.shape[-2]
    fed = total - width  # sampled tokens fed back through the model
    rows, columns = [], []
    for p, out in zip(prompts, new, strict=True):
        g = max(0, min(len(out), fed))
        rows.append(list(p) + list(out[:g]))
        columns.append(range(width - len(p), width + g))
    store.store_batch(model, rows, cache, columns)


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
