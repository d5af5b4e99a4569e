"""The kinds of policy a spec string names, and the one factory that builds them (:func:`policy_from_spec`).

A spec is ``KIND:REST`` (``scripted:FILE``, ``hf:MODEL``, ``llamacpp:FILE.gguf``, ``openai:URL#MODEL``) or
the bare name of a registered model (``smollm2``, ``tiny``: :mod:`~trace_gym.policies.model_registry`).
Each kind registers its builder here (:func:`register_policy_kind`), as a model registers its loader in the
model registry; no other module reads a spec's prefix.  A kind that needs more than a spec registers from the
module that owns that context: the evaluation's ``base``, ``adapter:NAME`` and ``routed`` (a base model and
an adapters folder) from :mod:`trace_gym.eval.policies`, accepted once that module is imported::

    register_policy_kind(PolicyKind("mine", "mine:ARG", lambda rest, options: MyPolicy(rest, **options),
                                    options=("seed",)))

Error contract: :func:`policy_from_spec` raises ``ValueError`` for a spec no kind accepts (listing the
registered forms) or a kind's malformed argument; loading errors are the builder's (``OSError`` for a
missing file, :class:`~trace_gym.policies.hf_models.ModelUnavailableError` for a missing package or model).
Registering a kind twice is a ``ValueError`` unless ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .base import Policy
from .model_registry import model_spec, register_named

__all__ = ["PolicyKind", "register_policy_kind", "policy_kind", "policy_kinds", "policy_from_spec", "spec_help",
           "model_policy_spec", "trainable", "MODEL_KIND"]

MODEL_KIND = "model"
"""The kind of a bare registered model name (``smollm2``): no prefix."""

# What the models run in this process take (transformers, llama.cpp), and a server.
_SAMPLING = ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "seed", "batch_size")


@dataclass(frozen=True)
class PolicyKind:
    """One kind of policy spec.

    ``build(rest, options)`` returns the policy for ``KIND:REST`` (``rest`` is the spec itself for
    :data:`MODEL_KIND`), given the ``options`` it takes: the names in ``options`` that the caller passed
    with a value other than ``None`` (any other option is not for this kind and is dropped; ``None``:
    all of them).
    ``usage`` is the form the help texts list; ``trainable`` whether the trainer can put LoRA adapters on
    the model it names (transformers weights, not a server, a script or llama.cpp).
    """

    name: str
    usage: str
    build: Callable[[str, dict[str, Any]], Policy]
    options: tuple[str, ...] | None = ()
    trainable: bool = False

    def takes(self, option: str) -> bool:
        """Whether this kind takes ``option`` (``options=None``: every option, for a kind that hands them on)."""
        return self.options is None or option in self.options


_KINDS: dict[str, PolicyKind] = {}


def register_policy_kind(kind: PolicyKind, *, replace: bool = False) -> PolicyKind:
    """Make ``KIND:...`` a spec :func:`policy_from_spec` accepts."""
    return register_named(_KINDS, kind.name, kind, "policy kind", replace=replace)


def policy_kinds() -> list[PolicyKind]:
    return list(_KINDS.values())


def policy_kind(spec: str) -> tuple[PolicyKind, str] | None:
    """The kind of ``spec`` and the rest of the spec it builds from; ``None`` when no registered kind takes it."""
    name, _, rest = spec.partition(":")
    if name in _KINDS and name != MODEL_KIND:
        return _KINDS[name], rest
    if not rest and model_spec(name) is not None:
        return _KINDS[MODEL_KIND], name
    return None


def spec_help(*names: str) -> str:
    """The forms of the kinds ``names`` (default: every registered kind), as help texts list them."""
    kinds = [_KINDS[n] for n in names] if names else policy_kinds()
    return " | ".join(k.usage for k in kinds)


def policy_from_spec(spec: str, **options: Any) -> Policy:
    """The policy ``spec`` names: ``scripted:FILE``, ``hf:MODEL`` (a hub id or folder; a ``.gguf`` file too),
    a registered model (``smollm2``, ``tiny``), ``llamacpp:smollm2`` or ``llamacpp:FILE.gguf`` (the model run by
    llama.cpp, :mod:`trace_gym.policies.llamacpp`; ``@WEIGHTS`` picks its ``weight_type``: ``auto``, ``bf16``,
    ``f16``, ``f32``, ``q8_0`` or ``file``), ``openai:URL#MODEL``, or any other registered kind.

    ``options`` go to the policy where its kind takes them (``max_new_tokens``, ``greedy``, ``temperature``,
    ``top_k``, ``top_p``, ``seed``, ``batch_size``, and ``device`` for transformers models; ``temperature``,
    ``max_tokens``, ``top_p``, ``seed``, ``concurrency``, ``timeout`` for servers); ``None`` values are ignored.
    """
    found = policy_kind(spec)
    if found is None:
        raise ValueError(f"unknown policy spec {spec!r}; expected {spec_help()}")
    kind, rest = found
    return kind.build(rest, {k: v for k, v in options.items() if v is not None and kind.takes(k)})


def model_policy_spec(model: str) -> str:
    """A front end's ``--model`` as a policy spec: a spec (``KIND:...``) or a registered model name as it is, any
    other name (a hub id or a folder) as ``hf:NAME``."""
    return model if ":" in model or model_spec(model) is not None else f"hf:{model}"


def trainable(model: str) -> bool:
    """Whether the trainer can put LoRA adapters on the model ``model`` names: a kind that loads transformers
    weights (``hf:NAME``, a registered model), or a bare hub id or folder; not a server, a script or llama.cpp."""
    found = policy_kind(model)
    return found is None or found[0].trainable


# ----------------------------------------------------------------------------- the kinds policies/ builds
def _scripted(rest: str, options: Mapping[str, Any]) -> Policy:
    from .scripted import ScriptedPolicy

    if not rest:
        raise ValueError("scripted policy needs a file: scripted:FILE (got 'scripted:')")
    return ScriptedPolicy.from_file(rest)


def _hf(rest: str, options: Mapping[str, Any]) -> Policy:
    from .hf import HFPolicy

    if not rest:
        raise ValueError("hf policy needs a model name or folder: hf:MODEL (got 'hf:')")
    return HFPolicy.from_pretrained(rest, **options)


def _registered(name: str, options: Mapping[str, Any]) -> Policy:
    from .hf import HFPolicy

    return HFPolicy.registered(name, **options)


def _llamacpp(rest: str, options: Mapping[str, Any]) -> Policy:
    from .llamacpp import LlamaCppPolicy

    if not rest:
        raise ValueError("llamacpp policy needs a GGUF file or smollm2: llamacpp:FILE.gguf (got 'llamacpp:')")
    keep = dict(options)
    rest, _, weights = rest.partition("@")
    if weights:
        from .gguf_weights import WEIGHT_TYPES

        choices = ("auto", "file", *(t.lower() for t in WEIGHT_TYPES))
        if weights.lower() not in choices:
            raise ValueError(f"llamacpp weights must be one of {', '.join(choices)}: llamacpp:FILE.gguf@WEIGHTS "
                             f"(got {weights!r})")
        keep["weight_type"] = weights.lower()
    return LlamaCppPolicy.registered(rest, **keep) if model_spec(rest) is not None else LlamaCppPolicy(rest, **keep)


def _openai(rest: str, options: Mapping[str, Any]) -> Policy:
    from .openai_compat import OpenAICompatPolicy

    url, sep, model = rest.rpartition("#")
    if not sep or not url or not model:
        raise ValueError(f"openai policy needs a server URL and a model: openai:URL#MODEL (got 'openai:{rest}')")
    keep = {k: v for k, v in options.items() if k not in ("max_new_tokens", "greedy")}
    if "max_new_tokens" in options and "max_tokens" not in keep:
        keep["max_tokens"] = options["max_new_tokens"]
    if options.get("greedy"):
        keep["temperature"] = 0.0
    return OpenAICompatPolicy(url, model, **keep)


register_policy_kind(PolicyKind("scripted", "scripted:FILE", _scripted))
register_policy_kind(PolicyKind("hf", "hf:MODEL_OR_PATH", _hf, (*_SAMPLING, "device"), trainable=True))
register_policy_kind(PolicyKind(MODEL_KIND, "smollm2", _registered, (*_SAMPLING, "device"), trainable=True))
register_policy_kind(PolicyKind("llamacpp", "llamacpp:smollm2[@WEIGHTS] | llamacpp:FILE.gguf[@WEIGHTS]", _llamacpp,
                                _SAMPLING))
register_policy_kind(PolicyKind("openai", "openai:URL#MODEL", _openai,
                                ("temperature", "max_tokens", "top_p", "seed", "concurrency", "timeout",
                                 "max_new_tokens", "greedy")))
