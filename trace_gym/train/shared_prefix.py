"""Compute the token prefix that several sequences share once, in the loss and in sampling.

A GRPO group is G episodes of one env seed: all G sequences open with the same
system prompt, tool listing and first user message, often thousands of tokens,
followed by a few hundred tokens of their own.  Here the rows of a batch that
start with the same tokens are grouped (:func:`plan_prefix_clusters`); each
group's common prefix is run through the model once (batch 1) and each row's own
tokens then attend to its keys and values (:func:`prefix_log_probs`).

``prefix_grad="exact"`` keeps the prefix in the autograd graph: the keys and
values are expanded over the group without copying, so backward sums the rows'
gradients into the one prefix computation and the loss, the per-token log-probs
and every gradient equal the unshared computation (up to float rounding).
``prefix_grad="detached"`` runs the prefix without gradient: cheaper, but the
prompt's keys and values no longer learn (an approximation, opt-in only).  A
single row may then "share" with itself, which makes the same function a
prompt-detached forward for supervised fine-tuning.

Positions follow the caller's convention exactly: token ``c`` of the padded row
is at position ``c`` (TRL's training forward), so rows only share a prefix when
their left padding is equal, which the rows of one GRPO group always have.

Sampling reuses prefixes through the one prefix KV cache of the project,
:class:`trace_gym.policies.prefix_cache.PrefixKVCache` (see
:func:`trace_gym.train.generation.transformers_generate_fn`).

Needs the layered cache API of transformers >= 5 (``transformers.cache_utils.DynamicLayer``
with ``cache=``); :func:`supported` says whether it is there, and callers fall
back to the plain forward when it is not.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..policies.prefix_cache import base_model as _base_model
from ..policies.prefix_cache import cache_argument, common_length

__all__ = [
    "PREFIX_GRAD_MODES", "PrefixCluster", "plan_prefix_clusters", "prefix_log_probs",
    "prefix_kv", "supported", "cache_argument", "common_length", "detached_prompt_loss", "scored_nll",
]

PREFIX_GRAD_MODES = ("exact", "detached")


def supported() -> bool:
    """Whether the installed transformers has the cache API the shared forward builds on."""
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer  # noqa: F401
    except ImportError:
        return False
    return hasattr(DynamicLayer, "get_mask_sizes")


# ----------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class PrefixCluster:
    """Rows ``rows`` share ``length`` tokens starting at column ``start`` (their common left padding)."""

    rows: tuple[int, ...]
    start: int
    length: int


def plan_prefix_clusters(
    input_ids: Any, attention_mask: Any, logits_to_keep: int, *, min_tokens: int = 16, allow_single: bool = False
) -> list[PrefixCluster]:
    """Group the rows of a left-padded batch by common prefix.

    Only tokens whose hidden states the caller does not need may be shared: those
    before column ``T - logits_to_keep - 1`` (the last prompt token's hidden state
    predicts the first scored token).  Rows are bucketed by left padding, sorted,
    and a sorted run is split at its weakest link whenever two smaller clusters save
    more tokens than one big one.  Clusters need ``min_tokens`` shared tokens and,
    unless ``allow_single``, two rows or more.  Rows in no cluster run plainly.
    """
    ids = input_ids.tolist()
    mask = attention_mask.tolist()
    width = len(ids[0]) if ids else 0
    limit = width - int(logits_to_keep) - 1
    buckets: dict[int, list[tuple[int, list[int]]]] = {}
    for r, (row, m) in enumerate(zip(ids, mask, strict=True)):
        start = next((c for c, v in enumerate(m) if v), width)
        if limit - start < max(1, min_tokens) or not all(m[start:limit]):
            continue
        buckets.setdefault(start, []).append((r, row[start:limit]))
    clusters: list[PrefixCluster] = []
    for start, members in sorted(buckets.items()):
        members.sort(key=lambda x: x[1])
        links = [common_length(a[1], b[1]) for a, b in zip(members, members[1:], strict=False)]
        for lo, hi, shared in _split(links, 0, len(members), min_tokens, allow_single, [len(m[1]) for m in members]):
            clusters.append(PrefixCluster(tuple(sorted(members[i][0] for i in range(lo, hi))), start, shared))
    return clusters


def _split(links: list[int], lo: int, hi: int, min_tokens: int, allow_single: bool, lengths: list[int]) -> list[tuple[int, int, int]]:
    """Clusters ``[lo, hi)`` of a sorted run (``links[i]``: tokens rows ``i`` and ``i+1`` share)."""
    n = hi - lo
    if n == 1:
        return [(lo, hi, lengths[lo])] if allow_single and lengths[lo] >= min_tokens else []
    inner = links[lo : hi - 1]
    weakest = min(inner)
    cut = lo + inner.index(weakest) + 1

    def saving(a: int, b: int) -> int:
        if b - a == 1:
            return 0
        return (b - a - 1) * min(links[a : b - 1])

    whole = (n - 1) * weakest if weakest >= min_tokens else 0
    if whole and whole >= saving(lo, cut) + saving(cut, hi):
        return [(lo, hi, weakest)]
    return _split(links, lo, cut, min_tokens, allow_single, lengths) + _split(links, cut, hi, min_tokens, allow_single, lengths)


# ----------------------------------------------------------------------------- caches
def _layer_classes() -> tuple[type, type]:
    from transformers.cache_utils import DynamicCache, DynamicLayer

    class SharedLayer(DynamicLayer):
        """Past keys/values that never change: ``update`` returns past + new without storing.

        Keeps the first ``new`` it sees (the prefix run records its keys and values that
        way), so a gradient-checkpointing replay of the layer, which calls ``update``
        again, changes nothing.
        """

        def __init__(self, keys: Any = None, values: Any = None):
            super().__init__()
            self.keys, self.values = keys, values
            self.is_initialized = keys is not None
            if keys is not None:
                self.device = keys.device
            self.recorded: tuple[Any, Any] | None = None

        def update(self, key_states, value_states, *args, **kwargs):
            if self.recorded is None:
                self.recorded = (key_states, value_states)
            if self.keys is None:
                return key_states, value_states
            return torch.cat([self.keys, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)

    return SharedLayer, DynamicCache


def _shared_cache(layers: list[tuple[Any, Any]] | None, num_layers: int) -> Any:
    SharedLayer, DynamicCache = _layer_classes()
    cache = DynamicCache()
    if layers is None:
        cache.layers = [SharedLayer() for _ in range(num_layers)]
    else:
        cache.layers = [SharedLayer(k, v) for k, v in layers]
    return cache


def _num_layers(model: Any) -> int:
    config = _base_model(model).config
    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(config.num_hidden_layers)


@contextlib.contextmanager
def _cache_through_checkpointing(model: Any):
    """Let layers under gradient checkpointing read and write the shared caches.

    Non-reentrant checkpointing replays a layer with the same arguments, which the
    caches here tolerate; reentrant checkpointing would drop the gradient of the
    prefix keys and values, so it is switched off for these calls.
    """
    if not torch.is_grad_enabled():
        yield
        return
    changed: list[tuple[Any, str]] = []
    for module in _base_model(model).modules():
        if not getattr(module, "gradient_checkpointing", False) or not hasattr(module, "_can_checkpoint_with_cache"):
            continue
        func = getattr(module, "_gradient_checkpointing_func", None)
        reentrant = getattr(func, "keywords", {}).get("use_reentrant", True) if isinstance(func, functools.partial) else True
        if reentrant:
            module.gradient_checkpointing = False
            changed.append((module, "gradient_checkpointing"))
        else:
            module._can_checkpoint_with_cache = True
            changed.append((module, "_can_checkpoint_with_cache"))
    try:
        yield
    finally:
        for module, attr in changed:
            if attr == "gradient_checkpointing":
                module.gradient_checkpointing = True
            else:
                del module._can_checkpoint_with_cache


# ----------------------------------------------------------------------------- forward passes
def prefix_kv(model: Any, ids: Any, positions: Any, *, grad: bool = True) -> list[tuple[Any, Any]]:
    """Keys and values of every layer for ``ids`` (shape ``(1, L)``) at ``positions``.

    With ``grad`` they stay in the autograd graph of the model's (LoRA) parameters.
    """
    cache = _shared_cache(None, _num_layers(model))
    ctx = contextlib.nullcontext() if grad else torch.no_grad()
    with ctx, _cache_through_checkpointing(model):
        model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{cache_argument(model): cache},
        )
    layers = [layer.recorded for layer in cache.layers]
    if any(x is None for x in layers):
        raise RuntimeError("the model did not fill every layer's cache; shared-prefix forward unsupported for it")
    return layers


def _float_logits(model: Any, kwargs: dict[str, Any], keep: int) -> Any:
    """The last ``keep`` positions' logits in float32: the LM head's projection itself runs in float32 when the
    model's weights are not (rounding each logit to bfloat16 first would bias the log-probs); models whose head
    scales or caps its logits keep their own head."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    config = getattr(model, "config", None)
    own_head = any(getattr(config, k, None) not in (None, 1, 1.0) for k in ("final_logit_softcapping", "logit_scale"))
    if head is None or head.weight.dtype == torch.float32 or own_head:
        return model(**kwargs, use_cache=False, logits_to_keep=keep).logits.float()
    hidden = model.get_decoder()(**kwargs, use_cache=False).last_hidden_state[:, -keep:]
    bias = head.bias.float() if getattr(head, "bias", None) is not None else None
    return torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)


