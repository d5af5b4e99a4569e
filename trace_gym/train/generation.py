"""Sampling back ends for the rollout function: trace-gym's decoding loop, transformers ``generate`` and llama.cpp
(vLLM's is :mod:`trace_gym.train.vllm`).

Each takes the token ids of several partial episodes and a token limit (one for all, or
one per episode: the room its context has left) and returns the ids each one sampled
for its next turn, with everything after the first end-of-turn token removed (the token
itself is kept, as the loss must learn to stop).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

__all__ = ["LlamaCppSampler", "fast_sampling", "sampler_model", "stop_token_ids", "trainer_pick",
           "transformers_generate_fn"]


def stop_token_ids(trainer: Any) -> list[int]:
    ids = getattr(trainer, "eos_token_ids", None)
    if ids:
        return [int(i) for i in ids]
    eos = trainer.processing_class.eos_token_id
    return [int(eos)] if eos is not None else []


def _limits(max_new_tokens: int | list[int], rows: int) -> list[int]:
    """One token limit per row (a ``GenerateFn`` takes one for all rows or one each)."""
    limits = [int(max_new_tokens)] * rows if isinstance(max_new_tokens, int) else [int(n) for n in max_new_tokens]
    if len(limits) != rows:
        raise ValueError(f"{len(limits)} token limits for {rows} prompts")
    return limits


def _cut_after_stop(ids: list[int], stops: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in stops:
            return ids[: i + 1]
    return ids


def fast_sampling(trainer: Any) -> bool:
    """Whether the trainer's sampling can run on trace-gym's own decoding loop over merged weights:
    one process (no DeepSpeed/FSDP sharding), and a generation config of temperature, top-k,
    top-p and min-p only (a repetition penalty, a cache implementation or extra generation
    kwargs go to ``generate``)."""
    args = trainer.args
    if getattr(trainer, "is_deepspeed_enabled", False) or getattr(trainer, "is_fsdp_enabled", False):
        return False
    if getattr(args, "generation_kwargs", None) or getattr(args, "cache_implementation", None):
        return False
    penalty = getattr(trainer, "repetition_penalty", 1.0)
    return penalty in (None, 1.0)


def trainer_pick(trainer: Any) -> Any:
    """``pick(logits, idx)``: one token per row, drawn with the trainer's temperature, top-k, top-p and min-p."""
    from ..policies.decoding import pick_tokens

    settings = {"temperature": float(getattr(trainer, "temperature", 1.0) or 1.0),
                "top_k": int(getattr(trainer, "top_k", 0) or 0), "top_p": float(getattr(trainer, "top_p", 1.0) or 1.0),
                "min_p": getattr(trainer, "min_p", None)}
    return lambda logits, idx: pick_tokens(logits, **settings)


def sampler_model(trainer: Any) -> Any:
    """A plain (un-wrapped) model with the trainer's current weights, LoRA merged in, for sampling.

    Made once per trainer (a copy of the model: one more model's memory) and refreshed from
    the trained adapter at every call, so each batch of rollouts samples from the current
    policy at the base model's speed.  A model that is not a PEFT LoRA model (or one whose
    adapter is not a plain weight delta) samples as it is.
    """
    import torch

    from ..policies.lora_merge import mergeable, merged_weights

    model = trainer.accelerator.unwrap_model(trainer.model)
    active = getattr(model, "active_adapter", None)
    if not hasattr(model, "merge_and_unload") or not isinstance(active, str) or not mergeable(model, [active]):
        return model
    sampler = getattr(trainer, "_trace_gym_sampler", None)
    if sampler is None:
        sampler = copy.deepcopy(model).merge_and_unload()
        sampler.requires_grad_(False)
        sampler.eval()
        if getattr(sampler.config, "use_cache", None) is False:
            sampler.config.use_cache = True
        trainer._trace_gym_sampler = sampler
        return sampler
    with torch.no_grad():
        for path, weight in merged_weights(model, active).items():
            sampler.get_submodule(path).weight.data.copy_(weight)
        for name, param in model.base_model.model.named_parameters():  # trained modules outside LoRA (modules_to_save)
            if param.requires_grad and "lora_" not in name:
                sampler.get_parameter(name.replace(f".modules_to_save.{active}", "")).data.copy_(param.data)
    return sampler


