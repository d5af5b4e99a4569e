"""GRPO's sampler on vLLM: the rollout function's turns through TRL's vLLM generation (``trainer.vllm_generation``).

TRL's ``GRPOTrainer(use_vllm=True)`` owns the engine: in ``colocate`` mode a vLLM ``LLM`` in the
training process, in ``server`` mode a ``vllm serve`` process it talks to.  This module adapts
it to trace-gym's multi-turn episodes:

* :func:`vllm_generate_fn` samples each agent turn with the same per-turn token limit, stop
  strings and end-of-turn tokens as the transformers sampler (vLLM stops the turn itself, so a
  512-token turn costs at most 512 tokens, not the episode's whole ``max_completion_length``)
  and returns vLLM's log-prob of every sampled token, which TRL's importance-sampling
  correction compares with the trained model's;
* :func:`awake` keeps a sleeping colocated engine (``vllm_enable_sleep_mode``) awake for the
  turns of one batch of rollouts and puts it back to sleep afterwards (TRL's own generate call
  sleeps after every call, which would re-send the weights at every turn);
* :func:`install_weight_sync` makes TRL send the LoRA merged into a new copy of each adapted
  weight instead of merging into the base weights and subtracting again in place (which
  rounds the base weights a little differently at every sync, bfloat16 most);
* :func:`release_vllm` frees a trainer's engine, so that a later training in the same process
  (a comparison trains several) starts on a clean GPU;
* :func:`grpo_vllm_arguments` turns a :class:`~trace_gym.train.config.TrainConfig`'s ``vllm_*``
  settings into TRL's ``GRPOConfig`` keywords.

Nothing here imports vLLM at module load; the engine is TRL's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .episodes import Sampled
from .generation import _limits, stop_token_ids

__all__ = ["awake", "grpo_vllm_arguments", "install_weight_sync", "needs_lockstep", "release_vllm", "vllm_context",
           "vllm_generate_fn"]


def grpo_vllm_arguments(cfg: Any) -> dict[str, Any]:
    """``GRPOConfig`` keywords for ``cfg``'s ``vllm_*`` settings (a run that samples with vLLM)."""
    kwargs: dict[str, Any] = dict(
        vllm_mode=cfg.vllm_mode,
        vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
        vllm_max_model_length=cfg.vllm_max_model_length,
        vllm_enable_sleep_mode=cfg.vllm_enable_sleep_mode,
        vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
        vllm_importance_sampling_correction=cfg.vllm_importance_sampling != "off",
    )
    if cfg.vllm_importance_sampling != "off":
        kwargs["vllm_importance_sampling_mode"] = cfg.vllm_importance_sampling
    if cfg.vllm_server_base_url:
        kwargs["vllm_server_base_url"] = cfg.vllm_server_base_url
    return kwargs


def vllm_context(trainer: Any) -> int | None:
    """The longest sequence (prompt and sampled tokens) the trainer's vLLM engine takes, when known."""
    gen = trainer.vllm_generation
    if getattr(gen, "max_model_length", None):
        return int(gen.max_model_length)
    llm = getattr(gen, "llm", None)  # colocate: the engine's own (from the model's config when not set)
    try:
        return int(llm.llm_engine.model_config.max_model_len)
    except (AttributeError, TypeError, ValueError):
        return None


def vllm_generate_fn(trainer: Any, stop_strings: tuple[str, ...] = ()):
    """A ``GenerateFn`` over TRL's vLLM generation; it returns :class:`~trace_gym.train.episodes.Sampled` rows.

    Each call asks vLLM for at most the largest of the rows' token limits, to stop at the
    trainer's end-of-turn tokens (kept, as the loss must learn to stop) and right after any of
    ``stop_strings`` (kept too), then cuts each row at its own limit and at the first place
    where :class:`~trace_gym.policies.decoding.StopRule` ends a turn: the turns the
    transformers sampler would end.  The log-prob of each kept token is vLLM's (sampled
    token only).  The weights are the trainer's to sync (TRL does before each rollout call).
    """
    from ..policies.decoding import StopRule

    gen = trainer.vllm_generation
    stops = stop_token_ids(trainer)
    rule = StopRule(trainer.processing_class, stops, stop_strings)
    extra: dict[str, Any] = {"stop_token_ids": list(stops), "include_stop_str_in_output": True}
    if stop_strings:
        extra["stop"] = list(stop_strings)

    def generate(prompts: list[list[int]], max_new_tokens: int | list[int]) -> Sampled:
        limits = _limits(max_new_tokens, len(prompts))
        saved = gen.max_completion_length, gen.generation_kwargs
        gen.max_completion_length = max(limits, default=1)
        gen.generation_kwargs = {**(saved[1] or {}), **extra}
        try:
            _, completion_ids, logprobs, _ = gen.generate(prompts=prompts, images=None, num_generations=1)
        finally:
            gen.max_completion_length, gen.generation_kwargs = saved
        rows, lps = [], []
        for r, (ids, n) in enumerate(zip(completion_ids, limits, strict=True)):
            ids = list(ids)[:n]
            for i in range(len(ids)):
                if rule.ends(ids[: i + 1]):
                    ids = ids[: i + 1]
                    break
            row_lp = [lp[0] if isinstance(lp, list | tuple) else lp for lp in logprobs[r]] if logprobs is not None else []
            rows.append(ids)
            lps.append(row_lp[: len(ids)] if logprobs is not None else [None] * len(ids))
        return Sampled(rows, lps)

    return generate