def _cluster_forward(model: Any, prefix_model: Any, input_ids: Any, attention_mask: Any, cluster: PrefixCluster,
                     logits_to_keep: int, detached: bool, fused: bool, compute_entropy: bool,
                     temperature: float) -> tuple[Any, Any]:
    rows = torch.tensor(cluster.rows, device=input_ids.device)
    start, length = cluster.start, cluster.length
    width = input_ids.size(1)
    end = start + length
    prefix_ids = input_ids[cluster.rows[0], start:end][None, :]
    device = input_ids.device
    layers = prefix_kv(prefix_model, prefix_ids, torch.arange(start, end, device=device)[None, :], grad=not detached)
    n = len(cluster.rows)
    layers = [(k.expand(n, *k.shape[1:]), v.expand(n, *v.shape[1:])) for k, v in layers]
    cache = _shared_cache(layers, len(layers))
    suffix_ids = input_ids.index_select(0, rows)[:, end:]
    suffix_mask = attention_mask.index_select(0, rows)[:, end:]
    mask = torch.cat([suffix_mask.new_ones((n, length)), suffix_mask], dim=1)
    positions = torch.arange(end, width, device=device)[None, :].expand(n, -1)
    kwargs = {"input_ids": suffix_ids, "attention_mask": mask, "position_ids": positions, cache_argument(prefix_model): cache}
    with _cache_through_checkpointing(prefix_model):
        if fused:
            labels = suffix_ids.masked_fill(suffix_mask == 0, -100)
            labels[:, :-logits_to_keep] = -100
            out = model(**kwargs, labels=labels, fused_lm_head=True)
            logps = out.log_probs[:, -logits_to_keep:]
            ent = out.entropy[:, -logits_to_keep:] if compute_entropy else None
            return logps, ent
        logits = _float_logits(model, kwargs, logits_to_keep + 1)[:, :-1, :] / temperature
    targets = suffix_ids[:, -logits_to_keep:]
    logp_all = torch.log_softmax(logits, dim=-1)
    logps = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep_mask = suffix_mask[:, -logits_to_keep:] != 0
    logps = logps.masked_fill(~keep_mask, 0.0)
    ent = None
    if compute_entropy:
        ent = -(logp_all.exp() * logp_all).sum(-1).masked_fill(~keep_mask, 0.0)
    return logps, ent


