"""The evaluation's policy kinds, ``base``, ``adapter:NAME`` and ``routed`` (registered with
:func:`~trace_gym.policies.kinds.register_policy_kind` when this module is imported), and
:func:`resolve_policy`, the evaluation's defaults for them over the one policy factory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..policies.kinds import PolicyKind, model_policy_spec, policy_from_spec, register_policy_kind

__all__ = ["resolve_policy", "EVAL_SPEC_HELP", "add_policy_options", "MAX_NEW_TOKENS", "default_adapters", "DEFAULT_MODEL"]

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


DEFAULT_MODEL = "smollm2"  # the base model of base/adapter:/routed unless --model (or a run) says


def _base(options: dict[str, Any]) -> Any:
    """The base model the evaluation kinds act with (``options``: the spec's options less ``adapters`` and
    ``router``)."""
    model = options.pop("model", None) or DEFAULT_MODEL
    return policy_from_spec(model_policy_spec(model), **options)


def _no_argument(kind: str, rest: str) -> None:
    if rest:
        raise ValueError(f"{kind} takes no argument (got {kind}:{rest}); expected {EVAL_SPEC_HELP}")


def _base_kind(rest: str, options: dict[str, Any]) -> Any:
    _no_argument("base", rest)
    options.pop("adapters", None)
    options.pop("router", None)
    model = options.get("model") or DEFAULT_MODEL
    pol = _base(options)
    pol.policy_id = f"base:{getattr(pol, 'policy_id', model)}"
    return pol


def _adapter_kind(name: str | None, options: dict[str, Any]) -> Any:
    """``adapter:NAME`` (``name``), or ``routed`` (``name`` ``None``), over the adapters in ``options["adapters"]``."""
    from ..policies.openai_compat import OpenAICompatPolicy
    from ..route.policy import AdapterPolicy, RoutedPolicy, ServerRoutedPolicy
    from ..route.registry import AdapterRegistry

    adapters = default_adapters(options.pop("adapters", None))
    router = options.pop("router", None) or "retrieval"
    model = options.get("model") or DEFAULT_MODEL
    registry = AdapterRegistry(Path(adapters) / "manifest.json")
    base = _base(options)
    served = isinstance(base, OpenAICompatPolicy)
    if name is not None:
        if served:  # a KeyError naming the registered adapters when NAME is not one
            return base.with_model(registry[name].name, policy_id=f"adapter:{name}")
        return AdapterPolicy(base, registry, fixed=name)
    pol = None if served else AdapterPolicy(base, registry)
    r = _router(router, adapters, base, pol, model)
    mapping = {**{n: n for n in registry.names()}, **registry.by_capability()}
    if served:
        return ServerRoutedPolicy(base, r, registry.names(), mapping)
    return RoutedPolicy(pol, r, mapping)


def _routed_kind(rest: str, options: dict[str, Any]) -> Any:
    _no_argument("routed", rest)
    return _adapter_kind(None, options)


# Every option goes on to the base model's spec, less ``model``, ``adapters`` and ``router``, the kinds' own.
register_policy_kind(PolicyKind("base", "base", _base_kind, None))
register_policy_kind(PolicyKind("adapter", "adapter:NAME", _adapter_kind, None))
register_policy_kind(PolicyKind("routed", "routed", _routed_kind, None))


def resolve_policy(spec: str, *, model: str | None = DEFAULT_MODEL, adapters: str | Path | None = "adapters",
                   router: str = "retrieval", **gen: Any):
    """Build the policy an evaluation spec names: :func:`~trace_gym.policies.policy_from_spec`, with the
    evaluation's kinds registered (by this module) and its base model, adapters folder and router.

    ``base`` is the base model (``model``: ``smollm2``, a hub name or folder, or any
    policy spec); ``adapter:NAME`` that model with one registered adapter active;
    ``routed`` with every registered adapter, routed once per conversation by the
    ``retrieval`` or ``classifier`` router over ``<adapters>/router_index``.  With a server
    model (``openai:URL#BASE``) the adapters are the server's, by their registered names
    (vLLM's ``--lora-modules NAME=PATH``): ``adapter:NAME`` asks the server for model ``NAME``
    and ``routed`` is a :class:`~trace_gym.route.policy.ServerRoutedPolicy`.  ``None`` for ``model`` or
    ``adapters`` means the default (``smollm2``, ``adapters``).  Any other spec is a plain policy spec.
    """
    return policy_from_spec(spec, model=model, adapters=adapters, router=router, **gen)


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