@contextmanager
def awake(trainer: Any) -> Iterator[None]:
    """Keep a sleeping colocated engine awake for the duration (one batch of rollouts: all its turns).

    With ``vllm_enable_sleep_mode`` TRL's generate call wakes the engine, samples and puts it to
    sleep at level 2 (weights and KV cache freed), so the next call must receive every weight
    again: once per turn here.  Inside this context the engine is woken once (its weights
    synced if they were freed) and sleeps again at the end.  Without sleep mode, or in server
    mode, it does nothing.
    """
    gen = getattr(trainer, "vllm_generation", None)
    if gen is None or getattr(gen, "mode", None) != "colocate" or not getattr(gen, "enable_sleep_mode", False):
        yield
        return
    if getattr(gen, "_llm_weights_sleeping", False):
        gen.sync_weights()  # wakes the weights and loads the current ones
    gen.llm.wake_up(tags=["kv_cache"])
    gen.enable_sleep_mode = False  # TRL's generate leaves the engine awake between the turns
    try:
        yield
    finally:
        gen.enable_sleep_mode = True
        gen.llm.sleep(level=2)
        gen._llm_weights_sleeping = True


def needs_lockstep(trainer: Any) -> bool:
    """Whether the processes of this run must sample in lock step: more than one process, and a sampler that
    is a collective (vLLM in server mode gathers every process's prompts at each call, colocated tensor
    parallelism gathers its group's; ``generate`` on a DeepSpeed/FSDP-sharded model gathers weights)."""
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None or getattr(accelerator, "num_processes", 1) <= 1:
        return False
    if getattr(trainer, "use_vllm", False):
        gen = trainer.vllm_generation
        return getattr(gen, "mode", "colocate") == "server" or getattr(gen, "tensor_parallel_size", 1) > 1
    return bool(getattr(trainer, "is_deepspeed_enabled", False) or getattr(trainer, "is_fsdp_enabled", False))


def install_weight_sync(trainer: Any) -> bool:
    """Make TRL's weight sync send merged weights without touching the trained model's; whether it did.

    TRL's sync merges the LoRA into the base weights, reads them and unmerges in place, which
    changes the base weights by a rounding error at every sync.  Here each adapted layer's
    weight is sent as ``W + scale·BA`` computed into a new tensor, one layer at a time
    (:func:`~trace_gym.policies.lora_merge.iter_merged_weights`), under the names vLLM loads.
    Runs whose model is sharded (DeepSpeed ZeRO-3, FSDP) or whose adapter is not a plain weight
    delta keep TRL's own sync (``False``).
    """
    from ..policies.lora_merge import lora_layers, mergeable

    gen = getattr(trainer, "vllm_generation", None)
    model = getattr(gen, "model", None)
    active = getattr(model, "active_adapter", None)
    if (gen is None or not hasattr(model, "peft_config") or not isinstance(active, str) or not mergeable(model, [active])
            or getattr(trainer, "is_deepspeed_enabled", False) or getattr(trainer, "is_fsdp_enabled", False)):
        return False
    if not hasattr(gen, "_iter_named_params"):
        raise RuntimeError("TRL's VLLMGeneration has no _iter_named_params: install the TRL version trace-gym pins "
                           "(see pyproject.toml)")
    layers = dict(lora_layers(model))
    gen._iter_named_params = lambda: _merged_named_params(model, active, layers)
    return True


def _merged_named_params(model: Any, active: str, layers: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(vLLM name, tensor)`` of every base-model parameter, each LoRA layer's weight merged out of place."""
    from ..policies.lora_merge import merged_weight

    for name, param in model.base_model.model.named_parameters():
        if "lora_" in name or "original_module" in name:
            continue
        name = name.replace(".modules_to_save." + active + ".", ".").replace("_checkpoint_wrapped_module.", "")
        if name.endswith(".base_layer.weight") and name[: -len(".base_layer.weight")] in layers:
            path = name[: -len(".base_layer.weight")]
            yield path + ".weight", merged_weight(layers[path], active)
            continue
        yield name.replace(".base_layer.", "."), param.data


def release_vllm(trainer: Any) -> None:
    """Free the trainer's vLLM engine (colocate) or its weight-update link (server), and its sampler copies.

    vLLM does not free an engine when the trainer goes away: the engine's distributed state
    stays registered and its memory cached.  Here the engine is dropped, vLLM's model-parallel
    groups are destroyed (and, in a single-process run, its distributed environment), and the
    device cache is emptied, so the next training in the same process starts its own engine on
    a clean GPU.  Safe to call twice, or on a trainer without vLLM.
    """
    if hasattr(trainer, "_trace_gym_sampler"):
        trainer._trace_gym_sampler = None  # the transformers sampler's merged copy of the model
    gen = getattr(trainer, "vllm_generation", None)
    if gen is None:
        return
    client = getattr(gen, "vllm_client", None)
    if client is not None and hasattr(client, "close_communicator"):
        try:
            client.close_communicator()
        except Exception:  # the server may be gone already; nothing to free on this side then
            pass
    had_engine = getattr(gen, "llm", None) is not None
    gen.llm = None
    gen.model = None
    trainer.vllm_generation = None
    gc.collect()
    if had_engine:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        accelerator = getattr(trainer, "accelerator", None)
        if accelerator is None or getattr(accelerator, "num_processes", 1) <= 1:
            destroy_distributed_environment()  # vLLM's own process group of one (TRL's colocate mode made it)
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