def prefix_log_probs(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    logits_to_keep: int,
    *,
    clusters: Sequence[PrefixCluster],
    prefix_grad: str = "exact",
    fused: bool = True,
    compute_entropy: bool = False,
    temperature: float = 1.0,
    prefix_model: Any = None,
    plain: Any = None,
) -> tuple[Any, Any]:
    """Per-token log-probs (and entropies) of the last ``logits_to_keep`` tokens of each row.

    ``input_ids``/``attention_mask``: a left-padded ``(B, T)`` batch (right padding
    after the scored tokens is fine).  ``clusters`` come from
    :func:`plan_prefix_clusters`; rows outside them go through ``plain(rows)``, a
    callable returning ``(logps, entropies)`` for those rows (the caller's own
    unshared forward), and the results are put back in row order.

    ``fused``: the model was given TRL's fused LM head (``model(..., labels=,
    fused_lm_head=True)`` returns ``log_probs``/``entropy`` already divided by the
    trainer's temperature); otherwise the log-probs come from the logits divided by
    ``temperature``, with zeros on padding.  ``prefix_model`` runs the prefix (by
    default ``model``; pass the unwrapped module when ``model`` is a DDP wrapper
    that must see one forward per backward).
    """
    if prefix_grad not in PREFIX_GRAD_MODES:
        raise ValueError(f"prefix_grad must be one of {PREFIX_GRAD_MODES}, got {prefix_grad!r}")
    batch = input_ids.size(0)
    prefix_model = model if prefix_model is None else prefix_model
    parts: list[tuple[list[int], Any, Any]] = []
    covered: set[int] = set()
    for cluster in clusters:
        logps, ent = _cluster_forward(model, prefix_model, input_ids, attention_mask, cluster, logits_to_keep,
                                      prefix_grad == "detached", fused, compute_entropy, temperature)
        parts.append((list(cluster.rows), logps, ent))
        covered.update(cluster.rows)
    rest = [r for r in range(batch) if r not in covered]
    if rest:
        if plain is None:
            raise ValueError("rows outside every cluster need a plain forward (pass plain=)")
        logps, ent = plain(rest)
        parts.append((rest, logps, ent))
    order = [r for rows, _, _ in parts for r in rows]
    inverse = torch.empty(batch, dtype=torch.long, device=input_ids.device)
    inverse[torch.tensor(order, device=input_ids.device)] = torch.arange(batch, device=input_ids.device)
    logps = torch.cat([p[1] for p in parts], dim=0).index_select(0, inverse)
    ent = None
    if compute_entropy:
        ent = torch.cat([p[2] for p in parts], dim=0).index_select(0, inverse)
    return logps, ent


