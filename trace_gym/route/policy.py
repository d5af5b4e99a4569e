"""Inference with adapters: one base model in memory, a PEFT adapter chosen per conversation.

* :class:`AdapterPolicy` picks one (or none: the base model) of the registered adapters before
  generation: :class:`WeightAdapterPolicy` over an :class:`~trace_gym.policies.hf.HFPolicy`
  holds every adapter merged into its own copy of the weights it changes and swaps them in;
  :class:`ServedAdapterPolicy` hands them to a base that serves adapters itself (llama.cpp).
* :class:`RoutedPolicy` asks a router once per conversation (at its first action)
  which adapter to use and keeps that choice until the next ``reset``; it records
  every decision in :attr:`RoutedPolicy.decisions`.
* :class:`ServerRoutedPolicy` does the same against an OpenAI-compatible server that serves the
  adapters by name (vLLM started with ``--enable-lora --lora-modules NAME=PATH ...``,
  :class:`ServerAdapters`): each request's ``model`` is its conversation's adapter, or the base
  model's name for none, and a batch's requests go out concurrently.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from ..policies.base import AdapterServer, ContextExceeded, RequestQueue
from ..policies.lora_merge import mergeable, merged_weights
from ..policies.wrapper import PolicyWrapper
from .base import NO_ADAPTER, Router, first_user_message, tool_names
from .registry import AdapterRegistry

__all__ = ["AdapterError", "AdapterPolicy", "WeightAdapterPolicy", "ServedAdapterPolicy", "RoutedPolicy", "ServerAdapters",
           "ServerRoutedPolicy"]


class AdapterError(ValueError):
    """An adapter cannot serve the loaded base model (another model's adapter, a damaged folder)."""


class AdapterPolicy(PolicyWrapper):
    """A policy with several LoRA adapters; ``use(name)`` picks one (or none: the base model).

    ``AdapterPolicy(base, registry, names=None, fixed=None, merge=True)`` builds the kind ``base``
    calls for: a :class:`ServedAdapterPolicy` when the base holds adapters itself (an
    :class:`~trace_gym.policies.base.AdapterServer`, e.g.
    :class:`~trace_gym.policies.llamacpp.LlamaCppPolicy`), else a :class:`WeightAdapterPolicy`
    over the base's ``transformers`` model (an :class:`~trace_gym.policies.hf.HFPolicy`).
    ``names``: the registered adapters to load (default: all); ``fixed``: the one adapter this
    policy acts with.  An adapter made for another base model raises :class:`AdapterError`;
    :meth:`use` of a name not loaded raises ``KeyError``.  A :class:`~trace_gym.policies.wrapper.PolicyWrapper`
    of ``base`` (:attr:`base`): what it does not define is the base policy's.
    """

    accepts_seeds = True
    serving = False  # whether the base serves the adapters itself (and requests continuously: ``serve``)
    merged = False

    def __new__(cls, base: Any, *args: Any, **kwargs: Any) -> AdapterPolicy:
        if cls is AdapterPolicy:
            cls = ServedAdapterPolicy if isinstance(base, AdapterServer) else WeightAdapterPolicy
        return super().__new__(cls)

    def __init__(self, base: Any, registry: AdapterRegistry, names: list[str] | None = None, fixed: str | None = None,
                 *, merge: bool = True):
        super().__init__(base)
        self.registry = registry
        names = names or registry.names()
        if not names:
            raise ValueError(f"{registry.manifest} lists no adapters")
        if fixed is not None and fixed not in names:
            raise KeyError(f"adapter {fixed!r} not loaded; loaded: {names}")
        self.names, self.fixed, self.active = names, fixed, NO_ADAPTER
        self.policy_id = f"adapter:{fixed}" if fixed else "adapters"

    @property
    def base(self) -> Any:
        """The base policy the adapters are put on."""
        return self.inner

    def _check_name(self, name: str) -> None:
        if name != NO_ADAPTER and name not in self.names:
            raise KeyError(f"adapter {name!r} not loaded; loaded: {self.names}")

    def _unfit(self, name: str, path: Any, exc: BaseException) -> AdapterError:
        return AdapterError(f"adapter {name!r} ({path}) does not fit the base model "
                            f"{getattr(self.base, 'policy_id', '?')}: {_first_line(exc)}")

    def use(self, name: str) -> None:
        raise NotImplementedError

    def reset(self, seed: int | None = None) -> None:
        self.base.reset(seed)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.base.act(messages, tools)

    def act_batch(self, requests, seeds=None) -> list[str]:
        return self.base.act_batch(requests, seeds=seeds)


class WeightAdapterPolicy(AdapterPolicy):
    """Adapters on a ``transformers`` base policy's model (an :class:`~trace_gym.policies.hf.HFPolicy`).

    With ``merge=True`` (the default) every adapter's LoRA update is added into a copy of
    the weights it changes, once, at load; the PEFT wrapper is then removed and ``use``
    swaps those weight sets in and out of the plain model, so acting with an adapter costs
    what acting with the base model costs, and switching costs nothing (no reload, no copy).
    Memory: one copy of the adapted weights per adapter.  The merged product
    ``W + BA`` rounds differently from ``Wx + B(Ax)``, so a greedy action can differ by a
    token from the unmerged one; ``merge=False`` keeps PEFT's unmerged arithmetic (and its
    per-layer overhead).  Adapters PEFT cannot merge as a weight delta (DoRA) are served
    unmerged.  :meth:`base_weights` puts the base model's weights in place for a while (a
    router that scores with them).
    """

    def __init__(self, base: Any, registry: AdapterRegistry, names: list[str] | None = None, fixed: str | None = None,
                 *, merge: bool = True):
        super().__init__(base, registry, names, fixed, merge=merge)
        from peft import PeftModel

        from ..compat import renamed_checkpointing_warnings_hidden

        names = self.names
        self._weights: dict[str, dict[str, Any]] | None = None
        # A fixed adapter is the only one a merged policy needs.
        loading = [fixed] if (fixed and merge) else names
        model = base.model
        with renamed_checkpointing_warnings_hidden():  # PEFT asks the model is_gradient_checkpointing
            for i, n in enumerate(loading):
                path = registry[n].path
                try:
                    if i == 0:
                        model = PeftModel.from_pretrained(model, str(path), adapter_name=n)
                    else:
                        model.load_adapter(str(path), adapter_name=n)
                except (RuntimeError, ValueError, KeyError, OSError) as exc:  # the base policy is not to be reused
                    raise self._unfit(n, path, exc) from None
        model.eval()
        if merge and mergeable(model, loading):
            self._weights = {NO_ADAPTER: merged_weights(model, None), **{n: merged_weights(model, n) for n in loading}}
            model = model.unload()  # the plain model: adapters are now weight sets to swap in
        base.model = model
        if hasattr(base, "clear_prefix_cache"):
            base.clear_prefix_cache()  # cached prefixes were computed without adapters
        self.merged = self._weights is not None
        if fixed:
            self.use(fixed)

    def use(self, name: str) -> None:
        self._check_name(name)
        if self._weights is not None:
            if name not in self._weights:
                raise KeyError(f"adapter {name!r} was not merged (this policy serves {self.fixed!r} only)")
            if name != self.active:
                self._swap(name)
        elif name != NO_ADAPTER:
            self.base.model.set_adapter(name)
        self.active = name
        self.base.prefix_cache_key = name  # one prefix KV cache per adapter (and one for none)

    def _swap(self, name: str) -> None:
        model = self.base.model
        for path, weight in self._weights[name].items():  # type: ignore[index]
            model.get_submodule(path).weight.data = weight

    @contextmanager
    def base_weights(self) -> Iterator[None]:
        """The base model's weights in place for the duration (e.g. for a router that scores with them)."""
        if self._weights is None:
            with self.base.model.disable_adapter():
                yield
            return
        self._swap(NO_ADAPTER)
        try:
            yield
        finally:
            self._swap(self.active)

    def _ctx(self):
        if self._weights is None and self.active == NO_ADAPTER:
            return self.base.model.disable_adapter()
        return nullcontext()

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        with self._ctx():
            return self.base.act(messages, tools)

    def act_batch(self, requests, seeds=None) -> list[str]:
        with self._ctx():
            return self.base.act_batch(requests, seeds=seeds)


class ServedAdapterPolicy(AdapterPolicy):
    """Adapters held by a base policy that serves them itself (an :class:`~trace_gym.policies.base.AdapterServer`).

    The base is handed each registered adapter (``load_adapter``) and switched by :meth:`use`;
    with ``merge`` and a ``fixed`` adapter it serves that adapter merged into its weights
    (``merge_adapter``).  :meth:`serve` is the base's continuous serving: every request is
    answered with the adapter in use, as by :meth:`act_batch`.  There are no ``transformers``
    weights to score with (no ``base_weights``).
    """

    serving = True

    def __init__(self, base: AdapterServer, registry: AdapterRegistry, names: list[str] | None = None,
                 fixed: str | None = None, *, merge: bool = True):
        super().__init__(base, registry, names, fixed, merge=merge)
        # one adapter, served by a base that can merge it: merged weights, no LoRA arithmetic per layer
        self.merged = bool(fixed and merge)
        for n in ([fixed] if fixed else self.names):
            try:
                (base.merge_adapter if self.merged else base.load_adapter)(n, registry[n].path)
            except (ValueError, OSError) as exc:
                raise self._unfit(n, registry[n].path, exc) from None
        if fixed:
            self.use(fixed)

    def use(self, name: str) -> None:
        self._check_name(name)
        if self.fixed and name not in (self.fixed, NO_ADAPTER):
            raise KeyError(f"adapter {name!r} was not loaded (this policy serves {self.fixed!r} only)")
        self.base.use_adapter(None if name == NO_ADAPTER else name)
        self.active = name

    def serve(self, queue: RequestQueue) -> None:
        """The base's :meth:`~trace_gym.policies.base.AdapterServer.serve`, with the adapter in use."""
        self.base.serve(queue)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class RoutedPolicy(PolicyWrapper):
    """Route once per conversation, then act with the chosen adapter (a
    :class:`~trace_gym.policies.wrapper.PolicyWrapper` of :attr:`adapters`)."""

    accepts_seeds = True

    def __init__(self, adapters: AdapterPolicy, router: Router, label_to_adapter: dict[str, str] | None = None):
        super().__init__(adapters)
        self.router = router
        self.label_to_adapter = label_to_adapter or {n: n for n in adapters.names}
        self.policy_id = f"routed:{router.name}"
        self.decisions: list[dict[str, Any]] = []
        self._cache: dict[tuple[Any, str], str] = {}
        self._seed: int | None = None

    @property
    def adapters(self) -> Any:
        """The adapters routed between (an :class:`AdapterPolicy`, or :class:`ServerAdapters`)."""
        return self.inner

    def reset(self, seed: int | None = None) -> None:
        self._seed = seed
        self.adapters.reset(seed)

    def _route(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: Any) -> str:
        names = tool_names(tools)
        key = (seed, first_user_message(messages) or "", tuple(names) if names is not None else None)
        if key not in self._cache:
            label = self.router.route(messages, tools)
            adapter = self.label_to_adapter.get(label, NO_ADAPTER)
            self._cache[key] = adapter
            self.decisions.append({"seed": seed, "label": label, "adapter": adapter, "query": key[1][:200]})
        return self._cache[key]

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        self.adapters.use(self._route(messages, tools, self._seed))
        return self.adapters.act(messages, tools)

    def act_batch(self, requests, seeds=None) -> list[str]:
        seeds = list(seeds) if seeds is not None else [self._seed] * len(requests)
        routes = [self._route(m, t, s) for (m, t), s in zip(requests, seeds, strict=True)]
        out: list[str | None] = [None] * len(requests)
        over: list[tuple[int, int]] = []  # (request index, prompt length) of requests past the context
        limit, message = 0, ""
        for adapter in sorted(set(routes)):
            idx = [i for i, r in enumerate(routes) if r == adapter]
            self.adapters.use(adapter)
            try:
                got = self.adapters.act_batch([requests[i] for i in idx], seeds=[seeds[i] for i in idx])
            except ContextExceeded as exc:  # named in this adapter's sub-batch: map back to the request indices
                over.extend((idx[r], n) for r, n in zip(exc.rows, exc.lengths, strict=True))
                limit, message = exc.limit, str(exc)
                continue
            for i, a in zip(idx, got, strict=True):
                out[i] = a
        if over:
            over.sort()
            raise ContextExceeded(message, [i for i, _ in over], [n for _, n in over], limit)
        return out  # type: ignore[return-value]


class ServerAdapters:
    """Adapters served by an OpenAI-compatible server under their own names, as vLLM serves LoRA adapters
    (``vllm serve BASE --enable-lora --lora-modules NAME=PATH ...``; see docs/gpu.md): the adapter is chosen
    by the request's ``model`` field.

    ``server`` is the policy for the base model (an
    :class:`~trace_gym.policies.openai_compat.OpenAICompatPolicy`, its ``model`` the served base model's
    name); ``names`` the adapters the server serves.  :meth:`use` picks one (or :data:`NO_ADAPTER`);
    a name not listed is a ``KeyError``.  A name the server does not serve comes back as its HTTP
    error, a :class:`~trace_gym.policies.base.PolicyError`.  :attr:`policies` holds one policy per
    served name, all with the server's settings.
    """

    accepts_seeds = True
    serving = False
    merged = False

    def __init__(self, server: Any, names: list[str]):
        self.server, self.names, self.active = server, list(names), NO_ADAPTER
        self.policies = {NO_ADAPTER: server, **{n: server.with_model(n, policy_id=f"adapter:{n}") for n in self.names}}

    def use(self, name: str) -> None:
        if name not in self.policies:
            raise KeyError(f"adapter {name!r} is not served; served: {self.names}")
        self.active = name

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.policies[self.active].act(messages, tools)

    def act_batch(self, requests, seeds=None) -> list[str]:
        return self.policies[self.active].act_batch(requests)


class ServerRoutedPolicy(RoutedPolicy):
    """Routed adapters behind an OpenAI-compatible server (:class:`ServerAdapters`): each conversation is routed
    once, as by :class:`RoutedPolicy`, and every request carries its conversation's adapter (or the base model)
    as its ``model``.  :meth:`act_batch` sends a batch's requests concurrently (up to the server policy's
    ``concurrency``) whatever adapters they go to.

    ``names``: the adapters the server serves; ``label_to_adapter`` maps the router's labels to them
    (default: each name to itself); a label mapped to a name not served is a :class:`ValueError` here,
    an unmapped label goes to the base model.
    """

    def __init__(self, server: Any, router: Router, names: list[str], label_to_adapter: dict[str, str] | None = None):
        mapping = dict(label_to_adapter) if label_to_adapter else {n: n for n in names}
        unserved = sorted({a for a in mapping.values() if a != NO_ADAPTER and a not in names})
        if unserved:
            raise ValueError(f"the router's labels map to adapters the server does not serve: {unserved}; served: {list(names)}")
        super().__init__(ServerAdapters(server, names), router, mapping)  # type: ignore[arg-type]
        self.policy_id = f"routed-server:{router.name}"

    def act_batch(self, requests, seeds=None) -> list[str]:
        from concurrent.futures import ThreadPoolExecutor

        seeds = list(seeds) if seeds is not None else [self._seed] * len(requests)
        routes = [self._route(m, t, s) for (m, t), s in zip(requests, seeds, strict=True)]
        policies = self.adapters.policies
        if len(requests) <= 1:
            return [policies[r].act(m, t) for (m, t), r in zip(requests, routes, strict=True)]
        workers = min(int(getattr(self.adapters.server, "concurrency", 8)), len(requests))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda i: policies[routes[i]].act(*requests[i]), range(len(requests))))
