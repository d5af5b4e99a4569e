"""Token-level decoding: what every decoding loop shares, and the ``transformers`` loop itself.

Each engine family has one decoding loop: :func:`decode_rows` here for ``transformers`` models,
and :meth:`~trace_gym.policies.llamacpp.LlamaCppEngine.run` for llama.cpp (continuous batching;
lock step is the same loop without refills).  Both end turns with :class:`StopRule`, pick tokens
with :func:`pick_tokens` (through the caller's ``pick``), draft with :class:`Drafts` at the
engine's :data:`DRAFT_COST` and count with :class:`DecodeStats`.

:func:`decode_rows` serves :class:`~trace_gym.policies.hf.HFPolicy` (evaluation, rollouts,
calibration) and the GRPO rollout sampler
(:func:`trace_gym.train.generation.transformers_generate_fn`).  What it does per batch:

* **Prefix cache.**  Each row's leading tokens already run through the model (the shared
  system prompt and tool listing, the row's own earlier turns) come from a
  :class:`~trace_gym.policies.prefix_cache.PrefixKVCache`; only the rest is prefilled, in
  one forward for the whole batch.  After the prefill each row's prompt is stored for its
  conversation's next turn.
* **Static cache.**  Decoding writes one position per step into a preallocated cache
  instead of growing (copying) every layer's keys and values at every step.
* **Stops.**  A row is finished at an end-of-turn token or when its text completes a stop
  string (:class:`StopRule`: for SmolLM2's call format the closing ``</tool_call>``, after
  which the action is whole), not at the token limit; the loop ends when every row is.
* **Context.**  Each row may have its own token limit (the room its prompt leaves in the
  model's context); a row with no room at all is the caller's to end
  (:class:`ContextExceeded`).

Positions start at 0 for every row (left padding is masked and skipped by the position
ids), so a row's tokens do not depend on what else is in its batch.
``torch`` and ``transformers`` are imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import ContextExceeded, PolicyError

__all__ = ["ContextExceeded", "DRAFT_COST", "DecodeStats", "Drafts", "NUCLEUS_CANDIDATES", "StopRule", "check_drafting",
           "context_limit", "decode_rows", "pick_tokens"]

DRAFT_COST = {"transformers": 0.05, "llama.cpp": 0.01}
"""Each engine's default ``draft_cost``: what one more position per row adds to a decoding step, as a share of a
one-token step.  ``transformers`` on this project's 2-core CPU, where a forward of a few dozen positions is
compute-bound: 0.05 (a memory-bound GPU: near 0).  llama.cpp, chosen by measurement (benchmarks/rollout_speed.py,
the adapter's 24 ToolSandbox episodes on 2 cores: ms per action token 20.6 without drafts; 20.5, 19.9, 17.4 and
17.0 at 0.15, 0.06, 0.03 and 0.01)."""


def context_limit(model: Any) -> int | None:
    """The model's context in tokens (``max_position_embeddings``), or ``None`` when it declares none."""
    config = getattr(model, "config", None)
    limit = getattr(config, "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) and limit > 0 else None


class StopRule:
    """When a sampled turn is complete.

    ``token_ids``: end-of-turn tokens (the tokenizer's and model's end-of-sequence ids,
    the chat template's end-of-turn marker); the token is not part of the turn's text.
    ``strings``: texts after which the action is whole (e.g. ``"</tool_call>"``): the turn
    ends with the token that completes one, and :meth:`cut_text` drops whatever that
    token wrote after it.  A stop string that never appears costs nothing: the turn then
    ends at an end-of-turn token or at the token limit, as without it.
    An empty stop string, or none of either kind, is a :class:`ValueError`.
    """

    def __init__(self, tokenizer: Any, token_ids: Iterable[int], strings: Sequence[str] = ()):
        self.tokenizer = tokenizer
        self.token_ids = frozenset(int(t) for t in token_ids)
        strings = tuple(strings)
        for s in strings:
            if not isinstance(s, str) or not s:
                raise ValueError(f"a stop string must be a non-empty string, got {s!r}")
        self.strings = strings
        if not self.token_ids and not self.strings:
            raise ValueError("a stop rule needs end-of-turn token ids or stop strings")
        # Every token writes at least one character (or none: a special token), so a stop
        # string completed by the last token lies within its last len(s) + 1 tokens' text.
        self._window = max((len(s) for s in strings), default=0) + 1

    def ends(self, produced: Sequence[int]) -> str | None:
        """How the turn so far ends: ``"token"`` (its last token ends the turn), ``"string"``
        (its text now holds a stop string) or ``None`` (it goes on)."""
        if not produced:
            return None
        if produced[-1] in self.token_ids:
            return "token"
        if self.strings:
            tail = self.tokenizer.decode(list(produced[-self._window:]), skip_special_tokens=True)
            if any(s in tail for s in self.strings):
                return "string"
        return None

    def add(self, produced: list[int], token: int, limit: int, *, keep_stop_token: bool = False,
            stats: DecodeStats | None = None) -> bool:
        """Append ``token`` to the turn ``produced`` (at most ``limit`` tokens); whether the turn is finished now.

        An end-of-turn token is dropped again unless ``keep_stop_token``; ``stats.stops`` counts how the turn ended.
        """
        produced.append(token)
        how = self.ends(produced)
        if how == "token" and not keep_stop_token:
            produced.pop()
        if how is None and len(produced) >= limit:
            how = "limit"
        if how is not None and stats is not None:
            stats.stops[how] += 1
        return how is not None

    def cut_text(self, text: str) -> str:
        """``text`` up to the end of its first stop string (all of it when it holds none)."""
        ends = [text.find(s) + len(s) for s in self.strings if s in text]
        return text[: min(ends)] if ends else text


NUCLEUS_CANDIDATES = 256  # top-p sampling looks for the nucleus among this many most likely tokens first


def pick_tokens(logits: Any, *, greedy: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                min_p: float | None = None, generators: Sequence[Any] | None = None) -> Any:
    """One token per row of ``logits`` (rows x vocabulary): the argmax, or a draw after temperature,
    top-k (0: off), top-p (1.0: off) and min-p (``None``: off) filtering.

    ``generators``: one ``torch.Generator`` per row (a row's draw then depends on nothing else in
    the batch); ``None`` draws from torch's global generator (a trainer's checkpointed RNG state).
    """
    import torch

    if greedy:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k and top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p >= 1.0:
        return _draw([probs[i] for i in range(len(probs))], None, min_p, generators, probs)
    # A row's nucleus usually lies within its few most likely tokens: it draws among those when it does (the
    # same distribution as over the whole vocabulary), else among its whole sorted vocabulary.  The choice is
    # the row's own, so its draw depends on nothing else in the batch.
    width = min(NUCLEUS_CANDIDATES, probs.shape[-1])
    top, order = torch.topk(probs, width, dim=-1)
    before = top.cumsum(dim=-1) - top  # mass of strictly more likely tokens
    rows, index = [], []
    for i in range(len(probs)):
        if width == probs.shape[-1] or bool(before[i, -1] >= top_p):
            kept, ids = top[i].masked_fill(before[i] >= top_p, 0.0), order[i]
            ids, back = ids.sort()  # draw in vocabulary order, as over the whole row: the same token for the same
            rows.append(kept[back])  # generator state, and a draw that near-equal probabilities cannot reorder
            index.append(ids)
            continue
        sorted_p, ids = torch.sort(probs[i], descending=True)
        sorted_p = sorted_p.masked_fill(sorted_p.cumsum(dim=-1) - sorted_p >= top_p, 0.0)
        rows.append(torch.zeros_like(probs[i]).scatter(-1, ids, sorted_p))
        index.append(None)
    return _draw(rows, index, min_p, generators, probs)


def _draw(rows: list[Any], index: list[Any] | None, min_p: float | None, generators: Sequence[Any] | None,
          like: Any) -> Any:
    """One draw per row from ``rows[i]`` (unnormalised probabilities over the ids ``index[i]``; ``None``: the
    vocabulary itself), after min-p; with the row's own generator where given."""
    import torch

    if min_p:
        rows = [r.masked_fill(r < min_p * r.max(), 0.0) for r in rows]
    if generators is None and len({len(r) for r in rows}) == 1:
        picks = torch.multinomial(torch.stack(rows), 1)[:, 0]
    else:
        picks = torch.stack([torch.multinomial(r.to("cpu"), 1, generator=generators[i] if generators else None)
                             for i, r in enumerate(rows)])[:, 0].to(like.device)
    if index is None:
        return picks
    return torch.stack([picks[i] if index[i] is None else index[i][picks[i]] for i in range(len(rows))])


@dataclass
class DecodeStats:
    """Where a sampler's time went: prefill (prompt tokens run) and decode (steps, each a forward of one
    token per row plus its lookahead drafts; drafted and accepted draft tokens)."""

    calls: int = 0
    rows: int = 0
    prompt_tokens: int = 0
    prefilled_tokens: int = 0
    generated_tokens: int = 0
    decode_steps: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    stops: dict[str, int] = field(default_factory=lambda: {"token": 0, "string": 0, "limit": 0})

    def record(self, rows: Sequence[Sequence[int]], produced: Sequence[Sequence[int]], *, prefilled: int, steps: int,
               prefill_s: float, decode_s: float, drafted: int = 0, accepted: int = 0) -> None:
        """Add one decoding call: its prompt ``rows``, what each ``produced``, the prompt tokens run, the decode steps."""
        self.calls += 1
        self.rows += len(rows)
        self.prompt_tokens += sum(len(r) for r in rows)
        self.prefilled_tokens += prefilled
        self.generated_tokens += sum(len(p) for p in produced)
        self.decode_steps += steps
        self.drafted_tokens += drafted
        self.accepted_tokens += accepted
        self.prefill_s += prefill_s
        self.decode_s += decode_s

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in vars(self).items()}


