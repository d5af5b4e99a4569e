"""A PEFT LoRA adapter of a Llama-family model, written as a llama.cpp LoRA GGUF.

llama.cpp applies ``scale * alpha / r * B (A x)`` next to each quantized weight; the file
holds, per adapted weight, ``<gguf tensor>.lora_a`` (r x in) and ``.lora_b`` (out x r) and
the adapter's ``alpha``.  llama.cpp stores the query and key projections with their rows
interleaved for its rotary embedding, so ``B`` of those two is permuted the same way.
PEFT's rank-stabilised scaling (``alpha / sqrt(r)``) is written as the equivalent alpha.
Adapters llama.cpp cannot apply as such (DoRA, trained embeddings or output head, modules
saved whole, per-module ranks) raise :class:`ValueError` naming what is in the way.
Requires the ``gguf`` and ``safetensors`` packages (``transformers``' GGUF loading needs them too).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["adapter_gguf", "gguf_attention_heads", "write_lora_gguf"]

_PROJ = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj)\.lora_([AB])(?:\.[^.]+)?\.weight$")


def gguf_attention_heads(gguf_path: str | Path) -> tuple[str, int, int]:
    """``(architecture, heads, key/value heads)`` from a model GGUF's metadata."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))

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
    return b.reshape(heads, 2, out // heads // 2, r).swapaxes(1, 2).reshape(out, r)


def write_lora_gguf(adapter_dir: str | Path, out_path: str | Path, *, architecture: str, heads: int, kv_heads: int) -> Path:
    """Write the PEFT adapter in ``adapter_dir`` as a llama.cpp LoRA GGUF at ``out_path`` (atomically)."""
    import numpy as np
    from gguf import GGUFWriter
    from safetensors.numpy import load_file

    adapter_dir = Path(adapter_dir)
    cfg_path, weights_path = adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"
    if not cfg_path.is_file() or not weights_path.is_file():
        raise ValueError(f"{adapter_dir} is not a PEFT adapter folder (adapter_config.json and adapter_model.safetensors)")
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    if cfg.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"{adapter_dir}: a {cfg.get('peft_type')} adapter, not LoRA")
    blocked = [k for k in ("use_dora", "modules_to_save", "rank_pattern", "alpha_pattern") if cfg.get(k)]
    if blocked:
        raise ValueError(f"{adapter_dir}: llama.cpp cannot apply this adapter as a LoRA GGUF ({', '.join(blocked)} set)")
    r, alpha = int(cfg["r"]), float(cfg.get("lora_alpha") or cfg["r"])
    if cfg.get("use_rslora"):
        alpha = alpha * math.sqrt(r)  # llama.cpp scales by alpha / r; PEFT's rank-stabilised LoRA by alpha / sqrt(r)
    tensors = load_file(str(weights_path))
    pairs: dict[tuple[int, str], dict[str, Any]] = {}
    for key, value in tensors.items():
        m = _KEY.search(key)
        if m is None:
            raise ValueError(f"{adapter_dir}: tensor {key!r} has no place in a llama.cpp LoRA (embeddings, head or "
                             "an unknown module)")
        pairs.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = value.astype(np.float32)
    writer_path = Path(out_path)
    writer_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{writer_path.name}.", dir=writer_path.parent)
    os.close(fd)
    try:
        writer = GGUFWriter(tmp, architecture)
        writer.add_string("general.type", "adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", alpha)
        for (layer, module), ab in sorted(pairs.items()):
            if set(ab) != {"A", "B"}:
                raise ValueError(f"{adapter_dir}: layer {layer} {module} has lora_{''.join(ab)} only")
            a, b = ab["A"], ab["B"]
            if module == "self_attn.q_proj":
                b = _rope_rows(b, heads)
            elif module == "self_attn.k_proj":
                b = _rope_rows(b, kv_heads)
            name = f"blk.{layer}.{_PROJ[module]}.weight"
            writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a))
            writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, writer_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return writer_path


def adapter_gguf(adapter_dir: str | Path, model_gguf: str | Path, cache_dir: str | Path) -> Path:
    """The LoRA GGUF of ``adapter_dir`` for ``model_gguf``, written once under ``cache_dir`` and reused while the
    adapter's weights and config are unchanged (keyed by their size and modification time)."""
    adapter_dir = Path(adapter_dir)
    stamp = "-".join(f"{p.stat().st_size}.{p.stat().st_mtime_ns}"
                     for p in (adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors") if p.is_file())
    key = hashlib.sha256(f"{adapter_dir.resolve()}|{stamp}|{Path(model_gguf).resolve()}".encode()).hexdigest()[:16]
    out = Path(cache_dir) / f"{adapter_dir.name}-{key}.lora.gguf"
    if not out.is_file():
        arch, heads, kv = gguf_attention_heads(model_gguf)
        write_lora_gguf(adapter_dir, out, architecture=arch, heads=heads, kv_heads=kv)
    return out