def detached_prompt_loss(model: Any, input_ids: Any, attention_mask: Any, labels: Any, *,
                         num_items: Any = None, min_tokens: int = 16) -> Any:
    """Causal-LM loss of a right-padded SFT batch with its prompts run once without gradient.

    The batch's prompt columns (those before the first labelled token of every row,
    less one: that token's hidden state predicts the first scored token) are run
    under ``torch.no_grad`` with all rows at once; the rest attends to their keys and
    values with gradient.  The loss value equals the plain forward's (same tokens,
    same positions); the gradient lacks what flows through the prompt's keys and
    values, so it is an approximation (opt-in: ``TrainConfig.sft_prefix_grad``).
    ``labels`` hold -100 on unscored tokens; the loss is the sum of the scored
    tokens' negative log-likelihoods over ``num_items`` (the trainer's count across
    gradient accumulation) or over this batch's count.  With fewer than
    ``min_tokens`` prompt columns the plain forward runs.  Either way only the scored
    positions' logits are computed where the model allows it (:func:`scored_nll`).
    """
    scored = labels[:, 1:] != -100
    count = scored.sum()
    denominator = num_items if num_items is not None else count.clamp(min=1)
    if isinstance(denominator, torch.Tensor):
        denominator = denominator.to(input_ids.device)
    labelled = labels != -100
    lengths = attention_mask.sum(dim=1)
    firsts = torch.where(labelled.any(dim=1), labelled.int().argmax(dim=1), lengths)
    cut = int(firsts.min()) - 1 if input_ids.size(0) else 0
    if cut < max(1, min_tokens) or not bool(attention_mask[:, :cut].all()):
        return scored_nll(model, {"input_ids": input_ids, "attention_mask": attention_mask}, labels[:, 1:]) / denominator
    width = input_ids.size(1)
    batch = input_ids.size(0)
    device = input_ids.device
    layers = prefix_kv(model, input_ids[:, :cut], torch.arange(cut, device=device)[None, :].expand(batch, -1), grad=False)
    cache = _shared_cache(layers, len(layers))
    kwargs = {"input_ids": input_ids[:, cut:], "attention_mask": attention_mask,
              "position_ids": torch.arange(cut, width, device=device)[None, :].expand(batch, -1),
              cache_argument(model): cache, "use_cache": False}
    with _cache_through_checkpointing(model):
        return scored_nll(model, kwargs, labels[:, cut + 1:]) / denominator


@functools.cache
def _keeps_masked_positions(model_class: type) -> bool:
    """Whether ``model_class``'s forward projects only the positions of a boolean ``(batch, positions)``
    ``logits_to_keep`` (transformers' ``slice_logits_to_keep``), returning their logits flattened."""
    if "logits_to_keep" not in inspect.signature(model_class.forward).parameters:
        return False
    slicer = getattr(sys.modules.get(model_class.__module__), "slice_logits_to_keep", None)
    if slicer is None:
        return False
    try:
        kept = slicer(torch.zeros(1, 2, 1), torch.tensor([[True, False]]))
    except Exception:  # a slicer that does not know boolean masks
        return False
    return tuple(kept.shape) == (1, 1)


