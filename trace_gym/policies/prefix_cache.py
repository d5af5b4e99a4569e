"""The one prefix KV cache for sampling: keys and values of token prefixes already run through a model.

Both samplers use it: :class:`~trace_gym.policies.hf.HFPolicy` (inference) and the GRPO
rollout sampler (:func:`trace_gym.train.generation.transformers_generate_fn`).  A turn
of a tool-use episode is a multi-thousand-token prompt (system prompt, tool listing,
the conversation so far) and a few new tokens; with the cache a turn costs its new
tokens only.

* **Lookup**: :meth:`PrefixKVCache.row_prefixes` finds, for each row of a batch, the
  stored sequence it shares the most leading tokens with, capped so that every row
  keeps at least one token of its own (its logits start decoding).  Matches shorter
  than ``min_tokens`` are not worth a cache and are ignored.
* **Shared prefix**: when the rows of a batch share a longer prefix than any entry
  covers (the first turn of a GRPO group, a batch of episodes of one system prompt),
  that prefix is run once, batch 1, continuing from the best entry, and stored.
* **Storing**: :meth:`PrefixKVCache.store_rows` / :meth:`PrefixKVCache.store_batch`
  keep each row's tokens (prompt, and sampled turn where its keys were computed) for
  the next turn of its conversation; the row's own older entries, prefixes of the new
  one, are dropped.
* **Namespaces**: entries are looked up under :attr:`PrefixKVCache.namespace` only (a
  policy that switches LoRA adapters sets it to the active adapter's name).
* **Bounds**: at most ``max_entries`` entries; the least recently used goes first.
* **Weights**: entries are valid for one set of weights: :meth:`PrefixKVCache.clear`
  after changing them.  A call with a different model object clears the entries itself.
* **Stats**: :attr:`PrefixKVCache.stats` counts prompt tokens looked up, tokens reused
  from the cache and tokens run to fill it.

Positions start at 0 for every entry: a row's cached tokens are its first tokens.
``torch`` and ``transformers`` are imported lazily (importing this module costs nothing).
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = [
    "PrefixKVCache", "base_model", "cache_argument", "common_length", "forward_kwargs", "make_cache", "stack_prefixes",
]

Layers = list[tuple[Any, Any]]  # per layer: keys and values, shape (batch, heads, tokens, head_dim)


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# ----------------------------------------------------------------------------- the model's cache API
def base_model(model: Any) -> Any:
    """The model under distributed (``.module``) and PEFT (``get_base_model``) wrappers."""
    import torch

    while isinstance(getattr(model, "module", None), torch.nn.Module):
        model = model.module
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def forward_kwargs(model: Any) -> tuple[str, dict[str, Any]]:
    """The keyword the model's forward takes its KV cache under (``cache`` in newer transformers,
    ``past_key_values`` before) and ``{"logits_to_keep": 1}`` where it is accepted.

    A PEFT wrapper's ``forward`` takes ``**kwargs`` and hands them to the base model, so the
    base model's signature is the one that says what is accepted."""
    params = inspect.signature(base_model(model).forward).parameters
    name = "cache" if "cache" in params else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    return name, extra


def cache_argument(model: Any) -> str:
    """The keyword a model's forward takes its KV cache under."""
    return forward_kwargs(model)[0]