class _Lookup:
    """Prompt-lookup drafts for one row: the tokens that followed the latest earlier occurrence of its last two."""

    def __init__(self, seq: list[int]):
        self.seq = seq
        self.where: dict[tuple[int, int], int] = {}
        for e in range(1, len(seq) - 1):  # bigrams ending before the last position
            self.where[(seq[e - 1], seq[e])] = e

    def append(self, token: int) -> None:
        seq = self.seq
        if len(seq) >= 2:
            self.where[(seq[-2], seq[-1])] = len(seq) - 1
        seq.append(token)

    def draft(self, k: int) -> list[int]:
        seq = self.seq
        if k < 1 or len(seq) < 3:
            return []
        e = self.where.get((seq[-2], seq[-1]))
        return seq[e + 1: e + 1 + k] if e is not None else []


def check_drafting(lookahead: Any, cost: float = 0.0) -> None:
    """:class:`ValueError` unless ``lookahead`` is an int >= 0 and ``cost`` (a draft cost) is in [0, 1)."""
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0:
        raise ValueError(f"lookahead must be an int >= 0, got {lookahead!r}")
    if not 0.0 <= float(cost) < 1.0:
        raise ValueError(f"draft_cost must be in [0, 1), got {cost!r}")


class Drafts:
    """Prompt-lookup drafting for a batch of rows, the one implementation both decoding loops use.

    Row ``key``'s drafts are the tokens that followed the latest earlier occurrence of its last
    two tokens (:class:`_Lookup`).  :meth:`propose` sizes a step's drafts by each row's recent
    acceptance and ``cost`` (the engine's :data:`DRAFT_COST`: what one more position per row adds to a step, as a share of a
    one-token step); :meth:`check` keeps a row's drafts as long as each is the token the
    caller's ``choose`` picks at that position, so the tokens are the ones plain decoding picks.
    ``lookahead`` 0 turns drafting off (every call is then a no-op).
    """

    def __init__(self, rows: Sequence[Sequence[int]], lookahead: int, cost: float):
        self.lookahead, self.cost = max(0, int(lookahead)), float(cost)
        self.lookups: dict[Any, _Lookup] = {}
        self.accept: dict[Any, float] = {}  # each row's running estimate of a draft token's chance to be kept
        self.drafted = self.accepted = 0
        for key, row in enumerate(rows):
            self.start(key, row)

    def start(self, key: Any, row: Sequence[int]) -> None:
        """Draft for a new row ``key`` whose tokens so far are ``row``."""
        if self.lookahead:
            self.lookups[key], self.accept[key] = _Lookup(list(row)), 0.5

    def end(self, key: Any) -> None:
        self.lookups.pop(key, None)
        self.accept.pop(key, None)

    def append(self, key: Any, token: int) -> None:
        if self.lookahead:
            self.lookups[key].append(token)

    def propose(self, live: Sequence[Any], room: Sequence[int]) -> list[list[int]]:
        """Drafts for the rows ``live`` (at most ``room[k]`` tokens for ``live[k]``), as many per row as pay."""
        if not self.lookahead:
            return [[] for _ in live]
        drafts = [self.lookups[key].draft(min(self.lookahead, r)) for key, r in zip(live, room, strict=True)]
        keep = _draft_width(drafts, [self.accept[key] for key in live], list(range(len(live))), self.cost)
        return [d[:keep] for d in drafts]

    def check(self, live: Sequence[Any], column: Callable[[int, list[int]], Any], drafts: Sequence[Sequence[int]],
              choose: Callable[[Any, list[Any]], Sequence[int]], emit: Callable[[Any, int], bool]) -> list[int]:
        """Pick each live row's tokens from the step's logits, position by position, while its drafts hold.

        ``column(j, ks)``: the logits at position ``j`` (after the fed token and ``j`` drafts) of the
        rows ``live[k]`` for ``k`` in ``ks``; ``choose(logits, keys)`` picks one token per row;
        ``emit(key, token)`` adds a token and says whether the row is finished.  Returns how many
        drafts each live row kept (its positions after them hold tokens that are not its own)."""
        kept = [0] * len(live)
        checking = list(range(len(live)))
        j = 0
        while checking:
            toks = choose(column(j, checking), [live[k] for k in checking])
            still = []
            for k, tok in zip(checking, toks, strict=True):
                done = emit(live[k], int(tok))
                if not done and j < len(drafts[k]) and int(tok) == drafts[k][j]:
                    kept[k] += 1
                    still.append(k)
            checking, j = still, j + 1
        for k, key in enumerate(live):
            if drafts[k] and key in self.accept:
                self.drafted += len(drafts[k])
                self.accepted += kept[k]
                self.accept[key] = 0.7 * self.accept[key] + 0.3 * kept[k] / len(drafts[k])
        return kept


