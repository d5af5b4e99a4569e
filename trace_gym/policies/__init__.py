"""Policies: what chooses the agent's next text action.

* :class:`ScriptedPolicy` — a fixed list of actions or a Python callable;
* :class:`~trace_gym.policies.hf.HFPolicy` — a Hugging Face ``transformers`` model
  (imported lazily: ``torch`` loads only when it is used);
* :class:`~trace_gym.policies.openai_compat.OpenAICompatPolicy` — any
  OpenAI-compatible chat-completions server, such as vLLM.

:func:`policy_from_spec` builds one from a command-line spec.
"""

from __future__ import annotations

from typing import Any

from .base import Policy, PolicyError, Request, act_batch, reset_policy, supports
from .model_registry import model_spec
from .scripted import ScriptedPolicy, ScriptExhausted, load_actions, parse_actions
from .wrapper import PolicyWrapper

__all__ = [
    "Policy",
    "PolicyError",
    "PolicyWrapper",
    "Request",
    "ScriptedPolicy",
    "ScriptExhausted",
    "act_batch",
    "load_actions",
    "parse_actions",
    "policy_from_spec",
    "reset_policy",
    "supports",
]

SPEC_HELP = ("scripted:FILE | hf:MODEL_OR_PATH | smollm2 | llamacpp:smollm2[@WEIGHTS] | llamacpp:FILE.gguf[@WEIGHTS] | "
             "openai:URL#MODEL")


def policy_from_spec(spec: str, **options: Any) -> Policy:
    """A policy from ``scripted:FILE``, ``hf:MODEL``, ``smollm2``, ``llamacpp:smollm2``, ``llamacpp:FILE.gguf``
    (the model run by llama.cpp, :mod:`trace_gym.policies.llamacpp`; ``@WEIGHTS`` picks its
    ``weight_type``: ``auto``, ``bf16``, ``f16``, ``f32``, ``q8_0`` or ``file``) or ``openai:URL#MODEL``.

    ``options`` go to the policy's constructor where they apply (``max_new_tokens``,
    ``greedy``, ``temperature``, ``seed``, ``batch_size``, ``device`` for Hugging Face
    models, where ``hf:`` also takes a ``.gguf`` file;
    ``temperature``, ``max_tokens``, ``seed``, ``concurrency`` for servers); ``None``
    values are ignored.
    """
    opts = {k: v for k, v in options.items() if v is not None}
    kind, _, rest = spec.partition(":")
    if kind == "scripted":
        if not rest:
            raise ValueError(f"scripted policy needs a file: scripted:FILE (got {spec!r})")
        return ScriptedPolicy.from_file(rest)
    if kind == "hf":
        if not rest:
            raise ValueError(f"hf policy needs a model name or folder: hf:MODEL (got {spec!r})")
        from .hf import HFPolicy

        keep = {k: opts[k] for k in ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "seed", "batch_size", "device") if k in opts}
        return HFPolicy.from_pretrained(rest, **keep)
    if not rest and model_spec(kind) is not None:  # a registered model (smollm2, tiny, ...) in transformers
        from .hf import HFPolicy

        keep = {k: opts[k] for k in ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "seed", "batch_size", "device") if k in opts}
        return HFPolicy.registered(kind, **keep)
    if kind == "llamacpp":
        if not rest:
            raise ValueError(f"llamacpp policy needs a GGUF file or smollm2: llamacpp:FILE.gguf (got {spec!r})")
        from .llamacpp import LlamaCppPolicy

        keep = {k: opts[k] for k in ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "seed", "batch_size") if k in opts}
        rest, _, weights = rest.partition("@")
        if weights:
            from .gguf_weights import WEIGHT_TYPES

            choices = ("auto", "file", *(t.lower() for t in WEIGHT_TYPES))
            if weights.lower() not in choices:
                raise ValueError(f"llamacpp weights must be one of {', '.join(choices)}: llamacpp:FILE.gguf@WEIGHTS "
                                 f"(got {weights!r})")
            keep["weight_type"] = weights.lower()
        return LlamaCppPolicy.registered(rest, **keep) if model_spec(rest) is not None else LlamaCppPolicy(rest, **keep)
    if kind == "openai":
        url, sep, model = rest.rpartition("#")
        if not sep or not url or not model:
            raise ValueError(f"openai policy needs a server URL and a model: openai:URL#MODEL (got {spec!r})")
        from .openai_compat import OpenAICompatPolicy

        keep = {k: opts[k] for k in ("temperature", "max_tokens", "top_p", "seed", "concurrency", "timeout") if k in opts}
        if "max_new_tokens" in opts and "max_tokens" not in keep:
            keep["max_tokens"] = opts["max_new_tokens"]
        if opts.get("greedy"):
            keep["temperature"] = 0.0
        return OpenAICompatPolicy(url, model, **keep)
    raise ValueError(f"unknown policy spec {spec!r}; expected {SPEC_HELP}")