def make_cache(model: Any, layers: Layers) -> Any:
    """A ``DynamicCache`` for ``model`` holding ``layers`` as its past keys and values."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers, config=base_model(model).config)


def stack_prefixes(found: Sequence[tuple[int, Layers | None]], columns: int, placements: Sequence[tuple[int, int]]) -> Layers:
    """One batch of past keys/values from the rows' cached prefixes.

    ``found[i]``: ``(n, layers)`` from :meth:`PrefixKVCache.row_prefixes`;
    ``placements[i] = (at, count)``: row ``i``'s first ``count`` cached tokens (``count <= n``)
    go to columns ``[at, at + count)``.  Every other column is zero (the caller masks it).
    Returns per layer keys and values of shape ``(rows, heads, columns, head_dim)``.
    """
    if len(found) != len(placements):
        raise ValueError(f"{len(placements)} placements for {len(found)} rows")
    first = next((layers for _, layers in found if layers), None)
    if first is None:
        raise ValueError("no row has a cached prefix to stack")
    for (n, _), (at, count) in zip(found, placements, strict=True):
        if count > 0 and (count > n or at < 0 or at + count > columns):
            raise ValueError(f"cannot place {count} of {n} cached tokens at column {at} of {columns}")
    out: Layers = []
    for j, (k0, v0) in enumerate(first):
        k = k0.new_zeros((len(found), k0.shape[1], columns, k0.shape[3]))
        v = v0.new_zeros((len(found), v0.shape[1], columns, v0.shape[3]))
        for i, ((_, row_layers), (at, count)) in enumerate(zip(found, placements, strict=True)):
            if count > 0:
                k[i, :, at : at + count] = row_layers[j][0][0, :, :count]
                v[i, :, at : at + count] = row_layers[j][1][0, :, :count]
        out.append((k, v))
    return out


# ----------------------------------------------------------------------------- the cache
@dataclass
class _Entry:
    namespace: Any
    ids: list[int]
    layers: Layers  # batch 1, positions 0 .. len(ids) - 1
    shared: bool  # a batch's shared prefix (never dropped as a row's older turn)


class PrefixKVCache:
    """Keys and values of token sequences already run through a model (see the module docstring).

    ``min_tokens``: the shortest prefix worth reusing or storing.  ``max_entries``: the bound
    on stored entries.  ``share_single``: also run a batch of one row's prompt (all but its
    last token) through the cache, so that a single conversation's next turn finds it;
    otherwise only prefixes two rows or more share are run ahead of sampling.
    """

    def __init__(self, *, min_tokens: int = 16, max_entries: int = 64, share_single: bool = False):
        if int(min_tokens) < 1:
            raise ValueError(f"min_tokens must be >= 1, got {min_tokens}")
        if int(max_entries) < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.min_tokens = int(min_tokens)
        self.max_entries = int(max_entries)
        self.share_single = bool(share_single)
        self.namespace: Hashable = None
        self.model: Any = None  # the model the entries were computed with
        self._entries: dict[int, _Entry] = {}
        self._counter = 0
        self.stats = {"prompt_tokens": 0, "reused_tokens": 0, "prefilled_tokens": 0}

    def clear(self) -> None:
        """Forget every entry, in every namespace (needed after the model's weights change)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> Mapping[int, _Entry]:
        """The stored entries, least recently used first (read-only)."""
        return MappingProxyType(self._entries)

    # -- bookkeeping -----------------------------------------------------------------
    def _use_model(self, model: Any) -> None:
        if model is not self.model:
            self._entries.clear()
            self.model = model

    def _remember(self, ids: Sequence[int], layers: Layers, shared: bool) -> int:
        self._counter += 1
        self._entries[self._counter] = _Entry(self.namespace, list(ids), layers, shared)
        while len(self._entries) > self.max_entries:
            self._entries.pop(next(iter(self._entries)))
        return self._counter

    def _touch(self, entry_id: int) -> None:
        if entry_id in self._entries:
            self._entries[entry_id] = self._entries.pop(entry_id)

    def _best(self, row: Sequence[int], cap: int) -> tuple[int, int | None]:
        """The entry (in the current namespace) sharing the most leading tokens with ``row``, at most ``cap``."""
        best, best_id = 0, None
        for entry_id, entry in self._entries.items():
            if entry.namespace != self.namespace:
                continue
            n = min(common_length(entry.ids, row), cap)
            if n > best:
                best, best_id = n, entry_id
        return (best, best_id) if best >= self.min_tokens else (0, None)

    def _extend(self, model: Any, base: Layers | None, have: int, ids: list[int], device: Any) -> Layers:
        """Keys/values of ``ids`` (batch 1), running only the tokens after the first ``have`` of ``base``."""
        import torch

        name, extra = forward_kwargs(model)
        cache = make_cache(model, [(k[:, :, :have], v[:, :, :have]) for k, v in base]) if base is not None and have else None
        with torch.no_grad():
            out = model(
                input_ids=torch.tensor([ids[have:]], dtype=torch.long, device=device),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=device),
                position_ids=torch.arange(have, len(ids), device=device)[None, :],
                use_cache=True,
                **{name: cache},
                **extra,
            )
        self.stats["prefilled_tokens"] += len(ids) - have
        return [(layer.keys, layer.values) for layer in out.get(name).layers]

    # -- lookup ----------------------------------------------------------------------
    def row_prefixes(self, model: Any, rows: Sequence[Sequence[int]], device: Any, *, reuse: bool = True
                     ) -> list[tuple[int, Layers | None]]:
        """For each row, ``(n, layers)``: its first ``n`` tokens' keys/values (batch 1), ``n < len(row)``, or ``(0, None)``.

        ``reuse=False`` only counts the prompt tokens (a caller with its cache switched off).
        Runs the model (without gradient) when the rows share a prefix no entry covers.
        """
        rows = [list(r) for r in rows]
        if not rows or any(not r for r in rows):
            raise ValueError("row_prefixes needs one or more non-empty token rows")
        self.stats["prompt_tokens"] += sum(len(r) for r in rows)
        if not reuse:
            return [(0, None)] * len(rows)
        self._use_model(model)
        caps = [len(r) - 1 for r in rows]
        found = [self._best(r, c) for r, c in zip(rows, caps, strict=True)]
        shared = min(caps)
        for r in rows[1:]:
            shared = min(shared, common_length(rows[0], r))
        # An entry covering ``shared`` tokens of one row covers them for every row, so the
        # shared prefix is run only when no row has an entry that long, and then every row
        # takes the new entry (the newest, which the bound never evicts).
        if (len(rows) > 1 or self.share_single) and shared >= self.min_tokens and any(n < shared for n, _ in found):
            n0, e0 = max(found, key=lambda f: min(f[0], shared))
            n0 = min(n0, shared)
            base = self._entries[e0].layers if e0 is not None and n0 else None
            layers = self._extend(model, base, n0 if base is not None else 0, rows[0][:shared], device)
            shared_id = self._remember(rows[0][:shared], layers, shared=True)
            found = [(n, e) if n >= shared else (shared, shared_id) for n, e in found]
        out: list[tuple[int, Layers | None]] = []
        for n, entry_id in found:
            if entry_id is None:
                out.append((0, None))
                continue
            self._touch(entry_id)  # most recently used last
            self.stats["reused_tokens"] += n
            out.append((n, [(k[:, :, :n], v[:, :, :n]) for k, v in self._entries[entry_id].layers]))
        return out

    # -- storing ---------------------------------------------------------------------
    def store_rows(self, model: Any, rows: Sequence[Sequence[int]], layers_per_row: Sequence[Layers]) -> None:
        """Keep each row's tokens and keys/values (batch 1, positions from 0) under the current namespace.

        Rows shorter than ``min_tokens`` are skipped; a row's own older entries (prefixes of
        it, not shared ones) are dropped.
        """
        rows = [list(r) for r in rows]
        if len(rows) != len(layers_per_row):
            raise ValueError(f"{len(layers_per_row)} key/value sets for {len(rows)} rows")
        for ids, layers in zip(rows, layers_per_row, strict=True):
            if layers and layers[0][0].shape[-2] != len(ids):
                raise ValueError(f"a row of {len(ids)} tokens came with keys/values of {layers[0][0].shape[-2]} positions")
        self._use_model(model)
        for ids, layers in zip(rows, layers_per_row, strict=True):
            if len(ids) < self.min_tokens:
                continue
            stale = [e for e, entry in self._entries.items()
                     if entry.namespace == self.namespace and not entry.shared
                     and len(entry.ids) <= len(ids) and ids[: len(entry.ids)] == entry.ids]
            for e in stale:
                del self._entries[e]
            self._remember(ids, layers, shared=False)

    def store_batch(self, model: Any, rows: Sequence[Sequence[int]], cache: Any,
                    columns: Sequence[Iterable[int] | None]) -> None:
        """Keep each row's tokens, their keys/values copied out of a batched model ``cache``.

        Row ``i``'s keys/values are at the cache columns ``columns[i]`` (one per token of
        ``rows[i]``, in order); ``None`` skips the row.
        """
        import torch

        if len(rows) != len(columns):
            raise ValueError(f"{len(columns)} column lists for {len(rows)} rows")
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        device = layers[0][0].device
        kept_rows, kept_layers = [], []
        for i, (ids, cols) in enumerate(zip(rows, columns, strict=True)):
            if cols is None or len(ids) < self.min_tokens:
                continue
            idx = torch.as_tensor(list(cols), dtype=torch.long, device=device)
            kept_rows.append(ids)
            kept_layers.append([(k[i : i + 1].index_select(2, idx), v[i : i + 1].index_select(2, idx)) for k, v in layers])
        self.store_rows(model, kept_rows, kept_layers)
