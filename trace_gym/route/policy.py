"""Inference with adapters: one base model in memory, a PEFT adapter chosen per conversation.

* :class:`AdapterPolicy` wraps an :class:`~trace_gym.policies.hf.HFPolicy`; its PEFT
  model holds every registered adapter and :meth:`AdapterPolicy.use` activates one
  (or none: the base model) before generation.
* :class:`RoutedPolicy` asks a router once per conversation (at its first action)
  which adapter to use and keeps that choice until the next ``reset``; it records
  every decision in :attr:`RoutedPolicy.decisions`.
* :class:`ServerRoutedPolicy` does the same against a vLLM server started with
  ``--enable-lora --lora-modules NAME=PATH ...``: the adapter name is sent as the
  request's ``model`` (multi-LoRA serving), the base model's name for none.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from .base import NO_ADAPTER, Router, first_user_message
from .registry import AdapterRegistry

__all__ = ["AdapterPolicy", "RoutedPolicy", "ServerRoutedPolicy"]


class AdapterPolicy:
    """An HF policy whose model carries several LoRA adapters; ``use(name)`` picks one."""

    accepts_seeds = True

    def __init__(self, base: Any, registry: AdapterRegistry, names: list[str] | None = None, fixed: str | None = None):
        from peft import PeftModel

        self.base, self.registry = base, registry
        names = names or registry.names()
        if not names:
            raise ValueError(f"{registry.manifest} lists no adapters")
        from ..compat import renamed_checkpointing_warnings_hidden

        with renamed_checkpointing_warnings_hidden():  # PEFT asks the model is_gradient_checkpointing
            model = PeftModel.from_pretrained(base.model, str(registry[names[0]].path), adapter_name=names[0])
            for n in names[1:]:
                model.load_adapter(str(registry[n].path), adapter_name=n)
        model.eval()
        base.model = model
        if hasattr(base, "clear_prefix_cache"):
            base.clear_prefix_cache()  # cached prefixes were computed without adapters
        self.names = names
        self.active: str = NO_ADAPTER
        self.fixed = fixed
        self.policy_id = f"adapter:{fixed}" if fixed else "adapters"
        if fixed:
            self.use(fixed)

    def use(self, name: str) -> None:
        if name != NO_ADAPTER and name not in self.names:
            raise KeyError(f"adapter {name!r} not loaded; loaded: {self.names}")
        if name != NO_ADAPTER:
            self.base.model.set_adapter(name)
        self.active = name
        self.base.prefix_cache_key = name  # one prefix KV cache per adapter (and one for none)

    def _ctx(self):
        return self.base.model.disable_adapter() if self.active == NO_ADAPTER else nullcontext()

    def reset(self, seed: int | None = None) -> None:
        self.base.reset(seed)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        with self._ctx():
            return self.base.act(messages, tools)

    def act_batch(self, requests, seeds=None) -> list[str]:
        with self._ctx():
            return self.base.act_batch(requests, seeds=seeds)


class RoutedPolicy:
    """Route once per conversation, then act with the chosen adapter."""

    accepts_seeds = True

    def __init__(self, adapters: AdapterPolicy, router: Router, label_to_adapter: dict[str, str] | None = None):
        self.adapters, self.router = adapters, router
        self.label_to_adapter = label_to_adapter or {n: n for n in adapters.names}
        self.policy_id = f"routed:{router.name}"
        self.decisions: list[dict[str, Any]] = []
        self._cache: dict[tuple[Any, str], str] = {}
        self._seed: int | None = None

    def reset(self, seed: int | None = None) -> None:
        self._seed = seed
        self.adapters.reset(seed)

    def _route(self, messages: list[dict[str, Any]], seed: Any) -> str:
        key = (seed, first_user_message(messages) or "")
        if key not in self._cache:
            label = self.router.route(messages)
            adapter = self.label_to_adapter.get(label, NO_ADAPTER)
            self._cache[key] = adapter
            self.decisions.append({"seed": seed, "label": label, "adapter": adapter, "query": key[1][:200]})
        return self._cache[key]

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        self.adapters.use(self._route(messages, self._seed))
        return self.adapters.act(messages, tools)

    def act_batch(self, requests, seeds=None) -> list[str]:
        seeds = list(seeds) if seeds is not None else [self._seed] * len(requests)
        routes = [self._route(m, s) for (m, _), s in zip(requests, seeds, strict=True)]
        out: list[str | None] = [None] * len(requests)
        for adapter in sorted(set(routes)):
            idx = [i for i, r in enumerate(routes) if r == adapter]
            self.adapters.use(adapter)
            got = self.adapters.act_batch([requests[i] for i in idx], seeds=[seeds[i] for i in idx])
            for i, a in zip(idx, got, strict=True):
                out[i] = a
        return out  # type: ignore[return-value]


class ServerRoutedPolicy:
    """Multi-LoRA serving: route once per conversation, send the adapter name as the model."""

    def __init__(self, server_policy: Any, router: Router, base_model_name: str, label_to_adapter: dict[str, str] | None = None):
        self.server, self.router, self.base_model_name = server_policy, router, base_model_name
        self.label_to_adapter = label_to_adapter or {}
        self.policy_id = f"routed-server:{router.name}"
        self._route: str | None = None

    def reset(self, seed: int | None = None) -> None:
        self._route = None
        if hasattr(self.server, "reset"):
            self.server.reset(seed)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if self._route is None:
            label = self.router.route(messages)
            self._route = self.label_to_adapter.get(label, NO_ADAPTER)
        self.server.model = self.base_model_name if self._route == NO_ADAPTER else self._route
        return self.server.act(messages, tools)