def decode_rows(
    model: Any,
    rows: Sequence[Sequence[int]],
    *,
    max_new_tokens: int | Sequence[int],
    pick: Callable[[Any, list[int]], Any],
    stop: StopRule,
    pad_id: int,
    prefix: Any = None,
    keep_stop_token: bool = False,
    lookahead: int = 0,
    draft_cost: float = DRAFT_COST["transformers"],
    stats: DecodeStats | None = None,
) -> list[list[int]]:
    """Continue every row of ``rows`` (token ids) and return the ids each one produced.

    ``max_new_tokens``: one limit for all rows or one per row (each >= 1).  ``pick(logits, idx)``
    maps logits (``len(idx)`` x vocabulary, float32) of the rows ``idx`` to one token each.
    ``stop`` ends a row; its end-of-turn token is kept in the result only with
    ``keep_stop_token`` (training learns to stop; a policy's text has no use for it).
    ``prefix`` is a :class:`~trace_gym.policies.prefix_cache.PrefixKVCache` (``None``: no
    reuse): rows take their longest cached prefix, and each row's prompt is stored for its
    next turn.

    ``lookahead`` > 0 drafts up to that many tokens per row and step by prompt lookup (the
    tokens that followed the latest earlier occurrence of the row's last two tokens: tool
    names, argument values and JSON copied from the prompt, repeated text) and checks them
    all in one forward: a row keeps its drafts as long as each is the token ``pick`` chooses
    at that position, so the tokens are the ones plain decoding chooses (greedy: the argmax
    of the same logits, up to floating-point rounding of a wider forward; sampling: each
    token drawn from its exact conditional), several per weight read.  How many drafts a step
    checks follows each row's recent acceptance and ``draft_cost``: what one more position per
    row adds to a forward, as a share of a one-token forward (:data:`DRAFT_COST`).
    Runs under ``torch.inference_mode``; ``stats`` (if given) is added to.
    """
    import time

    import torch

    from .prefix_cache import PrefixKVCache

    rows = [list(r) for r in rows]
    if not rows:
        return []
    if any(not r for r in rows):
        raise PolicyError("an empty prompt cannot be continued")
    limits = [int(max_new_tokens)] * len(rows) if isinstance(max_new_tokens, int) else [int(n) for n in max_new_tokens]
    if len(limits) != len(rows) or min(limits) < 1:
        raise ValueError(f"max_new_tokens must be >= 1 for each of the {len(rows)} rows, got {max_new_tokens!r}")
    lookahead = max(0, int(lookahead))
    t0 = time.perf_counter()
    device = next(model.parameters()).device
    batch, budget = len(rows), max(limits)
    cache_store = prefix if isinstance(prefix, PrefixKVCache) else None
    with torch.inference_mode():
        out, cache, mask, cache_arg, extra, start, width, capacity, prefilled = _prefill(
            model, rows, cache_store, pad_id=pad_id, budget=budget, lookahead=lookahead, device=device)
        prefill_done = time.perf_counter()

        finished = [False] * batch
        produced: list[list[int]] = [[] for _ in range(batch)]
        drafts = Drafts(rows, lookahead, cost=draft_cost)
        next_pos = [len(r) for r in rows]

        def emit(i: int, tok: int) -> bool:
            """Add ``tok`` to row ``i``; whether the row is finished now."""
            drafts.append(i, tok)
            finished[i] = stop.add(produced[i], tok, limits[i], keep_stop_token=keep_stop_token, stats=stats)
            return finished[i]

        live = list(range(batch))
        for i, tok in zip(live, _tokens(pick(out.logits[:, -1, :].float(), live)), strict=True):
            emit(i, tok)
        column, steps = start + width, 0
        layers = getattr(cache, "layers", [])
        while not all(finished):
            live = [i for i in range(batch) if not finished[i]]
            left = max(limits[i] - len(produced[i]) for i in live)
            ahead = [[] for _ in live]
            if lookahead and column + lookahead + 1 + left <= capacity:
                ahead = drafts.propose(live, [limits[i] - len(produced[i]) - 1 for i in live])
            width_now = 1 + max(len(d) for d in ahead)
            block = torch.full((batch, width_now), pad_id, dtype=torch.long)
            pos = torch.zeros((batch, width_now), dtype=torch.long)
            mask[:, column: column + width_now] = 0
            for i, row_drafts in zip(live, ahead, strict=True):
                fed = [produced[i][-1], *row_drafts]  # a live row's last token is not in the cache yet
                block[i, : len(fed)] = torch.tensor(fed, dtype=torch.long)
                pos[i] = torch.arange(next_pos[i], next_pos[i] + width_now)
                mask[i, column: column + len(fed)] = 1
            for layer in layers:  # write this block at ``column`` (rejected drafts' columns are reused)
                layer.cumulative_length.fill_(column)
            step_extra = {**extra, "logits_to_keep": width_now} if "logits_to_keep" in extra else extra
            out = model(input_ids=block.to(device), attention_mask=mask, position_ids=pos.to(device), use_cache=True,
                        **{cache_arg: cache}, **step_extra)
            cache = out.get(cache_arg)
            logits = out.logits[:, -width_now:, :].float()
            kept = drafts.check(live, lambda j, ks, lg=logits, live=live: lg[[live[k] for k in ks], j, :], ahead,
                                lambda lg, idx: _tokens(pick(lg, idx)), emit)
            advance = 0
            for i, k in zip(live, kept, strict=True):
                n = k + 1  # the fed token and the drafts kept: the row's columns from this block
                mask[i, column + n: column + width_now] = 0
                next_pos[i] += n
                advance = max(advance, n)
            column += advance
            steps += 1
        if stats is not None:
            stats.record(rows, produced, prefilled=prefilled, steps=steps, prefill_s=prefill_done - t0,
                         decode_s=time.perf_counter() - prefill_done, drafted=drafts.drafted, accepted=drafts.accepted)
    return produced


