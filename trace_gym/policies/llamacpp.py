"""A chat policy on llama.cpp (``llama-cpp-python``): a GGUF model run by a purpose-built CPU engine.

:class:`LlamaCppPolicy` prompts, seeds and stops exactly as :class:`~trace_gym.policies.hf.HFPolicy`
does (both are a :class:`~trace_gym.policies.chat.ChatPolicy`: the same tokenizer, chat template
and :func:`~trace_gym.policies.decoding.pick_tokens`), and hands the token rows to :class:`LlamaCppEngine`:

* **Batches.**  One llama.cpp context holds ``slots`` sequences; a step runs every live row's
  next token in one ``llama_decode`` (the weights are read once per step for the batch), and
  :meth:`LlamaCppPolicy.serve` refills a slot as soon as its row's action is complete.
* **Prefix reuse per slot.**  A row goes to the free slot whose cached tokens share the longest
  prefix with it (its conversation's previous turn, or the system prompt and tool listing of
  the last episode played there); only the rest is prefilled.
* **Adapters without reloading.**  PEFT LoRA adapters become llama.cpp LoRA GGUFs once
  (:mod:`~trace_gym.policies.lora_gguf`), switched per batch; one adapter alone is merged.
* **Prompt-lookup drafts.**  A step also feeds each row the tokens that followed the last
  occurrence of its latest two (tool names, arguments, JSON copied from the prompt) as extra
  positions, and keeps those the row's own pick confirms (:class:`~trace_gym.policies.decoding.Drafts`).

The arithmetic is llama.cpp's, so greedy tokens can differ from ``transformers``' by rounding;
``benchmarks/rollout_speed.py`` counts the actions that differ.  Install with
``pip install "trace-gym[llamacpp]"`` (llama-cpp-python 0.3.36 or later, built for this CPU).
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .base import ContextExceeded, PolicyError, RequestQueue
from .chat import ChatPolicy
from .decoding import DRAFT_COST, DecodeStats, Drafts, StopRule, check_drafting
from .hf_models import (
    ModelUnavailableError,
    model_cache_dir,
    require_transformers,
)
from .prefix_cache import common_length

__all__ = ["LlamaCppEngine", "LlamaCppPolicy", "require_llama_cpp"]

_LOG_CALLBACK: Any = None  # kept alive: llama.cpp calls it for every log line


def require_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or :class:`ModelUnavailableError` saying how to install it."""
    try:
        import llama_cpp
    except ImportError:
        raise ModelUnavailableError("the llama.cpp backend needs llama-cpp-python: pip install 'trace-gym[llamacpp]' "
                                    "(it compiles llama.cpp for this machine; a few minutes)") from None
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        llama_cpp.llama_backend_init()
        _LOG_CALLBACK = llama_cpp.llama_log_callback(lambda level, text, user: None)
        llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
    return llama_cpp


class _Slot:
    __slots__ = ("tokens", "adapter", "used")

    def __init__(self) -> None:
        self.tokens: list[int] = []  # what the slot's sequence holds in the KV cache, position by position
        self.adapter: str | None = None
        self.used = 0


class _Row:
    """One row being decoded: its caller's key, prompt tokens, token limit and what it produced so far."""

    __slots__ = ("key", "tokens", "limit", "produced")

    def __init__(self, key: Any, tokens: list[int], limit: int):
        self.key, self.tokens, self.limit = key, tokens, limit
        self.produced: list[int] = []