def transformers_generate_fn(trainer: Any, *, prefix_cache: bool = True, min_prefix_tokens: int = 16,
                             stop_strings: tuple[str, ...] = (), lookahead: int = 8):
    """A ``GenerateFn`` that samples from the trainer's (LoRA) model with its sampling settings.

    Where :func:`fast_sampling` allows, turns are sampled by the one decoding loop
    (:func:`~trace_gym.policies.decoding.decode_rows`) over :func:`sampler_model` (merged
    weights), drawing from torch's global generator, checking ``lookahead`` prompt-lookup
    drafts per forward, and stop at an end-of-turn token or right after one of
    ``stop_strings`` (the call format's closing tag); otherwise by the
    model's ``generate`` (end-of-turn tokens only).  With ``prefix_cache`` the keys and
    values of tokens already seen are reused
    (:class:`~trace_gym.policies.prefix_cache.PrefixKVCache`, the policy's cache too): the
    prefix a batch's episodes share is run once, and each episode's next turn starts from
    the cache of its previous one.  Cached or not, the samples are the same.  The cache
    lives as long as the returned function, which the rollout function makes afresh for
    each batch of rollouts (the weights change between batches).
    """
    if fast_sampling(trainer):
        return _decoding_generate_fn(trainer, prefix_cache=prefix_cache, min_prefix_tokens=min_prefix_tokens,
                                     stop_strings=stop_strings, lookahead=lookahead)
    return _hf_generate_fn(trainer, prefix_cache=prefix_cache, min_prefix_tokens=min_prefix_tokens)


def _decoding_generate_fn(trainer: Any, *, prefix_cache: bool, min_prefix_tokens: int, stop_strings: tuple[str, ...],
                          lookahead: int):
    from ..policies.decoding import DecodeStats, StopRule, decode_rows
    from ..policies.prefix_cache import PrefixKVCache
    from .shared_prefix import supported

    tok = trainer.processing_class
    stops = stop_token_ids(trainer)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else stops[0]
    rule = StopRule(tok, stops, stop_strings)
    model = sampler_model(trainer)
    store = PrefixKVCache(min_tokens=min_prefix_tokens, max_entries=64) if prefix_cache and supported() else None
    state: dict[str, Any] = {"store": store, "stats": DecodeStats(), "model": model}
    pick = trainer_pick(trainer)

    def generate(prompts: list[list[int]], max_new_tokens: int | list[int]) -> list[list[int]]:
        if store is not None:
            store.max_entries = max(store.max_entries, 4 * len(prompts) + 4)
        return decode_rows(model, prompts, max_new_tokens=max_new_tokens, pick=pick,
                           stop=rule, pad_id=pad_id, prefix=store, keep_stop_token=True, lookahead=lookahead,
                           stats=state["stats"])

    generate.prefix_state = state  # type: ignore[attr-defined]
    return generate


def _hf_generate_fn(trainer: Any, *, prefix_cache: bool, min_prefix_tokens: int):
    """A ``GenerateFn`` over the model's own ``generate`` (any generation config, sharded models)."""
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

    def generate(prompts: list[list[int]], max_new_tokens: int | list[int]) -> list[list[int]]:
        limits = _limits(max_new_tokens, len(prompts))
        max_new_tokens = max(limits)
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
        new = [_cut_after_stop(row[:n], stops) for row, n in zip(sequences[:, width:].cpu().tolist(), limits, strict=True)]
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