def scored_nll(model: Any, kwargs: dict[str, Any], targets: Any) -> Any:
    """The summed negative log-likelihood of the scored targets of one forward (``model(**kwargs)``).

    ``targets[:, j]`` is the token position ``j`` predicts (-100: not scored), one column fewer than the
    forward's input.  Where the model allows it, the LM head projects only the scored positions: an SFT
    batch's logits over the whole vocabulary at every position are most of its memory (4 rows of 2,000
    tokens over a 49,152-token vocabulary are 1.6 GB per float32 copy, and the loss keeps three), while
    its scored tokens are a small part of its width.  The value is the same either way."""
    scored = targets != -100
    if _keeps_masked_positions(type(_base_model(model))):
        keep = torch.cat([scored, scored.new_zeros((scored.size(0), 1))], dim=1)
        logits = model(**kwargs, logits_to_keep=keep).logits.float()
        return torch.nn.functional.cross_entropy(logits, targets[scored], reduction="sum")
    logits = model(**kwargs).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                             ignore_index=-100, reduction="sum")


# ----------------------------------------------------------------------------- the GRPO hook
def _parent_supports_sharing(parent: Any) -> bool:
    """TRL's per-token log-prob method with the fused LM head (``compute_aux_loss``; trl >= 1.x)."""
    try:
        from trl.trainer.utils import add_fused_lm_head  # noqa: F401
    except ImportError:
        return False
    return "compute_aux_loss" in inspect.signature(parent).parameters


class SharedPrefixTrainerMixin:
    """Mixin for TRL's ``GRPOTrainer``: the per-token log-probs of the loss share each group's prefix.

    Set ``shared_prefix`` (default on), ``prefix_grad`` (``"exact"`` or
    ``"detached"``) and ``shared_prefix_min_tokens`` on the instance.  Batches the
    sharing cannot serve (images, MoE auxiliary loss, FSDP or DeepSpeed wrappers,
    an older TRL) and rows in no cluster go through TRL's own forward.
    """

    shared_prefix: bool = True
    prefix_grad: str = "exact"
    lm_head: str = "fused"
    shared_prefix_min_tokens: int = 16

    def _sharing_applies(self, parent: Any, compute_aux_loss: bool, extra: dict[str, Any]) -> bool:
        if not self.shared_prefix or compute_aux_loss or any(v is not None for v in extra.values()):
            return False
        if getattr(self, "is_fsdp_enabled", False) or getattr(self, "is_deepspeed_enabled", False):
            return False
        return supported() and _parent_supports_sharing(parent)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **extra):
        parent = super()._get_per_token_logps_and_entropies  # type: ignore[misc]
        if not self._sharing_applies(parent, compute_aux_loss, extra):
            return parent(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                          compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
        detached = self.prefix_grad == "detached" and torch.is_grad_enabled()
        clusters = plan_prefix_clusters(input_ids, attention_mask, logits_to_keep, min_tokens=self.shared_prefix_min_tokens,
                                        allow_single=detached)
        if not clusters:
            return parent(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                          compute_entropy=compute_entropy, compute_aux_loss=False, **extra)

        def plain(rows: list[int]) -> tuple[Any, Any]:
            idx = torch.tensor(rows, device=input_ids.device)
            logps, ent, _ = parent(model, input_ids.index_select(0, idx), attention_mask.index_select(0, idx), logits_to_keep,
                                   batch_size=batch_size, compute_entropy=compute_entropy)
            return logps, ent

        accelerator = self.accelerator  # type: ignore[attr-defined]
        with accelerator.autocast():
            logps, ent = prefix_log_probs(
                model, input_ids, attention_mask, logits_to_keep, clusters=clusters,
                prefix_grad="detached" if detached else "exact", fused=self.lm_head != "full",
                compute_entropy=compute_entropy, temperature=getattr(self, "temperature", 1.0),
                prefix_model=accelerator.unwrap_model(model), plain=plain,
            )
        metrics = getattr(self, "_metrics", None)
        if metrics is not None and torch.is_grad_enabled():
            saved = sum((len(c.rows) - 1) * c.length for c in clusters)
            total = int(attention_mask.sum())
            metrics["train" if model.training else "eval"]["trace/prefix_shared_fraction"].append(saved / total if total else 0.0)
        return logps, ent, None