def _prefill(model: Any, rows: list[list[int]], cache_store: Any, *, pad_id: int, budget: int, lookahead: int,
             device: Any) -> tuple[Any, ...]:
    """The first forward of :func:`decode_rows` (under its ``inference_mode``): each row's cached prefix, then the rest of
    its prompt, left-padded into one block.  Returns ``(output, cache, attention mask, the cache's argument name,
    the extra forward arguments, the column where the prefixes end, the prompt block's width, the cache's capacity,
    tokens prefilled)``."""
    import torch
    from transformers import StaticCache

    from .prefix_cache import forward_kwargs, stack_prefixes

    batch = len(rows)
    if cache_store is not None:
        before = cache_store.stats["prefilled_tokens"]
        prefixes = cache_store.row_prefixes(model, rows, device, reuse=True)
        shared_run = cache_store.stats["prefilled_tokens"] - before
    else:
        prefixes, shared_run = [(0, None)] * batch, 0
    lengths = [n for n, _ in prefixes]
    start = max(lengths)
    own = [len(r) - n for r, n in zip(rows, lengths, strict=True)]
    width = max(own)
    # Speculative steps may leave columns of rejected drafts behind (masked): room for them,
    # and a step speculates only while plain steps could still finish every row.
    capacity = start + width + budget + (budget + lookahead + 1 if lookahead else 0)
    ids = torch.full((batch, width), pad_id, dtype=torch.long)
    mask = torch.zeros((batch, capacity), dtype=torch.long)
    positions = torch.zeros((batch, width), dtype=torch.long)
    for i, (r, n, m) in enumerate(zip(rows, lengths, own, strict=True)):
        ids[i, width - m:] = torch.tensor(r[n:], dtype=torch.long)  # left padding of each part
        mask[i, start - n: start] = 1
        mask[i, start + width - m: start + width] = 1
        positions[i, width - m:] = torch.arange(n, n + m)
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    cache = StaticCache(config=_config(model), max_cache_len=capacity)
    if start:  # each row's cached prefix ends at column ``start``
        for j, (k, v) in enumerate(stack_prefixes(prefixes, start, [(start - n, n) for n in lengths])):
            cache.update(k.to(device), v.to(device), j)
    cache_arg, extra = forward_kwargs(model)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **{cache_arg: cache}, **extra)
    cache = out.get(cache_arg)
    if cache_store is not None:  # each row's prompt, for its conversation's next turn
        columns = [[*range(start - n, start), *range(start + width - m, start + width)] if m > 1 else None
                   for n, m in zip(lengths, own, strict=True)]
        cache_store.store_batch(model, rows, cache, columns)
    return out, cache, mask, cache_arg, extra, start, width, capacity, shared_run + sum(own)


def _draft_width(drafts: list[list[int]], accept: list[float], live: list[int], cost: float) -> int:
    """How many draft tokens per row to check this step: the most tokens per unit of forward time.

    A forward over ``w`` positions per row costs ``1 + cost * rows * (w - 1)`` one-token steps (the
    weights are read once; each position adds compute); row ``i`` then yields ``1 + p + p^2 + ...``
    tokens for its ``min(w - 1, len(draft))`` drafts, ``p`` its recent acceptance.
    """
    longest = max((len(drafts[i]) for i in live), default=0)
    best, best_rate = 0, float(len(live))
    for w in range(1, longest + 1):
        gain = 0.0
        for i in live:
            p, term = accept[i], 1.0
            for _ in range(min(w, len(drafts[i]))):
                term *= p
                gain += term
        rate = (len(live) + gain) / (1.0 + cost * len(live) * w)
        if rate > best_rate:
            best, best_rate = w, rate
    return best


def _tokens(picked: Any) -> list[int]:
    return [int(t) for t in (picked.tolist() if hasattr(picked, "tolist") else picked)]


def _config(model: Any) -> Any:
    from .prefix_cache import base_model

    return base_model(model).config