class LlamaCppSampler:
    """GRPO's sampler in llama.cpp: ``sampler(trainer, stop_strings)`` is the ``GenerateFn`` of one rollout
    call, sampling from the trainer's current policy; the sampler owns its engine (:meth:`close` frees it).

    ``model_gguf`` is the GGUF the trained model was loaded from (its weights, its
    vocabulary).  llama.cpp runs a float copy of it (``weight_type``, as
    :class:`~trace_gym.policies.llamacpp.LlamaCppPolicy`; made once and cached) with the
    trained LoRA as it is at the call merged into its weights
    (:func:`~trace_gym.policies.gguf_weights.merge_into_float_gguf`, a private file of this sampler
    rewritten at every call): one engine with a slot per episode of a step (:attr:`engine`),
    reopened on the new weights, so each batch of rollouts samples from the current policy
    with no LoRA arithmetic per layer (a runtime LoRA costs about a third of llama.cpp's
    throughput at this size).  A group's shared prompt is prefilled once and its keys and
    values shared by the group's slots.  Tokens are drawn from the llama.cpp logits by the
    same sampler as :func:`transformers_generate_fn` (the trainer's temperature, top-k,
    top-p and min-p, torch's global generator); a turn stops at an end-of-turn token (kept:
    the loss learns to stop) or right after one of ``stop_strings``; ``lookahead`` prompt-lookup
    drafts per row and step are checked against those draws (0: off).  Settings only
    ``generate`` honours (see :func:`fast_sampling`) are a :class:`ValueError`.  The
    sampler's logits are the trained model's up to float rounding (bfloat16 weights,
    llama.cpp's kernels): the episodes are on-policy to that precision, with no importance
    correction.  Errors: :class:`~trace_gym.policies.hf_models.ModelUnavailableError` without
    ``llama-cpp-python`` or the file; :class:`ValueError` for a model whose trained
    parameters llama.cpp cannot apply as a LoRA (trained embeddings, head or whole modules, or a
    model trained without LoRA).
    """

    def __init__(self, model_gguf: str | Path, *, weight_type: str = "auto", lookahead: int = 8):
        from ..policies.decoding import DecodeStats

        self.model_gguf, self.weight_type, self.lookahead = Path(model_gguf), weight_type, int(lookahead)
        self.engine: Any = None  # the engine of the latest call (reopened at every call of a LoRA model)
        self.stats = DecodeStats()
        self.calls = 0
        self._slots = 0
        self._dir: Any = None  # the temporary folder of the merged weights

    def __call__(self, trainer: Any, stop_strings: tuple[str, ...] = ()) -> Any:
        import tempfile

        from ..policies.decoding import StopRule
        from ..policies.gguf_weights import cached_float_gguf, merge_into_float_gguf
        from ..policies.hf_models import model_cache_dir
        from ..policies.llamacpp import LlamaCppEngine

        if not fast_sampling(trainer):
            raise ValueError("backend=llamacpp samples in one process with temperature, top-k, top-p and min-p only: "
                             "drop the repetition penalty, generation_kwargs and cache_implementation (or sharding), "
                             "or use backend=transformers")
        tok = trainer.processing_class
        rule = StopRule(tok, stop_token_ids(trainer), stop_strings)
        model = trainer.accelerator.unwrap_model(trainer.model)
        batch = int(trainer.args.per_device_train_batch_size)
        peft = hasattr(model, "peft_config")
        if not peft and any(p.requires_grad for p in model.parameters()):
            raise ValueError("backend=llamacpp samples from a trained LoRA merged into the model's GGUF; this model "
                             "trains its own weights: use backend=transformers")
        if self._slots < batch:  # the first call, or a larger batch: an engine with more slots
            self._close_engine()
            self._slots = batch
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="trace-gym-sampler-")
        if peft or self.engine is None:  # the trained weights as they are now
            self._close_engine()
            # looked up again: the cache may have dropped the copy since the last call (it is then made again)
            floats = cached_float_gguf(self.model_gguf, model_cache_dir() / "llamacpp", weight_type=self.weight_type)
            path = merge_into_float_gguf(floats, model, Path(self._dir.name) / "policy.gguf") if peft else floats
            self.engine = LlamaCppEngine(path, slots=batch, share_prompts=True)
        engine, stats, lookahead = self.engine, self.stats, self.lookahead
        self.calls += 1
        pick = trainer_pick(trainer)

        def generate(prompts: list[list[int]], max_new_tokens: int | list[int]) -> list[list[int]]:
            limits = _limits(max_new_tokens, len(prompts))
            return engine.decode(prompts, max_new_tokens=limits, pick=pick, stop=rule, stats=stats,
                                 keep_stop_token=True, lookahead=lookahead)

        return generate

    def _close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def close(self) -> None:
        """Free the engine and the merged weights' folder (a later call starts them again)."""
        self._close_engine()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir, self._slots = None, 0
