"""What every local chat-model policy shares, whatever runs the model.

A :class:`ChatPolicy` renders the conversation with the model's own chat template (or the
tool listing of :mod:`~trace_gym.policies.prompting` where the template ignores tools),
encodes it, checks each prompt fits the model's context, seeds one random generator per
row from the policy seed, the episode seed and the prompt text (:meth:`ChatPolicy.prepare_row`),
continues the rows (:meth:`ChatPolicy._decode`, the backend's part) and cuts each turn's text at
its stop string (:meth:`ChatPolicy.finish_text`); a backend that serves requests continuously
(llama.cpp's ``serve``) prepares and finishes each request with the same two methods.  :class:`~trace_gym.policies.hf.HFPolicy` runs ``transformers`` models over
:func:`~trace_gym.policies.decoding.decode_rows`;
:class:`~trace_gym.policies.llamacpp.LlamaCppPolicy` runs a GGUF file with llama.cpp.
Both pick tokens with :func:`~trace_gym.policies.decoding.pick_tokens`, so a prompt and a
seed mean the same draw in either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from .base import ContextExceeded, PolicyError, Request
from .decoding import DecodeStats, StopRule, pick_tokens
from .prompting import (
    TOOL_LISTINGS,
    action_stop_strings,
    check_tool_template,
    end_of_turn,
    native_tools,
    render_chat,
    resolve_tool_format,
)

__all__ = ["ChatPolicy", "PreparedRow", "end_of_turn_ids"]


class PreparedRow(NamedTuple):
    """One request ready to decode (:meth:`ChatPolicy.prepare_row`)."""

    row: list[int]
    limit: int
    generator: Any


def end_of_turn_ids(tokenizer: Any) -> set[int]:
    """The special token the chat template closes an assistant turn with (empty when it has none)."""
    try:
        text = end_of_turn(tokenizer)
    except Exception:  # a template that cannot render the probe has no marker to find
        return set()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    return {int(ids[0])} if ids and ids[0] in special else set()


class ChatPolicy:
    """Prompting, seeding and stopping for a local chat model; subclasses run the model.

    Subclasses implement :meth:`_decode` (continue token rows, see
    :func:`~trace_gym.policies.decoding.decode_rows` for the contract) and
    :meth:`context_limit`.  Errors: :class:`~trace_gym.policies.base.PolicyError` when the
    chat template fails or a prompt is empty; :class:`~trace_gym.policies.base.ContextExceeded`
    naming the rows whose prompt leaves no room in the context (nothing is generated).
    """

    accepts_seeds = True

    def __init__(self, tokenizer: Any, *, eos_token_ids: Iterable[int] = (), policy_id: str, max_new_tokens: int = 256,
                 greedy: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 batch_size: int = 8, tool_listing: str = "compact", tool_format: str = "auto",
                 stop: Sequence[str] | None = None):
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
        self.episode_seed: int | None = None
        self._native_tools: bool | None = None
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = {int(t) for t in eos_token_ids}
        if isinstance(tokenizer.eos_token_id, int):
            eos.add(tokenizer.eos_token_id)
        if not eos:
            raise ValueError("the tokenizer and model define no end-of-sequence token")
        self.eos_token_ids = eos
        check_tool_template(tokenizer, native=self.supports_native_tools(), tool_format=tool_format,
                            tool_listing=tool_listing)  # ChatTemplateError (a ValueError): one line saying why
        self.stop_rule = StopRule(tokenizer, eos | end_of_turn_ids(tokenizer),
                                  action_stop_strings(tool_format) if stop is None else tuple(stop))
        self.decode_stats = DecodeStats()

    # -- the backend's part ----------------------------------------------------------
    def context_limit(self) -> int | None:
        """The model's context in tokens (``None``: unbounded)."""
        raise NotImplementedError

    def _decode(self, rows: list[list[int]], limits: list[int], pick: Callable[[Any, list[int]], Any]) -> list[list[int]]:
        """The token ids each row produced (stopping per :attr:`stop_rule`, at most ``limits[i]``)."""
        raise NotImplementedError

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
        rows = self._encode(prompts)  # every request's fit is checked before any is generated
        out: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            end = start + self.batch_size
            out.extend(self._generate_rows(prompts[start:end], rows[start:end], seeds[start:end]))
        return out

    def generate(self, prompts: Sequence[str], seeds: Sequence[int | None] | None = None) -> list[str]:
        """Continue each prompt until its action is complete (:attr:`stop_rule`) or ``max_new_tokens``.

        A prompt that leaves no room in the model's context raises
        :class:`~trace_gym.policies.base.ContextExceeded` naming its rows (nothing is
        generated); one that leaves less room than ``max_new_tokens`` gets what is left.
        """
        if not prompts:
            return []
        seeds = list(seeds) if seeds is not None else [self.episode_seed] * len(prompts)
        return self._generate_rows(prompts, self._encode(prompts), seeds)

    def _encode(self, prompts: Sequence[str]) -> list[list[int]]:
        """Token ids of ``prompts``; :class:`ContextExceeded` names those that leave no room in the context."""
        rows = [list(r) for r in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]
        if any(not r for r in rows):
            raise PolicyError(f"{self.policy_id}: an empty prompt cannot be continued")
        context = self.context_limit()
        over = [i for i, r in enumerate(rows) if context is not None and len(r) >= context]
        if over:
            lengths = [len(rows[i]) for i in over]
            raise ContextExceeded(f"{self.policy_id}: a prompt of {max(lengths)} tokens leaves no room in the model's "
                                  f"context of {context} tokens", over, lengths, context or 0)
        return rows

    def _row_seed(self, prompt: str, episode_seed: int | None) -> int:
        digest = hashlib.sha256(f"{self.seed}\x00{episode_seed}\x00{prompt}".encode()).digest()
        return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)

    def _pick(self, logits: Any, generators: list[Any]) -> Any:
        return pick_tokens(logits, greedy=self.greedy, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                           generators=generators)

    def prepare_row(self, prompt: str, row: list[int], episode_seed: int | None) -> PreparedRow:
        """What decoding needs of one request: its prompt tokens ``row`` (checked to fit by :meth:`_encode`), its
        token limit (``max_new_tokens``, or the room its prompt leaves in the context) and its generator (seeded
        from the policy seed, the episode seed and the prompt text).  Every way of acting prepares rows here."""
        import torch

        context = self.context_limit()
        limit = self.max_new_tokens if context is None else min(self.max_new_tokens, context - len(row))
        return PreparedRow(row, limit, torch.Generator(device="cpu").manual_seed(self._row_seed(prompt, episode_seed)))

    def finish_text(self, produced: Sequence[int]) -> str:
        """The action a row's tokens make: their text, cut at the end of its first stop string."""
        return self.stop_rule.cut_text(self.tokenizer.decode(list(produced), skip_special_tokens=True))

    def _generate_rows(self, prompts: Sequence[str], rows: list[list[int]], seeds: Sequence[int | None]) -> list[str]:
        prepared = [self.prepare_row(p, r, s) for p, r, s in zip(prompts, rows, seeds, strict=True)]
        produced = self._decode([q.row for q in prepared], [q.limit for q in prepared],
                                lambda logits, idx: self._pick(logits, [prepared[i].generator for i in idx]))
        return [self.finish_text(p) for p in produced]