class LlamaCppEngine:
    """One GGUF model, one context of ``slots`` sequences of ``n_ctx`` tokens each, and its LoRA adapters.

    ``share_prompts``: the sequences share one pool of cells, and rows of a call that begin
    alike store that beginning once (GRPO's groups: one prompt, several samples).  Apart (the
    default), each sequence attends over its own cells only, which is cheaper when the rows are
    different episodes with long contexts.  ``flash_attn``: llama.cpp's flash-attention kernel
    (off by default, slower on a CPU; ``None``: llama.cpp decides).

    Errors: :class:`ModelUnavailableError` when the package is missing or the file cannot be
    loaded; :class:`ValueError` for an adapter that does not fit the model;
    :class:`~trace_gym.policies.base.PolicyError` when llama.cpp fails to decode.
    """

    def __init__(self, model_path: str | Path, *, slots: int = 4, n_ctx: int | None = None, n_threads: int | None = None,
                 n_batch: int = 512, share_prompts: bool = False, flash_attn: bool | None = False):
        lib = require_llama_cpp()
        self._lib = lib
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ModelUnavailableError(f"no GGUF model file at {self.model_path}")
        model_params = lib.llama_model_default_params()
        # no repacked weight layouts (AMX tiles on CPUs that have them): with llama-cpp-python 0.3.36 on an
        # AMX CPU, decoding the 4-bit file through them crashed the process; the plain layouts decode it
        model_params.use_extra_bufts = False
        self._model = lib.llama_model_load_from_file(str(self.model_path).encode(), model_params)
        if not self._model:
            raise ModelUnavailableError(f"llama.cpp could not load {self.model_path}")
        self.n_vocab = int(lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self._model)))
        trained = int(lib.llama_model_n_ctx_train(self._model))
        self.context = min(int(n_ctx), trained) if n_ctx else trained
        self.n_batch = int(n_batch)
        params = lib.llama_context_default_params()
        params.n_ctx = self.context * slots
        params.n_batch = params.n_ubatch = self.n_batch
        params.n_seq_max = slots
        params.n_threads = params.n_threads_batch = int(n_threads or os.cpu_count() or 1)
        # apart, each sequence attends over its own cells only; shared (``share_prompts``), the rows of one call
        # that begin alike store that beginning once, and every sequence attends over the one pool of cells
        self.share_prompts = bool(share_prompts)
        params.kv_unified = self.share_prompts
        # llama.cpp's CPU flash-attention kernel decodes at long contexts at about half the speed of the plain
        # one (SmolLM2, batch 4, 2,048-token context, 2 cores: 28.5 against 53.3 tokens/s), so it is off unless
        # asked for; ``None`` leaves the choice to llama.cpp (on where the backend supports it)
        params.flash_attn_type = -1 if flash_attn is None else int(bool(flash_attn))
        params.no_perf = True
        self._ctx = lib.llama_init_from_model(self._model, params)
        if not self._ctx:
            lib.llama_model_free(self._model)
            raise ModelUnavailableError(f"llama.cpp could not create a context of {slots} x {self.context} tokens")
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(self.n_batch, 0, slots)
        self.slots = [_Slot() for _ in range(slots)]
        self._adapters: dict[str, Any] = {}
        self.active: str | None = None
        self._clock = 0

    # -- adapters ----------------------------------------------------------------------
    def load_adapter(self, name: str, lora_gguf: str | Path) -> None:
        """Load a llama.cpp LoRA GGUF under ``name`` (once; it is applied by :meth:`use`)."""
        if name in self._adapters:
            return
        handle = self._lib.llama_adapter_lora_init(self._model, str(lora_gguf).encode())
        if not handle:
            raise ValueError(f"adapter {name!r} ({lora_gguf}) does not fit the model {self.model_path.name}")
        self._adapters[name] = handle

    def use(self, name: str | None) -> None:
        """Apply adapter ``name`` (``None``: the plain model) to every later decode."""
        if name == self.active:
            return
        lib = self._lib
        if name is None:
            code = lib.llama_set_adapters_lora(self._ctx, None, 0, None)
        else:
            if name not in self._adapters:
                raise KeyError(f"adapter {name!r} not loaded; loaded: {sorted(self._adapters)}")
            handles = (lib.llama_adapter_lora_p_ctypes * 1)(self._adapters[name])
            scales = (ctypes.c_float * 1)(1.0)
            code = lib.llama_set_adapters_lora(self._ctx, handles, 1, scales)
        if code:
            raise PolicyError(f"llama.cpp could not apply adapter {name!r} (code {code})")
        self.active = name

    # -- decoding ----------------------------------------------------------------------
    def _run(self, entries: list[tuple[int, int, Any, bool]]) -> dict[int, Any]:
        """Decode ``(token, position, slot or slots, wants_logits)`` entries (a token of several slots is stored
        once, for all of them: ``share_prompts`` only); logits (float32 numpy) by entry index."""
        import numpy as np

        lib, out = self._lib, {}
        for start in range(0, len(entries), self.n_batch):
            part = entries[start: start + self.n_batch]
            b = self._batch
            for k, (tok, pos, seq, want) in enumerate(part):
                seqs = seq if isinstance(seq, list) else [seq]
                b.token[k], b.pos[k], b.n_seq_id[k], b.logits[k] = tok, pos, len(seqs), want
                for m, q in enumerate(seqs):
                    b.seq_id[k][m] = q
            b.n_tokens = len(part)
            code = lib.llama_decode(self._ctx, b)
            if code:
                raise PolicyError(f"llama.cpp failed to decode a batch of {len(part)} tokens (code {code}: "
                                  "the context is full or the batch is malformed)")
            for k, (_, _, _, want) in enumerate(part):
                if want:
                    ptr = lib.llama_get_logits_ith(self._ctx, k)
                    out[start + k] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        return out

    def _assign(self, rows: list[list[int]], free_slots: Sequence[int] | None = None) -> list[int]:
        """A distinct slot per row (among ``free_slots``; default: all): the one sharing the longest prefix (same
        adapter), then the least recently used."""
        free = set(range(len(self.slots))) if free_slots is None else set(free_slots)
        if len(free) < len(rows):
            raise ValueError(f"{len(rows)} rows for {len(free)} free slots")
        picks = []
        for row in rows:
            best = max(sorted(free), key=lambda s, row=row: (
                common_length(self.slots[s].tokens, row) if self.slots[s].adapter == self.active else 0, -self.slots[s].used))
            free.discard(best)
            picks.append(best)
        return picks

    def _prefill_entries(self, rows: list[list[int]], slots: list[int]) -> tuple[list[list[Any]], list[int], int]:
        """What to decode before ``rows`` can continue: ``(entries, entry of each row's last token, tokens to
        prefill)``.  Each row keeps what its slot's cells already hold; with ``share_prompts`` a row that
        begins as an earlier row of the call (its donor) takes that beginning from it instead of prefilling
        its own copy: the positions the donor's slot holds are copied cell by cell, and the donor's entries
        for the positions after those are marked with this row's slot too.  llama.cpp decodes an entry of
        several slots only while those slots hold the same positions, so a row shares entries only once
        its own cells reach exactly as far as the donor's; its last token always gets an entry (its logits)."""
        lib = self._lib
        entries: list[list[Any]] = []
        owner: dict[tuple[int, int], int] = {}  # (row, position) -> the entry that computes it
        cells: list[int] = []  # per row: positions its slot's cells hold before the entries are decoded
        last_entry, prefilled = [], 0
        for i, (row, s) in enumerate(zip(rows, slots, strict=True)):
            slot = self.slots[s]
            keep = min(common_length(slot.tokens, row) if slot.adapter == self.active else 0, len(row) - 1)
            lib.llama_memory_seq_rm(self._memory, s, keep, -1)
            held, begin = keep, keep
            if self.share_prompts and i:
                donor, shared = max(((j, common_length(rows[j], row)) for j in range(i)), key=lambda p: p[1])
                if shared > keep and keep <= cells[donor]:
                    upto = min(shared, cells[donor], len(row) - 1)
                    if upto > keep:
                        lib.llama_memory_seq_cp(self._memory, slots[donor], s, keep, upto)
                        held = begin = upto
                    if shared > cells[donor] and held == cells[donor]:  # same positions held: share entries
                        for pos in range(held, shared):
                            e = owner[(donor, pos)]
                            entries[e][2].append(s)
                            owner[(i, pos)] = e
                        begin = shared
            for pos in range(begin, len(row)):
                owner[(i, pos)] = len(entries)
                entries.append([row[pos], pos, [s], False])
                prefilled += 1
            last = owner[(i, len(row) - 1)]
            entries[last][3] = True
            last_entry.append(last)
            cells.append(held)
            self._clock += 1
            slot.tokens, slot.adapter, slot.used = list(row), self.active, self._clock
        return entries, last_entry, prefilled

    def decode(self, rows: Sequence[Sequence[int]], *, max_new_tokens: Sequence[int], pick: Callable[[Any, list[int]], Any],
               stop: StopRule, stats: DecodeStats | None = None, keep_stop_token: bool = False, lookahead: int = 0,
               draft_cost: float = DRAFT_COST["llama.cpp"]) -> list[list[int]]:
        """Continue ``rows`` as :func:`~trace_gym.policies.decoding.decode_rows` does, in lock step: :meth:`run`
        without refills, each group of as many rows as there are slots waiting for its longest (``pick(logits,
        idx)`` maps the logits of rows ``idx`` to one token each; ``stop`` ends a row, its end-of-turn token left out
        unless ``keep_stop_token``; ``lookahead`` > 0 checks that many prompt-lookup drafts per row and step)."""
        rows = [list(r) for r in rows]
        out: list[list[int]] = [[] for _ in rows]
        waiting = iter(range(len(rows)))

        def take() -> tuple[int, list[int], int] | None:
            i = next(waiting, None)
            return None if i is None else (i, rows[i], int(max_new_tokens[i]))

        def answer(i: int, produced: list[int]) -> None:
            out[i] = produced

        self.run(take, answer, pick=pick, stop=stop, stats=stats, keep_stop_token=keep_stop_token, lookahead=lookahead,
                 draft_cost=draft_cost, refill=False)
        return out

    def run(self, take: Callable[[], tuple[Any, list[int], int] | None], answer: Callable[[Any, list[int]], None], *,
            pick: Callable[[Any, list[Any]], Any], stop: StopRule, stats: DecodeStats | None = None,
            keep_stop_token: bool = False, lookahead: int = 0, draft_cost: float = DRAFT_COST["llama.cpp"],
            refill: bool = True) -> None:
        """The token-level decoding loop: rows from ``take`` continued in the slots until ``take`` gives ``None``
        and every row taken is answered.

        ``take()`` gives the next row as ``(key, prompt tokens, token limit)`` or ``None`` (none now);
        ``answer(key, produced)`` receives a row's tokens as soon as it is finished (and may make ``take``
        give more).  Each round is one :meth:`advance`: rows taken into free slots are prefilled beside the
        live rows' next tokens and drafts; ``pick(logits, keys)`` (a float32 tensor, one row per key) picks
        a token per row, drafts are kept while they are the picked tokens (:class:`Drafts`, each an extra
        position of the round at ``draft_cost``), and the positions of the others are taken back.
        ``refill`` (continuous batching): a free slot takes a new row in the next round; without it (lock
        step) new rows are taken only once every row in hand is finished.  ``stats`` records each group
        of rows (lock step) or the whole run.  A failed decode raises
        :class:`~trace_gym.policies.base.PolicyError` (no row in hand is answered).
        """
        import numpy as np
        import torch

        live: dict[int, _Row] = {}  # slot -> its row
        done: list[_Row] = []
        drafts = Drafts((), lookahead, draft_cost)  # by slot
        finished: set[int] = set()  # slots whose row finished this round
        clock = {"prefill_s": 0.0, "decode_s": 0.0, "prefilled": 0, "steps": 0}

        def choose(logits: Any, slots: list[int]) -> list[int]:
            return [int(t) for t in pick(torch.from_numpy(logits), [live[s].key for s in slots]).tolist()]

        def emit(s: int, tok: int) -> bool:
            drafts.append(s, tok)
            if stop.add(live[s].produced, tok, live[s].limit, keep_stop_token=keep_stop_token, stats=stats):
                finished.add(s)
                return True
            return False

        def record() -> None:
            if stats is not None and done:
                stats.record([r.tokens for r in done], [r.produced for r in done], prefilled=clock["prefilled"],
                             steps=clock["steps"], prefill_s=clock["prefill_s"], decode_s=clock["decode_s"],
                             drafted=drafts.drafted, accepted=drafts.accepted)
            done.clear()
            clock.update(prefill_s=0.0, decode_s=0.0, prefilled=0, steps=0)
            drafts.drafted = drafts.accepted = 0

        try:
            while True:
                admitted: list[_Row] = []
                while (refill or not live) and len(live) + len(admitted) < len(self.slots):
                    item = take()
                    if item is None:
                        break
                    admitted.append(_Row(*item))
                if not admitted and not live:
                    return
                fed = list(live.items())
                ahead = drafts.propose([s for s, _ in fed], [r.limit - len(r.produced) - 1 for _, r in fed])
                t0 = time.perf_counter()
                slots, first, after, n_pre = self.advance(
                    [r.tokens for r in admitted], [(s, [r.produced[-1], *d]) for (s, r), d in zip(fed, ahead, strict=True)],
                    [s for s in range(len(self.slots)) if s not in live])
                spent = time.perf_counter() - t0
                n_fed = len(fed) + sum(len(d) for d in ahead)
                share = n_pre / (n_pre + n_fed) if n_pre + n_fed else 0.0
                clock["prefill_s"] += spent * share
                clock["decode_s"] += spent * (1 - share)
                clock["prefilled"] += n_pre
                clock["steps"] += bool(fed)  # a decode step: live rows took a token (admissions only: prefill)
                for s, r in zip(slots, admitted, strict=True):
                    live[s] = r
                    drafts.start(s, r.tokens)
                keys = [s for s, _ in fed] + slots
                columns = after + [[f] for f in first]
                finished.clear()
                kept = drafts.check(keys, lambda j, ks, columns=columns: np.stack([columns[k][j] for k in ks]),
                                    ahead + [[] for _ in admitted], choose, emit)
                for (s, _), d, k in zip(fed, ahead, kept[: len(fed)], strict=True):
                    self.rewind(s, len(d) - k)
                for s in keys:
                    if s in finished:
                        r = live.pop(s)
                        drafts.end(s)
                        done.append(r)
                        answer(r.key, r.produced)
                if not live and not refill:
                    record()  # one lock-step group
        finally:
            record()

    def advance(self, new_rows: list[list[int]], feed: list[tuple[int, Sequence[int]]],
                free_slots: Sequence[int]) -> tuple[list[int], list[Any], list[list[Any]], int]:
        """One round of continuous batching, in one ``llama_decode`` where it fits: the rows in ``new_rows``
        start in slots chosen among ``free_slots`` (each keeps the prefix its slot holds; the rest is
        prefilled), and each ``(slot, tokens)`` of ``feed`` appends ``tokens`` (a live row's last token and
        any drafts after it) to that slot's row.  Returns the new rows' slots, the logits after each new
        row's last token, the logits after each fed token (float32 numpy; a list per ``feed`` entry) and the
        tokens prefilled.  Drafts that turn out wrong are taken back with :meth:`rewind`.  On a failed decode
        every slot involved holds nothing."""
        slots = self._assign(new_rows, free_slots) if new_rows else []
        try:
            entries, last_entry, prefilled = self._prefill_entries(new_rows, slots) if new_rows else ([], [], 0)
            first_fed = []
            for s, toks in feed:
                slot = self.slots[s]
                first_fed.append(len(entries))
                for tok in toks:
                    entries.append([tok, len(slot.tokens), s, True])
                    slot.tokens.append(tok)
            got = self._run(entries)
        except BaseException:
            self._forget(slots + [s for s, _ in feed])
            raise
        fed = [[got[first + j] for j in range(len(toks))] for first, (_, toks) in zip(first_fed, feed, strict=True)]
        return slots, [got[e] for e in last_entry], fed, prefilled

    def rewind(self, slot: int, drop: int) -> None:
        """Take back the last ``drop`` positions of ``slot``'s sequence (the drafts a step did not keep)."""
        held = self.slots[slot]
        if drop > 0:
            keep = len(held.tokens) - drop
            self._lib.llama_memory_seq_rm(self._memory, slot, keep, -1)
            del held.tokens[keep:]

    def _forget(self, slots: list[int]) -> None:
        """After a failed decode: these slots' cells may not hold what their tokens say, so they hold nothing."""
        for s in slots:
            self._lib.llama_memory_seq_rm(self._memory, s, 0, -1)
            self.slots[s].tokens, self.slots[s].adapter = [], None

    def close(self) -> None:
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        if getattr(self, "_batch", None) is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        for handle in getattr(self, "_adapters", {}).values():
            lib.llama_adapter_lora_free(handle)
        self._adapters = {}
        if getattr(self, "_ctx", None):
            lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            lib.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


