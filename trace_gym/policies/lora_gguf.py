"""A PEFT LoRA adapter of a Llama-family model, written for llama.cpp as a LoRA GGUF.

llama.cpp applies ``scale * alpha / r * B (A x)`` next to each quantized weight; the file
holds, per adapted weight, ``<gguf tensor>.lora_a`` (r x in) and ``.lora_b`` (out x r) and
the adapter's ``alpha``.  llama.cpp stores the query and key projections with their rows
interleaved for its rotary embedding, so ``B`` of those two is permuted the same way.
PEFT's rank-stabilised scaling (``alpha / sqrt(r)``) is written as the equivalent alpha.
Adapters llama.cpp cannot apply as such (DoRA, trained embeddings or output head, modules
saved whole, per-module ranks) raise :class:`ValueError` naming what is in the way.
The model itself re-stored (floats, one adapter merged) is :mod:`~trace_gym.policies.gguf_weights`.
Requires the ``gguf`` and ``safetensors`` packages (``transformers``' GGUF loading needs them too).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from .gguf_cache import cached_gguf_path, entry

__all__ = ["adapter_gguf", "adapter_sources", "gguf_attention_heads", "gguf_weight_name", "llama_cpp_delta",
           "lora_pairs", "model_lora", "read_lora", "write_gguf_atomically", "write_lora_gguf"]

_PROJ = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj)\.lora_([AB])(?:\.[^.]+)?\.weight$")


def gguf_attention_heads(gguf_path: str | Path) -> tuple[str, int, int]:
    """``(architecture, heads, key/value heads)`` from a model GGUF's metadata (read once per file version:
    parsing every metadata field takes seconds for a model with a large vocabulary)."""
    path = Path(gguf_path)
    st = path.stat()
    return _attention_heads(str(path.resolve()), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _attention_heads(gguf_path: str, mtime_ns: int, size: int) -> tuple[str, int, int]:
    from gguf import GGUFReader

    reader = GGUFReader(gguf_path)

    def value(key: str) -> Any:
        field = reader.fields.get(key)
        if field is None:
            return None
        part = field.parts[field.data[0]]
        return bytes(part).decode() if field.types and field.types[0].name == "STRING" else int(part[0])

    arch = value("general.architecture")
    if arch is None:
        raise ValueError(f"{gguf_path} names no general.architecture: not a model GGUF")
    heads = value(f"{arch}.attention.head_count")
    kv = value(f"{arch}.attention.head_count_kv") or heads
    if not heads:
        raise ValueError(f"{gguf_path} gives no {arch}.attention.head_count")
    return str(arch), int(heads), int(kv)


def _rope_rows(b: Any, heads: int) -> Any:
    """``b`` (out x r) with its rows in llama.cpp's rotary order for ``heads`` heads."""
    out, r = b.shape
    if out % (2 * heads):
        raise ValueError(f"an update of {out} rows cannot be split over {heads} attention heads: the adapter does not "
                         "fit this model")
    return b.reshape(heads, 2, out // heads // 2, r).swapaxes(1, 2).reshape(out, r)


def read_lora(adapter_dir: str | Path) -> tuple[float, int, dict[tuple[int, str], dict[str, Any]]]:
    """``(alpha, r, {(layer, module): {"A": r x in, "B": out x r}})`` of the PEFT adapter in ``adapter_dir``
    (float32 numpy), ``alpha`` as llama.cpp scales it (``alpha / r``); :class:`ValueError` names what llama.cpp
    cannot apply."""
    from safetensors.numpy import load_file

    adapter_dir = Path(adapter_dir)
    cfg_path, weights_path = adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"
    if not cfg_path.is_file() or not weights_path.is_file():
        raise ValueError(f"{adapter_dir} is not a PEFT adapter folder (adapter_config.json and adapter_model.safetensors)")
    return _lora(json.loads(cfg_path.read_text(encoding="utf-8")), load_file(str(weights_path)), str(adapter_dir))


def model_lora(peft_model: Any) -> tuple[float, int, dict[tuple[int, str], dict[str, Any]]]:
    """:func:`read_lora` of a PEFT model's active adapter as it is in memory (any dtype; nothing written)."""
    import torch
    from peft import get_peft_model_state_dict

    name = peft_model.active_adapter
    cfg = peft_model.peft_config[name].to_dict()
    with torch.no_grad():
        tensors = {k: v.detach().float().cpu().numpy() for k, v in get_peft_model_state_dict(peft_model, adapter_name=name).items()}
    return _lora(cfg, tensors, f"adapter {name!r}")


def _lora(cfg: dict[str, Any], tensors: dict[str, Any], where: str) -> tuple[float, int, dict[tuple[int, str], dict[str, Any]]]:
    import numpy as np

    if str(cfg.get("peft_type", "LORA")).split(".")[-1] != "LORA":
        raise ValueError(f"{where}: a {cfg.get('peft_type')} adapter, not LoRA")
    blocked = [k for k in ("use_dora", "modules_to_save", "rank_pattern", "alpha_pattern") if cfg.get(k)]
    if blocked:
        raise ValueError(f"{where}: llama.cpp cannot apply this adapter as a LoRA GGUF ({', '.join(blocked)} set)")
    r, alpha = int(cfg["r"]), float(cfg.get("lora_alpha") or cfg["r"])
    if cfg.get("use_rslora"):
        alpha = alpha * math.sqrt(r)  # llama.cpp scales by alpha / r; PEFT's rank-stabilised LoRA by alpha / sqrt(r)
    pairs: dict[tuple[int, str], dict[str, Any]] = {}
    for key, value in tensors.items():
        m = _KEY.search(key)
        if m is None:
            raise ValueError(f"{where}: tensor {key!r} has no place in a llama.cpp LoRA (embeddings, head or "
                             "an unknown module)")
        pairs.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = value.astype(np.float32)
    for (layer, module), ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise ValueError(f"{where}: layer {layer} {module} has lora_{''.join(ab)} only")
    return alpha, r, pairs


def write_gguf_atomically(out_path: str | Path, architecture: str, fill: Any) -> Path:
    """Create a GGUF at ``out_path`` through a temporary file beside it: ``fill(writer)`` adds metadata and tensors."""
    from gguf import GGUFWriter

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        writer = GGUFWriter(tmp, architecture)
        fill(writer)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def gguf_weight_name(layer: int, module: str) -> str:
    """The GGUF tensor a PEFT module of a layer adapts (``self_attn.q_proj`` of layer 3: ``blk.3.attn_q.weight``)."""
    return f"blk.{layer}.{_PROJ[module]}.weight"


def llama_cpp_delta(ab: dict[str, Any], module: str, heads: int, kv_heads: int) -> tuple[Any, Any]:
    """``(A, B)`` with ``B``'s rows in llama.cpp's order (query and key rows are in rotary order there)."""
    a, b = ab["A"], ab["B"]
    if module == "self_attn.q_proj":
        b = _rope_rows(b, heads)
    elif module == "self_attn.k_proj":
        b = _rope_rows(b, kv_heads)
    return a, b


def write_lora_gguf(adapter: str | Path | Any, out_path: str | Path, *, architecture: str, heads: int, kv_heads: int) -> Path:
    """Write a PEFT adapter as a llama.cpp LoRA GGUF at ``out_path`` (atomically): ``adapter`` is an adapter folder
    or a PEFT model (its active adapter as it is in memory)."""
    import numpy as np

    alpha, _, pairs = lora_pairs(adapter)

    def fill(writer: Any) -> None:
        writer.add_string("general.type", "adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", alpha)
        for (layer, module), ab in sorted(pairs.items()):
            a, b = llama_cpp_delta(ab, module, heads, kv_heads)
            name = gguf_weight_name(layer, module)
            writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a))
            writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b))

    return write_gguf_atomically(out_path, architecture, fill)


def lora_pairs(adapter: str | Path | Any) -> tuple[float, int, dict[tuple[int, str], dict[str, Any]]]:
    """:func:`model_lora` of a PEFT model, :func:`read_lora` of an adapter folder."""
    return model_lora(adapter) if hasattr(adapter, "peft_config") else read_lora(adapter)


def adapter_sources(adapter_dir: Path, model_gguf: str | Path) -> list[Path]:
    return [adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors", Path(model_gguf)]


def adapter_gguf(adapter_dir: str | Path, model_gguf: str | Path, cache_dir: str | Path) -> Path:
    """The LoRA GGUF of ``adapter_dir`` for ``model_gguf``, written once under ``cache_dir`` and reused while the
    adapter's weights and config are unchanged."""
    adapter_dir = Path(adapter_dir)
    out = cached_gguf_path(cache_dir, adapter_dir.name, "lora", adapter_sources(adapter_dir, model_gguf))

    def make(path: Path) -> None:
        arch, heads, kv = gguf_attention_heads(model_gguf)
        write_lora_gguf(adapter_dir, path, architecture=arch, heads=heads, kv_heads=kv)

    return entry(out, make)
