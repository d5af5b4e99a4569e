"""Resolving evaluation policy specs: ``base``, ``adapter:NAME``, ``routed`` and every plain policy spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["resolve_policy", "EVAL_SPEC_HELP", "add_policy_options", "MAX_NEW_TOKENS", "default_adapters"]

MAX_NEW_TOKENS = 256  # an evaluated policy's generation limit per action unless --max-new-tokens (or a run) says

EVAL_SPEC_HELP = "base | adapter:NAME | routed | scripted:FILE | hf:MODEL | smollm2 | llamacpp:smollm2 | openai:URL#MODEL"


def add_policy_options(p: Any) -> None:
    """The options every command that resolves a ``--policy`` spec takes (an ``argparse`` parser): the base
    model, the adapters folder, the router and generation (``--max-new-tokens``, ``--temperature``, ``--greedy``)."""
    p.add_argument("--model", default=None, help="base model for base/adapter:/routed (default smollm2, or a run's "
                   "model; llamacpp:smollm2 runs it on llama.cpp; hf:MODEL a hub id or folder)")
    p.add_argument("--adapters", default=None, help="folder with manifest.json and router_index (default adapters, or "
                   "a run's DIR/adapters)")
    p.add_argument("--router", choices=["retrieval", "classifier"], default="retrieval")
    p.add_argument("--max-new-tokens", type=int, default=None, help=f"generation limit per action (default "
                   f"{MAX_NEW_TOKENS}, or the run's)")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--greedy", action="store_true")


def _base(model: str, gen: dict[str, Any]):
    from ..policies import policy_from_spec
    from ..policies.model_registry import model_spec

    spec = model if ":" in model or model_spec(model) is not None else f"hf:{model}"
    return policy_from_spec(spec, **gen)


def resolve_policy(spec: str, *, model: str | None = "smollm2", adapters: str | Path | None = "adapters",
                   router: str = "retrieval", **gen: Any):
    """Build the policy an evaluation spec names.

    ``base`` is the base model (``model``: ``smollm2``, a hub name or folder, or any
    policy spec); ``adapter:NAME`` that model with one registered adapter active;
    ``routed`` with every registered adapter, routed once per conversation by the
    ``retrieval`` or ``classifier`` router over ``<adapters>/router_index``.  With a server
    model (``openai:URL#BASE``) the adapters are the server's, by their registered names
    (vLLM's ``--lora-modules NAME=PATH``): ``adapter:NAME`` asks the server for model ``NAME``
    and ``routed`` is a :class:`~trace_gym.route.policy.ServerRoutedPolicy`.  ``None`` for ``model`` or
    ``adapters`` means the default (``smollm2``, ``adapters``).
    """
    model = model or "smollm2"
    adapters = default_adapters(adapters)
    if spec == "base":
        pol = _base(model, gen)
        pol.policy_id = f"base:{getattr(pol, 'policy_id', model)}"
        return pol
    if spec.startswith("adapter:") or spec == "routed":
        from ..policies.openai_compat import OpenAICompatPolicy
        from ..route.policy import AdapterPolicy, RoutedPolicy, ServerRoutedPolicy
        from ..route.registry import AdapterRegistry

        registry = AdapterRegistry(Path(adapters) / "manifest.json")
        base = _base(model, gen)
        served = isinstance(base, OpenAICompatPolicy)
        if spec.startswith("adapter:"):
            name = spec.split(":", 1)[1]
            if served:  # a KeyError naming the registered adapters when NAME is not one
                return base.with_model(registry[name].name, policy_id=f"adapter:{name}")
            return AdapterPolicy(base, registry, fixed=name)
        pol = None if served else AdapterPolicy(base, registry)
        r = _router(router, adapters, base, pol, model)
        mapping = {**{n: n for n in registry.names()}, **registry.by_capability()}
        if served:
            return ServerRoutedPolicy(base, r, registry.names(), mapping)
        return RoutedPolicy(pol, r, mapping)
    from ..policies import policy_from_spec

    return policy_from_spec(spec, **gen)


def default_adapters(adapters: str | Path | None) -> str | Path:
    """``adapters``, or the default adapters folder when none is given."""
    from ..adapters import DEFAULT_ADAPTERS_DIR

    return adapters or DEFAULT_ADAPTERS_DIR


def _router(kind: str, adapters: str | Path, base: Any, pol: Any, model: str) -> Any:
    """The ``retrieval`` or ``classifier`` router over ``<adapters>/router_index`` (``pol``: the adapters on a
    transformers base model, which the classifier scores with; ``None`` for a server model)."""
    from ..route.index import RouterIndex
    from ..route.policy import WeightAdapterPolicy
    from ..route.retrieval import RetrievalRouter

    index_path = Path(adapters) / "router_index"
    if not index_path.with_suffix(".json").exists():
        raise FileNotFoundError(f"no router index at {index_path}.json; build one with `trace-gym route --run DIR` "
                                "(or the demo)")
    retrieval = RetrievalRouter(RouterIndex.load(index_path))
    if kind == "retrieval":
        return retrieval
    if kind == "classifier":
        from ..route.classifier import ClassifierRouter

        if not isinstance(pol, WeightAdapterPolicy):
            raise ValueError(f"the classifier router scores with a transformers model; {model!r} serves its "
                             "adapters itself: use --router retrieval")
        return ClassifierRouter(base.model, base.tokenizer, retrieval=retrieval, base_weights=pol.base_weights)
    raise ValueError(f"unknown router {kind!r}; expected 'retrieval' or 'classifier'")
