"""Which engine runs a local model's rollouts and evaluations: llama.cpp where it is installed and the model
has a GGUF copy (SmolLM2's packaged file), transformers otherwise.

Training always runs on transformers; only acting is moved.  ``auto`` picks llama.cpp when
``llama-cpp-python`` is importable (the ``llamacpp`` extra, which ``make`` installs), so a fresh
checkout decodes about twice as fast as on transformers (``benchmarks/rollout_speed.py``), and falls
back to transformers where it is not.  The two engines compute the same model on the same float
weights; greedy actions agree up to the rounding of the kernels (``docs/performance.md``).
"""

from __future__ import annotations

import importlib.util

__all__ = ["ENGINES", "llama_cpp_installed", "acting_spec"]

ENGINES = ("auto", "transformers", "llamacpp")


def _gguf_models() -> list[str]:
    """The registered models with a GGUF copy (:mod:`~trace_gym.policies.model_registry`)."""
    from .model_registry import model_names, model_spec

    return [n for n in model_names() if model_spec(n).gguf is not None]


def llama_cpp_installed() -> bool:
    """Whether ``llama-cpp-python`` can be imported (without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def acting_spec(model: str, engine: str = "auto") -> str:
    """The policy spec that acts as ``model`` on ``engine``: ``model`` itself for transformers, its llama.cpp
    spec for ``llamacpp`` (and for ``auto`` where llama.cpp is installed and the model has a GGUF copy).

    ``ValueError`` for an unknown engine, or ``llamacpp`` asked of a model without a GGUF copy."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "transformers":
        return model
    gguf = _gguf_models()
    if model not in gguf:
        if engine == "llamacpp":
            raise ValueError(f"engine llamacpp runs {', '.join(gguf)} only (their GGUF copy); "
                             f"{model!r} runs on transformers")
        return model
    if engine == "llamacpp" or llama_cpp_installed():
        return f"llamacpp:{model}"
    return model
