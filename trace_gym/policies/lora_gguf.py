"""A PEFT LoRA adapter of a Llama-family model, written for llama.cpp: as a LoRA GGUF, or merged.

llama.cpp applies ``scale * alpha / r * B (A x)`` next to each quantized weight; the file
holds, per adapted weight, ``<gguf tensor>.lora_a`` (r x in) and ``.lora_b`` (out x r) and
the adapter's ``alpha``.  llama.cpp stores the query and key projections with their rows
interleaved for its rotary embedding, so ``B`` of those two is permuted the same way.
PEFT's rank-stabilised scaling (``alpha / sqrt(r)``) is written as the equivalent alpha.
Adapters llama.cpp cannot apply as such (DoRA, trained embeddings or output head, modules
saved whole, per-module ranks) raise :class:`ValueError` naming what is in the way.
:func:`float_gguf` writes the model itself with its quantized matrices stored as floats and,
optionally, one adapter merged into them: the form in which llama.cpp serves one adapter
fastest.  Requires the ``gguf`` and ``safetensors`` packages (``transformers``' GGUF loading
needs them too).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["FLOAT_TYPES", "WEIGHT_TYPES", "adapter_gguf", "cached_float_gguf", "float_gguf", "float_type", "gguf_attention_heads",
           "merge_into_float_gguf", "model_lora", "read_lora", "write_lora_gguf"]

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


def _write_atomically(out_path: str | Path, architecture: str, fill: Any) -> Path:
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


def _delta(ab: dict[str, Any], module: str, heads: int, kv_heads: int) -> tuple[Any, Any]:
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

    alpha, _, pairs = _adapter_pairs(adapter)

    def fill(writer: Any) -> None:
        writer.add_string("general.type", "adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", alpha)
        for (layer, module), ab in sorted(pairs.items()):
            a, b = _delta(ab, module, heads, kv_heads)
            name = f"blk.{layer}.{_PROJ[module]}.weight"
            writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a))
            writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b))

    return _write_atomically(out_path, architecture, fill)


FLOAT_TYPES = ("BF16", "F16", "F32")
# what :func:`float_gguf` can store the model's matrices as: a float type, or llama.cpp's 8-bit blocks (32 weights
# and one float16 scale each: half the bytes of bfloat16 for a decode step to read, every weight rounded once more)
WEIGHT_TYPES = (*FLOAT_TYPES, "Q8_0")


def float_type(weight_type: str = "auto") -> str:
    """``weight_type`` checked (any case; one of :data:`WEIGHT_TYPES`); ``"auto"`` is ``BF16`` where the CPU
    multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16 in ``/proc/cpuinfo``), else ``F16``."""
    if str(weight_type).upper() in WEIGHT_TYPES:
        return str(weight_type).upper()
    if weight_type == "auto":
        try:
            flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            flags = ""
        return "BF16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "F16"
    raise ValueError(f"weight_type must be auto or one of {', '.join(WEIGHT_TYPES)}; got {weight_type!r}")


def float_gguf(model_gguf: str | Path, out_path: str | Path, *, weight_type: str = "auto",
               adapter_dir: str | Path | None = None) -> Path:
    """Write ``model_gguf`` with every quantized weight matrix stored as ``weight_type`` (a float type, or
    ``Q8_0``), and the PEFT LoRA in ``adapter_dir`` (if any) merged into the weights it changes, at ``out_path``
    (atomically).

    Each quantized matrix is de-quantized exactly; an adapted one gets ``alpha / r * B A``
    added in float32 before it is stored.  Other tensors and all metadata are copied
    unchanged, so llama.cpp runs the result as a plain model with no LoRA arithmetic per
    layer.  On a small model and a CPU the float file is faster as well as closer to the
    de-quantized model ``transformers`` runs (``benchmarks/rollout_speed.py``); a 4-bit type
    would round most of a small update away; ``Q8_0`` keeps 8 bits per weight (the update merged in
    float32 first), for a CPU where reading the weights bounds a decode step, at the price of
    rounding every weight once more (greedy actions can differ).  A matrix whose rows do not
    split into ``Q8_0``'s blocks of 32 is stored as ``F16``.  :class:`ValueError` when the
    adapter does not fit the model (a weight it names is missing or has another shape) or the
    type is unknown.
    """
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType
    from gguf.quants import dequantize, quantize

    qtype = GGMLQuantizationType[float_type(weight_type)]
    arch, heads, kv_heads = gguf_attention_heads(model_gguf)
    reader = GGUFReader(str(model_gguf))
    tensors = {t.name: t for t in reader.tensors}
    updates = {}
    if adapter_dir is not None:
        alpha, r, pairs = read_lora(adapter_dir)
        for (layer, module), ab in sorted(pairs.items()):
            name = f"blk.{layer}.{_PROJ[module]}.weight"
            shape = tuple(int(d) for d in reversed(tensors[name].shape)) if name in tensors else None
            if shape != (ab["B"].shape[0], ab["A"].shape[1]):
                raise ValueError(f"{adapter_dir} does not fit {Path(model_gguf).name}: its update of {name} is "
                                 f"{ab['B'].shape[0]} x {ab['A'].shape[1]}, the model's weight "
                                 + ("is missing" if shape is None else f"{shape[0]} x {shape[1]}"))
            a, b = _delta(ab, module, heads, kv_heads)
            updates[name] = (alpha / r) * (b @ a)
    floats = {GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16}

    def fill(writer: Any) -> None:
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.alignment"):
                continue  # written by the writer itself
            vtype = field.types[0]
            writer.add_key_value(field.name, field.contents(), vtype,
                                 field.types[-1] if vtype == GGUFValueType.ARRAY else None)
        for name, t in tensors.items():
            if name not in updates and (t.tensor_type in floats or len(t.shape) < 2):
                writer.add_tensor(name, t.data, raw_dtype=t.tensor_type)
                continue
            w = dequantize(t.data, t.tensor_type).astype(np.float32)
            kind = qtype if w.shape[-1] % GGML_QUANT_SIZES[qtype][0] == 0 else GGMLQuantizationType.F16
            writer.add_tensor(name, quantize(w + updates[name] if name in updates else w, kind), raw_dtype=kind)

    return _write_atomically(out_path, arch, fill)


def _adapter_pairs(adapter: str | Path | Any) -> tuple[float, int, dict[tuple[int, str], dict[str, Any]]]:
    """:func:`model_lora` of a PEFT model, :func:`read_lora` of an adapter folder."""
    return model_lora(adapter) if hasattr(adapter, "peft_config") else read_lora(adapter)


@lru_cache(maxsize=4)
def _tensor_layout(gguf_path: str, mtime_ns: int, size: int) -> dict[str, tuple[int, str, tuple[int, ...]]]:
    """``{name: (absolute data offset, type name, shape as rows x columns)}`` of a GGUF's tensors (parsed once
    per file version)."""
    from gguf import GGUFReader

    reader = GGUFReader(gguf_path)
    return {t.name: (int(t.data_offset), t.tensor_type.name, tuple(int(d) for d in reversed(t.shape))) for t in reader.tensors}


def merge_into_float_gguf(float_model: str | Path, adapter: str | Path | Any, out_path: str | Path) -> Path:
    """``float_model`` (a float GGUF, as :func:`float_gguf` writes) with ``adapter`` merged into it, at
    ``out_path`` (atomically): a copy of the file whose adapted weights alone are rewritten in place, in
    their own float type, so the result has the source's layout byte for byte elsewhere.

    ``adapter`` is a PEFT adapter folder or a PEFT model (its active adapter as it is in memory).
    Much faster than :func:`float_gguf` (no metadata is parsed or rewritten, nothing is de-quantized):
    the form in which a trainer hands llama.cpp its current weights at every step.  The weights were
    rounded to the float type once already, so a merged weight is rounded twice (the trainer's own
    bfloat16 weights are too).  :class:`ValueError` when the adapter does not fit the model or an
    adapted weight is not stored as a float.
    """
    import shutil

    import numpy as np
    import torch

    src = Path(float_model)
    st = src.stat()
    layout = _tensor_layout(str(src.resolve()), st.st_mtime_ns, st.st_size)
    _, heads, kv_heads = gguf_attention_heads(src)
    alpha, r, pairs = _adapter_pairs(adapter)
    patches = []
    for (layer, module), ab in sorted(pairs.items()):
        name = f"blk.{layer}.{_PROJ[module]}.weight"
        where = layout.get(name)
        if where is None or where[2] != (ab["B"].shape[0], ab["A"].shape[1]):
            raise ValueError(f"the adapter does not fit {src.name}: its update of {name} is {ab['B'].shape[0]} x "
                             f"{ab['A'].shape[1]}, the model's weight " + ("is missing" if where is None else
                                                                        f"{where[2][0]} x {where[2][1]}"))
        if where[1] not in FLOAT_TYPES:
            raise ValueError(f"{src.name} stores {name} as {where[1]}: merge into a float copy (float_gguf)")
        patches.append((where, module, ab))  # every weight checked before anything is written
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        with open(tmp, "r+b") as fh:
            for (offset, kind, shape), module, ab in patches:
                a, b = _delta(ab, module, heads, kv_heads)  # one update in memory at a time
                update = torch.from_numpy(np.ascontiguousarray(b)) @ torch.from_numpy(np.ascontiguousarray(a))
                dtype = dtypes[kind]
                n = shape[0] * shape[1] * torch.finfo(dtype).bits // 8
                fh.seek(offset)
                w = torch.frombuffer(bytearray(fh.read(n)), dtype=dtype).reshape(shape)
                merged = (w.float() + (alpha / r) * update).to(dtype)
                fh.seek(offset)
                fh.write(merged.view(torch.uint8).numpy().tobytes())
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _cached(cache_dir: str | Path, stem: str, tag: str, sources: list[Path]) -> Path:
    """Where the ``tag`` file made from ``sources`` is cached: keyed by their paths, sizes and modification times,
    so a changed source (a retrained adapter) gets a new file."""
    stamp = "|".join(f"{p.resolve()}:{p.stat().st_size}.{p.stat().st_mtime_ns}" for p in sources if p.is_file())
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{stem}-{key}.{tag}.gguf"


def _adapter_sources(adapter_dir: Path, model_gguf: str | Path) -> list[Path]:
    return [adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors", Path(model_gguf)]


def adapter_gguf(adapter_dir: str | Path, model_gguf: str | Path, cache_dir: str | Path) -> Path:
    """The LoRA GGUF of ``adapter_dir`` for ``model_gguf``, written once under ``cache_dir`` and reused while the
    adapter's weights and config are unchanged."""
    adapter_dir = Path(adapter_dir)
    out = _cached(cache_dir, adapter_dir.name, "lora", _adapter_sources(adapter_dir, model_gguf))
    if not out.is_file():
        arch, heads, kv = gguf_attention_heads(model_gguf)
        write_lora_gguf(adapter_dir, out, architecture=arch, heads=heads, kv_heads=kv)
    return out


def cached_float_gguf(model_gguf: str | Path, cache_dir: str | Path, *, weight_type: str = "auto",
                      adapter_dir: str | Path | None = None) -> Path:
    """:func:`float_gguf` of ``model_gguf`` (with ``adapter_dir`` merged), written once under ``cache_dir``."""
    kind = float_type(weight_type).lower()
    model_gguf = Path(model_gguf)
    if adapter_dir is None:
        out = _cached(cache_dir, model_gguf.stem, kind, [model_gguf])
    else:
        out = _cached(cache_dir, Path(adapter_dir).name, f"merged-{kind}", _adapter_sources(Path(adapter_dir), model_gguf))
    if not out.is_file():
        float_gguf(model_gguf, out, weight_type=kind.upper(), adapter_dir=adapter_dir)
    return out
