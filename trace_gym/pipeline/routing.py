"""TRACE's routing stage: the router index and its accuracy (stage 6 of :mod:`trace_gym.pipeline.loop`).

:func:`build_router` builds the index that sends each conversation to an adapter or to none — retrieval
examples per adapter (its env's requests and the target episodes the analysis labelled as lacking its
capability), the base model's successes under ``none``, with the ``needs`` rule a need gate learned from the
learning tasks (:mod:`trace_gym.pipeline.gate`) and, with ``adapter_choice="select"``, the choice between
per-capability adapters and the joint one (:mod:`trace_gym.pipeline.selection`); :func:`held_out_routing`
measures where held-out conversations go.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.outcome import is_success
from .budget import RolloutBudget
from .gate import build_gate
from .selection import PER_CAPABILITY
from .stages import Analysis, Rollouts, capability_factory
from .store import StageOutput
from .target import Target
from .training import TrainedAdapter

__all__ = ["Routing", "build_router", "held_out_routing"]


# ----------------------------------------------------------------------------- 6. routing
@dataclass
class Routing(StageOutput):
    index: str | None = None       # the saved index (without suffix): <index>.json and <index>.npy
    index_examples: dict[str, int] = field(default_factory=dict)  # label -> examples (outcome examples included)
    n_examples: int = 0
    labels: list[str] = field(default_factory=list)
    n: int = 0                     # target trajectories routed against the analysis labels
    correct: int = 0
    accuracy: float = 0.0
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    rollouts: int = 0
    skipped: str | None = None
    missing: list[str] = field(default_factory=list)  # one line per adapter the index holds no example of
    loo_correct: int | None = None  # the same episodes, each routed with its own example left out of the index
    loo_confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    rule: str = "vote"             # the router's rule (RetrievalRouter), stored with the index
    # routing from outcomes (pipeline.outcomes): per train scenario, task, seed, reward per source ("none": the
    # base model) and the label (the best, ties to the base model); the adapters' episodes it charged
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    outcome_rollouts: int = 0
    gate: dict[str, Any] = field(default_factory=dict)       # the needs rule's gate: its calibration and examples
    selection: dict[str, Any] = field(default_factory=dict)  # per-capability or joint, as the learning tasks chose
    adapters_choice: str = ""                                # the needs rule's adapters: per-capability or joint

    @property
    def loo_accuracy(self) -> float | None:
        return self.loo_correct / self.n if self.loo_correct is not None and self.n else None

    def artifacts(self) -> list[str]:
        return [f"{self.index}.json", f"{self.index}.npy"] if self.index else []


def build_router(adapters: list[TrainedAdapter], specs: dict[str, str], rollouts: Rollouts, analysis: Analysis,
                 index_path: str | Path, *, target: Target, seed: int, seeds: int, env_kwargs: dict[str, Any],
                 embedder: str | None = None, budget: RolloutBudget | None = None,
                 env_kwargs_by_capability: dict[str, dict[str, Any]] | None = None, rule: str = "vote",
                 outcomes: Any = None, learning_tasks: list[str] | None = None, joint: str | None = None,
                 adapter_choice: str = "per-capability", need_examples: int = 24, selection: Any = None) -> Routing:
    """The router index: per adapter, its env's reference solutions and the target's own train episodes that the
    analysis labelled as lacking its capability; under "none", the target episodes the base model passes.

    ``specs`` maps a capability to its spec file; ``env_kwargs_by_capability`` gives a
    capability's own kwargs (its tuned difficulty) in place of ``env_kwargs``.  The
    reference solution may need more turns than the model's step limit, so ``max_steps``
    is dropped.  A failed target episode lacking capability c (by the analysis' labels,
    :func:`~trace_gym.route.build.true_route_labels`) is an example of c: the conversations
    the adapter must receive at evaluation look like it, not like the synthetic env's.
    Accuracy and confusion are measured on the same train episodes, once with the index whole (each finds
    its own example) and once leaving each episode's own example out (``loo_*``: what a new conversation
    like it would get); held-out routing is :func:`held_out_routing`.  ``rule`` is the routing rule stored with
    the index (:class:`~trace_gym.route.retrieval.RetrievalRouter`); with ``"gate"`` the fallback is the first
    adapter (the capability the analysis ranked highest).  ``outcomes`` (an
    :class:`~trace_gym.pipeline.outcomes.OutcomeRouting`) also plays each adapter on train scenarios the base model
    played (charged to the routing stage) and adds one outcome example per scenario, labelled with the source that
    scored best; its rows are ``Routing.outcomes``.
    """
    from ..analysis.pipeline import trajectory_id
    from ..route.base import NO_ADAPTER
    from ..route.build import build_index, example_source, leave_one_out, reference_corpus, routing_accuracy
    from ..route.embed import Embedder
    from ..route.index import RouterIndex
    from ..route.retrieval import RetrievalRouter

    if budget is not None:
        budget.start_stage("routing", 0)
    needs = rule == "needs"
    corpora: dict[str, list[Any]] = {}
    makers: dict[str, Any] = {}
    for a in adapters:
        kw = (env_kwargs_by_capability or {}).get(a.capability, env_kwargs)
        ref_kwargs = {k: v for k, v in kw.items() if k != "max_steps"}
        makers[a.adapter] = capability_factory(specs[a.capability], ref_kwargs, None, "routing")
        # the needs rule takes each env's requests from the gate's reading of its tasks: no episode is played
        corpora[a.adapter] = [] if needs else reference_corpus(
            capability_factory(specs[a.capability], ref_kwargs, budget, "routing"), [seed + s for s in range(seeds)], a.env_id)
    target_trajs = rollouts.trajectories()
    truth = _analysis_routes(analysis, adapters)
    for t in target_trajs:  # the target's own conversations, where the analysis says an adapter's capability was lacking
        label = truth.get(trajectory_id(t), NO_ADAPTER)
        if label != NO_ADAPTER and label in corpora and not is_success(t.reward, target.threshold):
            corpora[label].append(t)
    corpora[NO_ADAPTER] = [t for t in target_trajs if is_success(t.reward, target.threshold)]
    missing = [f"the router index has no example of adapter {a.adapter}: its env's reference solution did not succeed "
               f"on any of the {seeds} routing seeds and no target episode was labelled lacking {a.capability}, so no "
               "conversation can reach it; raise the routing seeds (routing_seeds) or play more base rollouts"
               for a in adapters if not corpora[a.adapter]]
    emb = Embedder(embedder)
    built = None
    if needs:
        built = build_gate(target.make, list(learning_tasks or []), makers, seed=seed, per_env=need_examples, embedder=emb)
        missing = []
    try:
        index = build_index(corpora, emb, success=0.0)
    except ValueError as exc:
        if built is None:
            used = budget.stage_used("routing") if budget is not None else 0
            return Routing(skipped=f"no router index: {exc}", rollouts=used, missing=missing)
        index = RouterIndex(emb.model_name)
    if built is not None:
        _add_gate(index, built, emb)
    before = budget.stage_used("routing") if budget is not None else 0
    rows = (outcomes.add_to(index, target, [a.adapter for a in adapters], target_trajs, emb, budget)
            if outcomes is not None and outcomes.n > 0 else [])
    index.settings = {"rule": rule, **({"fallback": adapters[0].adapter} if rule in ("gate", "needs") and adapters else {})}
    chosen = None
    if needs:
        index.settings.update(adapters=PER_CAPABILITY if adapter_choice == "select" else adapter_choice,
                              **({"joint": joint} if joint else {}))
        if adapter_choice == "select" and joint and selection is not None:
            chosen = _select(index, emb, built, target, joint, selection, seed=seed, budget=budget)
            index.settings["adapters"] = chosen.choice
    used = budget.stage_used("routing") if budget is not None else 0
    path = Path(index_path)
    index.save(path)
    convs = [(t.transcript or t.messages, t.tools or None, truth[trajectory_id(t)], example_source(t)) for t in target_trajs
             if trajectory_id(t) in truth]
    rep = routing_accuracy(RetrievalRouter(index, emb), [c[:3] for c in convs])
    loo = leave_one_out(index, convs, emb)
    return Routing(str(path), dict(Counter(index.labels)), len(index.texts), sorted(set(index.labels)), rep.n, rep.correct,
                   rep.accuracy, rep.confusion, used, missing=missing, loo_correct=loo.correct, loo_confusion=loo.confusion,
                   rule=rule, outcomes=rows, outcome_rollouts=used - before if budget is not None else len(rows) * len(adapters),
                   gate=built.summary() if built is not None else {}, selection=chosen.to_dict() if chosen else {},
                   adapters_choice=index.settings.get("adapters", ""))


def _add_gate(index: Any, built: Any, emb: Any) -> None:
    """The need gate onto ``index``, with each adapter env's acting requests as that adapter's examples."""
    index.gate = built.gate
    for name, examples in built.adapter_examples.items():
        if examples:
            texts = [e.text for e in examples]
            index.add(texts, [name] * len(texts), [e.source for e in examples], emb.encode(texts),
                      [list(e.tools) for e in examples])


def _select(index: Any, emb: Any, built: Any, target: Target, joint: str, selection: Any, *, seed: int,
            budget: RolloutBudget | None) -> Any:
    """Per-capability adapters or the joint one, by outcomes on the learning tasks (:mod:`.selection`)."""
    from ..route.base import NO_ADAPTER
    from ..route.retrieval import RetrievalRouter
    from .selection import select_adapters

    router = RetrievalRouter(index, emb)
    openings = {e.source: e for e in built.target_examples}

    def route(task: str) -> str:
        e = openings.get(task)
        if e is None:
            return NO_ADAPTER
        return router.route([{"role": "user", "content": e.text}], [{"name": n} for n in e.tools])

    n = selection.n
    if budget is not None:  # each learning task is played twice (the per-capability route and the joint adapter)
        n = min(n, budget.remaining // 2)
    return select_adapters(target, [e.source for e in built.target_examples], route, joint, selection.load,
                           selection.store, n=n, seed=seed, budget=budget, batch_size=selection.batch_size)


def _analysis_routes(analysis: Analysis, adapters: list[TrainedAdapter], label_runs: list[Any] | None = None) -> dict[str, str]:
    """trajectory id -> the adapter the analysis says it should go to (``label_runs``: default, the analysis' own)."""
    from ..analysis.labels import LabelRun
    from ..route.build import true_route_labels

    caps = json.loads(Path(analysis.capabilities_json).read_text(encoding="utf-8"))
    if label_runs is None:
        label_runs = [LabelRun.from_dict(json.loads(p.read_text(encoding="utf-8"))["run"])
                      for p in sorted((Path(analysis.capabilities_json).parent / "labels").glob("run_*.json"))]
    return true_route_labels(caps, label_runs, {a.capability: a.adapter for a in adapters})


def held_out_routing(trajectories: list[Any], analysis: Analysis, adapters: list[TrainedAdapter], index: str | Path, *,
                     seed: int = 0, embedder: str | None = None) -> dict[str, Any]:
    """Where the router sends held-out conversations, against where the analysis says they belong.

    ``trajectories`` are the base model's episodes on the held-out tasks (e.g. the evaluation's); they are
    labelled with the analysis' labeler (the offline gold labeler) and mapped to an adapter as in
    :func:`build_router`; each is routed by its first user message.  Returns ``n``, ``correct``,
    ``accuracy``, ``confusion`` (truth -> routed -> count), ``routed`` (adapter -> count) and ``routes``: per
    episode, its task (the env's task id; the trajectory id where the env names none), analysis label and adapter.
    """
    from ..analysis.gold import GoldLookup
    from ..analysis.labelers import GoldLabeler
    from ..analysis.pipeline import items_from_trajectories, trajectory_id
    from ..analysis.taxonomy import TAXONOMY
    from ..route.build import routing_accuracy
    from ..route.embed import Embedder
    from ..route.index import RouterIndex
    from ..route.retrieval import RetrievalRouter

    if not trajectories:
        raise ValueError("held-out routing needs the base model's episodes on the held-out tasks; none were given")
    run = GoldLabeler().label(items_from_trajectories(trajectories), list(TAXONOMY), run=0, seed=seed)
    truth = _analysis_routes(analysis, adapters, [run])
    loaded = RouterIndex.load(index)
    router = RetrievalRouter(loaded, Embedder(embedder or loaded.model))
    labels = [truth.get(trajectory_id(t), "none") for t in trajectories]
    rep = routing_accuracy(router, [(t.transcript or t.messages, t.tools or None, label)
                                    for t, label in zip(trajectories, labels, strict=True)])
    lookup = GoldLookup()
    routes = [{"task": lookup(t.env_id, t.options, t.reset_info)[0] or trajectory_id(t), "label": label, "routed": got}
              for t, label, got in zip(trajectories, labels, rep.routes, strict=True)]
    routed: Counter[str] = Counter(rep.routes)
    return {**rep.to_dict(), "routed": dict(routed), "routes": routes}