class LlamaCppPolicy(ChatPolicy):
    """A :class:`~trace_gym.policies.chat.ChatPolicy` whose model runs in llama.cpp.

    ``model_path`` is a GGUF file; ``tokenizer`` the Hugging Face tokenizer of the same model
    (its chat template renders the prompts; default: read from the GGUF).  ``batch_size`` is
    the number of sequences decoded in lock step (the engine's slots); ``n_ctx`` each
    sequence's context (default: the model's).  ``weight_type``: ``auto`` (the default),
    ``BF16``, ``F16`` or ``F32`` run a copy of the model with its quantized matrices
    de-quantized to that float type (converted once, cached under the model cache; ``auto``
    is BF16 where the CPU multiplies it natively, else F16); ``Q8_0`` the same copy in
    llama.cpp's 8-bit blocks (half the bytes a decode step reads, every weight rounded once
    more, so greedy actions can differ from the float copy's; an adapter merged into it is
    added in float32 first); ``file`` runs the GGUF's own types.  For a model as small as
    SmolLM2-135M the float copy decodes faster on a CPU than the 4-bit file and computes what
    ``transformers`` computes on the de-quantized weights more closely
    (``benchmarks/rollout_speed.py``).  One difference: float kernels sum one row
    in another order than many, so a token's logits depend slightly on whether its prompt's
    prefix came from a slot's cache (up to about 0.2 in bfloat16, 0.01 in float32, on logits
    around 20); a run repeated in the same order repeats exactly, but a greedy action can
    depend on what the slot held before.  The 4-bit file's integer dot products do not: with
    ``flash_attn=True`` (llama.cpp's flash-attention kernel, off by default because it decodes
    long contexts at about half the speed on a CPU) ``file`` is history-independent; the plain
    attention kernel sums in an order that depends on the batch.  ``lookahead`` (0: off) checks up
    to that many prompt-lookup drafts per row and step, as many as pay at ``draft_cost`` (what
    one more position per row adds to a step, as a share of a one-token step); the tokens are
    the ones plain decoding picks, up to the rounding of a wider batch.  Sampling options as for
    :class:`~trace_gym.policies.hf.HFPolicy`.  :meth:`load_adapter` takes a PEFT LoRA folder;
    :meth:`merge_adapter` serves one merged into the weights.
    """

    def __init__(self, model_path: str | Path, tokenizer: Any = None, *, policy_id: str | None = None, batch_size: int = 4,
                 n_ctx: int | None = None, n_threads: int | None = None, weight_type: str = "auto",
                 flash_attn: bool | None = False, lookahead: int = 8, draft_cost: float = DRAFT_COST["llama.cpp"],
                 **options: Any):
        check_drafting(lookahead, draft_cost)
        model_path = Path(model_path)
        require_llama_cpp()
        if not model_path.is_file():
            raise ModelUnavailableError(f"no GGUF model file at {model_path}")
        if tokenizer is None:
            _, transformers = require_transformers()
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_path.parent), gguf_file=model_path.name)
        super().__init__(tokenizer, policy_id=policy_id or f"llamacpp:{model_path.name}", batch_size=batch_size, **options)
        self.lookahead, self.draft_cost = lookahead, float(draft_cost)
        self._engine_options = {"slots": batch_size, "n_ctx": n_ctx, "n_threads": n_threads, "flash_attn": flash_attn}
        weight_type = "file" if str(weight_type).lower() == "file" else weight_type
        self.source_path, self.weight_type = model_path, weight_type
        self.model_path = self._plain_path()
        self.engine = LlamaCppEngine(self.model_path, **self._engine_options)
        self.adapter: str | None = None
        self.merged: str | None = None  # the adapter merged into the engine's weights (:meth:`merge_adapter`)
        self._lora: dict[str, Path] = {}  # name -> its PEFT folder (the LoRA GGUF is looked up in the cache per load)

    def _plain_path(self) -> Path:
        """The file the plain model runs from: the GGUF itself, or its float (or Q8_0) copy, converted once and
        looked up again at each reopening (the cache may have dropped it meanwhile; it is then made again)."""
        if self.weight_type == "file":
            return self.source_path
        from .gguf_weights import cached_float_gguf

        return cached_float_gguf(self.source_path, model_cache_dir() / "llamacpp", weight_type=self.weight_type)

    @classmethod
    def registered(cls, name: str, **options: Any) -> LlamaCppPolicy:
        """The GGUF of the model registered as ``name`` (:mod:`~trace_gym.policies.model_registry`), sampling with
        its defaults unless ``options`` say otherwise (a :class:`ValueError` when it has no GGUF)."""
        from .model_registry import require_model

        spec = require_model(name)
        if spec.gguf is None or spec.tokenizer is None:
            raise ValueError(f"model {name!r} has no GGUF trace-gym knows: name the file, llamacpp:FILE.gguf")
        options = spec.with_sampling(options)
        options.setdefault("policy_id", f"llamacpp:{name}")
        return cls(spec.gguf(), spec.tokenizer(), **options)

    @classmethod
    def smollm2(cls, **options: Any) -> LlamaCppPolicy:
        """SmolLM2-135M-Instruct's packaged GGUF, with :data:`~trace_gym.policies.hf.SMALL_MODEL_SAMPLING` defaults."""
        return cls.registered("smollm2", **options)

    def context_limit(self) -> int | None:
        return self.engine.context

    def serve(self, queue: RequestQueue) -> None:
        """Answer every request ``queue`` hands out, each in its own slot, continuously: a row whose action is
        complete is answered at once (its episode steps and may queue its next request) and its slot takes
        the next request in the same round, so no row waits for the longest action of a batch
        (:meth:`LlamaCppEngine.run` with refills; :meth:`act_batch` is the same loop without them).

        Each request is prepared and its text finished as :meth:`act_batch` does (:meth:`prepare_row`,
        :meth:`finish_text`: the same prompt, token limit, per-row generator and stop rule), so an action
        is :meth:`act_batch`'s for the same request and episode seed up to rounding: a round that prefills
        one row beside other rows' next tokens can round its logits differently from a lock-step batch
        (llama.cpp's kernels depend on the batch), so a sampled draw, or rarely a greedy one, may differ.
        A request whose prompt leaves no room in the context goes to ``queue.reject``; a failed decode
        raises :class:`~trace_gym.policies.base.PolicyError` (nothing more is answered).
        """
        generators: dict[Any, Any] = {}  # request key -> its row's generator

        def take() -> tuple[Any, list[int], int] | None:
            while (item := queue.take()) is not None:
                key, (messages, tools), seed = item
                prompt = self.render_prompt(messages, tools)
                try:
                    [row] = self._encode([prompt])
                except ContextExceeded as exc:
                    queue.reject(key, exc)
                    continue
                prepared = self.prepare_row(prompt, row, seed)
                generators[key] = prepared.generator
                return key, prepared.row, prepared.limit
            return None

        def answer(key: Any, produced: list[int]) -> None:
            del generators[key]
            queue.answer(key, self.finish_text(produced))

        self.engine.run(take, answer, pick=lambda logits, keys: self._pick(logits, [generators[k] for k in keys]),
                        stop=self.stop_rule, stats=self.decode_stats, lookahead=self.lookahead, draft_cost=self.draft_cost)

    def _decode(self, rows: list[list[int]], limits: list[int], pick: Any) -> list[list[int]]:
        return self.engine.decode(rows, max_new_tokens=limits, pick=pick, stop=self.stop_rule, stats=self.decode_stats,
                                  lookahead=self.lookahead, draft_cost=self.draft_cost)

    # -- adapters ----------------------------------------------------------------------
    def load_adapter(self, name: str, peft_dir: str | Path) -> None:
        """Convert the PEFT LoRA folder ``peft_dir`` (once, cached under the model cache) and load it as ``name``."""
        path = self._lora_gguf(peft_dir)
        if self.merged is None:
            self.engine.load_adapter(name, path)
        self._lora[name] = Path(peft_dir)

    def _lora_gguf(self, peft_dir: str | Path) -> Path:
        """The llama.cpp LoRA GGUF of ``peft_dir``, from the model cache (made again if the cache dropped it)."""
        from .lora_gguf import adapter_gguf

        return adapter_gguf(peft_dir, self.source_path, model_cache_dir() / "llamacpp")

    def merge_adapter(self, name: str, peft_dir: str | Path) -> None:
        """Serve adapter ``name`` merged into the weights: the model with the PEFT LoRA in ``peft_dir`` added into
        every weight it changes, stored as floats or Q8_0 (the policy's ``weight_type``; ``auto`` where that is
        ``file``: 4-bit weights would round most of the update away; :func:`~trace_gym.policies.gguf_weights.float_gguf`,
        written once under the model cache), so acting with it runs no LoRA arithmetic.  Switching to another
        adapter or to none reopens the plain model."""
        from .gguf_weights import cached_float_gguf

        path = cached_float_gguf(self.source_path, model_cache_dir() / "llamacpp",
                                 weight_type="auto" if self.weight_type == "file" else self.weight_type, adapter_dir=peft_dir)
        self._reopen(path)
        self.merged = self.adapter = name

    def _reopen(self, path: Path) -> None:
        self.engine.close()
        self.engine = LlamaCppEngine(path, **self._engine_options)
        self.merged = self.adapter = None

    def use_adapter(self, name: str | None) -> None:
        """Act with adapter ``name`` from now on (``None``: the plain model)."""
        if self.merged is not None:
            if name == self.merged:
                return
            self.model_path = self._plain_path()
            self._reopen(self.model_path)
            for n, peft_dir in self._lora.items():
                self.engine.load_adapter(n, self._lora_gguf(peft_dir))
        self.engine.use(name)
        self.adapter = name

    def close(self) -> None:
        self.engine.close()
