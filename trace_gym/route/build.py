"""Building the router index and measuring routing accuracy.

The index holds, per adapter, the first user message (and the offered tools' names) of
*correct* trajectories from that adapter's capability environment (:func:`reference_corpus`
plays the env's reference solution), and under :data:`NO_ADAPTER` those of target
trajectories the base model already passes.  Success is :func:`trace_gym.core.outcome.is_success` at the env's threshold.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.outcome import DEFAULT_THRESHOLD, is_success, success_threshold
from .base import NO_ADAPTER, Router, first_user_message, tool_names
from .embed import Embedder
from .index import RouterIndex
from .retrieval import RetrievalRouter

__all__ = ["build_index", "example_source", "leave_one_out", "reference_corpus", "RoutingReport", "routing_accuracy",
           "true_route_labels"]


def reference_corpus(make_env: Callable[[], Any], seeds: Iterable[int], env_id: str | None = None) -> list[Any]:
    """The successful episodes of a capability env's reference solution, one per seed.

    ``make_env`` returns a fresh env whose unwrapped instance offers ``reference_actions()``;
    ``env_id`` (default: the env's own) is recorded on each trajectory.  An env that also
    offers ``case_names()`` plays its cases in turn (the i-th seed the i-th case, cycling), so
    a few seeds show every kind of conversation the adapter learned rather than the most
    likely ones; a case the seed's world cannot pose (a ``ValueError`` or ``RuntimeError`` at
    reset) falls back to the case the seed draws.
    """
    from ..capabilities.calibrate import ReferencePolicy
    from ..rollout import rollout

    env = make_env()
    ref = ReferencePolicy()
    ref.bind_env(env.unwrapped)
    threshold = success_threshold(env)
    names = getattr(env.unwrapped, "case_names", None)
    cases = list(names()) if callable(names) else []
    out = []
    try:
        for i, s in enumerate(seeds):
            try:
                env.reset(seed=s, options={"case": cases[i % len(cases)]} if cases else None)
                forced = {"case": cases[i % len(cases)]} if cases else None
            except (ValueError, RuntimeError):
                forced = None
            t = rollout(env, ref, s, forced)
            if env_id is not None:
                t.env_id = env_id
            if is_success(t.reward, threshold):
                out.append(t)
    finally:
        env.close()
    return out


def example_source(t: Any) -> str:
    """Where an index example came from: ``env_id#seed``, and the reset options that pick its task when there
    are any (one env plays many tasks from seed 0)."""
    opts = getattr(t, "options", None)
    return f"{t.env_id}#{t.seed}" + (f"#{json.dumps(opts, sort_keys=True, default=str)}" if opts else "")


def build_index(corpora: Mapping[str, Iterable[Any]], embedder: Embedder | None = None, success: float = DEFAULT_THRESHOLD,
                max_per_label: int = 64) -> RouterIndex:
    """``corpora`` maps an adapter name (or NO_ADAPTER) to trajectories (``.transcript``/``.messages``, ``.reward``);
    only those that succeed at ``success`` enter the index."""
    embedder = embedder or Embedder()
    index = RouterIndex(embedder.model_name)
    for label, trajs in corpora.items():
        texts, sources, tools, seen = [], [], [], set()
        for t in trajs:
            if not is_success(t.reward, success):
                continue
            text = first_user_message(t.transcript or t.messages)
            names = tool_names(getattr(t, "tools", None) or None)
            key = (text, tuple(names) if names is not None else None)
            if text and key not in seen:
                seen.add(key)
                texts.append(text)
                sources.append(example_source(t))
                tools.append(names)
            if len(texts) >= max_per_label:
                break
        if texts:
            index.add(texts, [label] * len(texts), sources, embedder.encode(texts), tools)
    if not index.texts:
        raise ValueError("no correct trajectory in any corpus: the router index would be empty")
    return index


def true_route_labels(capabilities_doc: Mapping[str, Any], label_runs: list[Any], adapters: Mapping[str, str]) -> dict[str, str]:
    """Per trajectory id, the adapter it *should* go to according to the analysis.

    The selected capability the trajectory lacked (majority over labeling runs, ties to the
    higher-ranked capability) mapped to its adapter, or NO_ADAPTER when it lacked none.
    """
    ranked = [s["capability"] for s in capabilities_doc["capabilities"] if s["selected"]]
    votes: dict[str, Counter] = {}
    for run in label_runs:
        for lab in run.labels:
            if lab.capability in ranked and lab.value.value == "LACKING":
                votes.setdefault(lab.trajectory_id, Counter())[lab.capability] += 1
    all_ids = {lab.trajectory_id for run in label_runs for lab in run.labels}
    out = {}
    for tid in sorted(all_ids):
        c = votes.get(tid)
        if not c:
            out[tid] = NO_ADAPTER
            continue
        best = max(c.values())
        cap = next(r for r in ranked if c.get(r) == best)
        out[tid] = adapters.get(cap, NO_ADAPTER)
    return out


@dataclass
class RoutingReport:
    n: int
    correct: int
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)  # true -> predicted -> count
    routes: list[str] = field(default_factory=list)  # what each conversation was routed to, in order

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "correct": self.correct, "accuracy": self.accuracy, "confusion": self.confusion}

    def add(self, truth: str, routed: str) -> None:
        self.n += 1
        self.correct += int(routed == truth)
        self.routes.append(routed)
        row = self.confusion.setdefault(truth, {})
        row[routed] = row.get(routed, 0) + 1


def routing_accuracy(router: Router, conversations: Iterable[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str]]
                     ) -> RoutingReport:
    """Route each ``(messages, tools, truth)`` and count agreement with ``truth``."""
    rep = RoutingReport(0, 0)
    for messages, tools, truth in conversations:
        rep.add(truth, router.route(messages, tools))
    return rep


def leave_one_out(index: RouterIndex, conversations: Iterable[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str, str]],
                  embedder: Embedder | None = None, **router_kwargs: Any) -> RoutingReport:
    """Route each ``(messages, tools, truth, source)`` with a :class:`RetrievalRouter` over ``index`` less the
    examples of that ``source`` (:func:`example_source`), and count agreement with ``truth``.

    Routing the index's own episodes with the index whole finds each one's own example at
    cosine 1; leaving it out asks what an unseen conversation like it would get.
    """
    embedder = embedder or Embedder(index.model)
    rep = RoutingReport(0, 0)
    for messages, tools, truth, source in conversations:
        part = index.without({source})
        rep.add(truth, RetrievalRouter(part, embedder, **router_kwargs).route(messages, tools) if part.texts else NO_ADAPTER)
    return rep
