"""A GGUF model's weights stored anew for llama.cpp: quantized matrices as floats (or Q8_0), one adapter merged.

:func:`float_gguf` writes the model with its quantized matrices de-quantized to a float type (or
llama.cpp's 8-bit blocks) and, optionally, one PEFT LoRA adapter merged into them: the form in
which llama.cpp serves one adapter fastest.  :func:`merge_into_float_gguf` merges an adapter into
such a float copy in place of its adapted weights (a trainer's every step);
:func:`cached_float_gguf` keeps one converted file per source under a cache folder.  Requires
the ``gguf`` package.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from .gguf_cache import cached_gguf_path, entry
from .lora_gguf import (
    adapter_sources,
    gguf_attention_heads,
    gguf_weight_name,
    llama_cpp_delta,
    lora_pairs,
    read_lora,
    write_gguf_atomically,
)

__all__ = ["FLOAT_TYPES", "WEIGHT_TYPES", "cached_float_gguf", "float_gguf", "float_type", "merge_into_float_gguf"]

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
            name = gguf_weight_name(layer, module)
            shape = tuple(int(d) for d in reversed(tensors[name].shape)) if name in tensors else None
            if shape != (ab["B"].shape[0], ab["A"].shape[1]):
                raise ValueError(f"{adapter_dir} does not fit {Path(model_gguf).name}: its update of {name} is "
                                 f"{ab['B'].shape[0]} x {ab['A'].shape[1]}, the model's weight "
                                 + ("is missing" if shape is None else f"{shape[0]} x {shape[1]}"))
            a, b = llama_cpp_delta(ab, module, heads, kv_heads)
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

    return write_gguf_atomically(out_path, arch, fill)


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
    alpha, r, pairs = lora_pairs(adapter)
    patches = []
    for (layer, module), ab in sorted(pairs.items()):
        name = gguf_weight_name(layer, module)
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
                a, b = llama_cpp_delta(ab, module, heads, kv_heads)  # one update in memory at a time
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


def cached_float_gguf(model_gguf: str | Path, cache_dir: str | Path, *, weight_type: str = "auto",
                      adapter_dir: str | Path | None = None) -> Path:
    """:func:`float_gguf` of ``model_gguf`` (with ``adapter_dir`` merged), written once under ``cache_dir``."""
    kind = float_type(weight_type).lower()
    model_gguf = Path(model_gguf)
    if adapter_dir is None:
        out = cached_gguf_path(cache_dir, model_gguf.stem, kind, [model_gguf])
    else:
        out = cached_gguf_path(cache_dir, Path(adapter_dir).name, f"merged-{kind}", adapter_sources(Path(adapter_dir), model_gguf))
    return entry(out, lambda path: float_gguf(model_gguf, path, weight_type=kind.upper(), adapter_dir=adapter_dir))
