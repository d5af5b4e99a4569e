"""Retrieval routing: embed the first user message, route by the nearest indexed examples.

How the nearest examples decide is a :class:`RoutingRule` (:data:`RULE_TYPES`, by name in
:data:`RULES`): each rule declares the router settings it reads, and a setting given to a
:class:`RetrievalRouter` whose rule does not read it is a ``ValueError``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, ClassVar

import numpy as np

from .base import NO_ADAPTER, first_user_message, tool_names
from .embed import Embedder
from .index import RouterIndex

__all__ = ["RetrievalRouter", "RULES", "RULE_TYPES", "RoutingRule", "VoteRule", "GateRule", "CoverRule", "NeedsRule",
           "DEFAULTS"]

DEFAULTS: dict[str, Any] = {"k": 5, "min_similarity": 0.3, "tool_weight": 2.0, "balance": True}
"""The router settings' defaults (``fallback``'s: the index's setting, else the first adapter)."""


class RoutingRule:
    """How a :class:`RetrievalRouter` chooses: ``name``, the ``settings`` it reads, and :meth:`route`.

    ``base_votes``: whether examples labelled :data:`NO_ADAPTER` take part in :meth:`RetrievalRouter.votes`.
    """

    name: ClassVar[str]
    settings: ClassVar[frozenset[str]]
    base_votes: ClassVar[bool] = True

    def route(self, router: RetrievalRouter, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        raise NotImplementedError


class VoteRule(RoutingRule):
    """A similarity-weighted vote of the ``k`` nearest examples (see :class:`RetrievalRouter`)."""

    name = "vote"
    settings = frozenset({"k", "min_similarity", "tool_weight", "balance"})

    def route(self, router: RetrievalRouter, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        votes = router.votes(messages, tools)
        return max(sorted(votes), key=lambda lab: votes[lab]) if votes else NO_ADAPTER


class GateRule(RoutingRule):
    """The base model keeps what it is known to handle; the adapters' examples vote on the rest, else ``fallback``."""

    name = "gate"
    settings = frozenset({"k", "min_similarity", "tool_weight", "balance", "fallback"})
    base_votes = False

    def route(self, router: RetrievalRouter, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        if router.kept_by_base(messages, tools):
            return NO_ADAPTER
        votes = router.votes(messages, tools)
        return max(sorted(votes), key=lambda lab: votes[lab]) if votes else router.fallback


class CoverRule(RoutingRule):
    """An adapter answers only what its nearest example covers (:meth:`RetrievalRouter.covering`)."""

    name = "cover"
    settings = frozenset({"min_similarity"})

    def route(self, router: RetrievalRouter, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        return router.covering(messages, tools)


class NeedsRule(RoutingRule):
    """The base model keeps what cannot be done with the tools offered; an adapter takes everything else.

    The index's need gate (:class:`~trace_gym.route.needs.NeedGate`) decides whether a tool the request needs
    is missing; if so, :data:`NO_ADAPTER`.  Otherwise the conversation goes to the index's ``joint`` adapter
    when its setting ``adapters`` is ``"joint"``, else to the label of the nearest adapter example (by cosine;
    :data:`NO_ADAPTER` and the joint adapter's examples left out) at ``min_similarity`` or more, else to
    ``fallback``."""

    name = "needs"
    settings = frozenset({"min_similarity", "fallback"})
    base_votes = False

    def route(self, router: RetrievalRouter, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        text = first_user_message(messages)
        gate = router.index.gate
        if text is None:
            return NO_ADAPTER
        if gate is None:
            raise ValueError("the 'needs' routing rule needs an index with a need gate (route.needs); rebuild it")
        names = tool_names(tools)
        if gate.missing(router._encode(text), names if names is not None else []):
            return NO_ADAPTER
        joint = router.index.settings.get("joint")
        if router.index.settings.get("adapters") == "joint" and joint:
            return joint
        candidates = [i for i, lab in enumerate(router.index.labels) if lab not in (NO_ADAPTER, joint)]
        if not candidates:
            return router.fallback
        i, sim = router._closest(candidates, router._encode(text))
        return router.index.labels[i] if sim >= router.min_similarity else router.fallback


RULE_TYPES: dict[str, RoutingRule] = {r.name: r for r in (VoteRule(), GateRule(), CoverRule(), NeedsRule())}
RULES = tuple(RULE_TYPES)


class RetrievalRouter:
    """Routing by the indexed examples nearest to a conversation's first user message.

    An example's similarity to the query is the cosine of their first user messages times
    the overlap (Jaccard) of the tools the two conversations offer, raised to
    ``tool_weight``: the same request with a tool withheld is another task
    (``tool_weight=0`` routes by the messages alone; an example or a query whose tools are
    not known counts as full overlap).

    ``rule="vote"``: a similarity-weighted vote of the ``k`` nearest examples; below
    ``min_similarity`` → no adapter.  Examples labelled :data:`NO_ADAPTER` (conversations the
    base model already handles) take part in the vote like any capability.  With ``balance``
    each label's vote is divided by its share of the index, so a label with many examples
    (typically the base model's successes) does not win by number alone.

    ``rule="gate"``: the base model keeps what it is known to handle, and every other
    conversation goes to an adapter.  The conversation stays with the base model when the
    nearest example (by cosine) among those offering exactly its tools (all examples when
    either side's tools are not known) is a :data:`NO_ADAPTER` example at ``min_similarity`` or
    more.  Otherwise the adapters' examples vote as above (``NO_ADAPTER`` examples left out),
    and with no vote it goes to ``fallback`` (default: the index's ``fallback`` setting, e.g.
    the adapter of the capability the analysis ranked first).  The reasoning: a conversation
    the base model fails has little to lose, and one it passes is what routing can lose.

    ``rule="cover"``: an adapter answers only what its examples cover.  The nearest adapter
    example (by cosine; :data:`NO_ADAPTER` examples left out) takes the conversation to its
    adapter when it is at ``min_similarity`` or more and every tool it offered is offered by the
    conversation too (unknown tools on either side count as offered); otherwise the base model
    keeps it.  The reasoning: an adapter learned to act, with its examples' tools, on requests
    like theirs; the same kind of request without one of those tools is one the adapter would
    still try to carry out with what it has, where the answer is often to say it cannot
    (ToolSandbox's insufficient-information scenarios withhold exactly such a tool).

    Outcome examples (an index's examples flagged ``outcome``: a train scenario labelled with whichever of
    the base model and the adapters scored the highest reward on it, ties to the base model) compose with
    every rule: the nearest outcome example (by cosine) among those offering exactly the conversation's
    tools (all of them when either side's tools are not known) decides when its cosine is
    ``min_similarity`` or more; otherwise the rule decides, over the labelled examples alone (the outcome
    examples take part in no rule).  The reasoning: a measured outcome on a like scenario says more than a
    label of what a failure lacked, and where none is near the rule behaves as it does without them.
    An index without outcome examples routes exactly as the rule does.

    ``rule="needs"``: the base model keeps every conversation whose request needs a tool that is not offered,
    as the index's need gate judges (:mod:`trace_gym.route.needs`); every other goes to an adapter
    (:class:`NeedsRule`).

    ``rule`` and ``fallback`` not given are taken from the index's ``settings`` (see
    :class:`RouterIndex`), so every router loaded from one index routes alike; the other settings
    default to :data:`DEFAULTS`.  A setting given explicitly that the rule does not read
    (:attr:`RoutingRule.settings`: ``cover`` reads ``min_similarity`` only) is a ``ValueError``.
    """

    name = "retrieval"

    def __init__(self, index: RouterIndex, embedder: Embedder | None = None, k: int | None = None,
                 min_similarity: float | None = None, tool_weight: float | None = None, balance: bool | None = None,
                 rule: str | None = None, fallback: str | None = None):
        rule = rule if rule is not None else index.settings.get("rule", "vote")
        if rule not in RULE_TYPES:
            raise ValueError(f"unknown routing rule {rule!r}; choose from {list(RULES)}")
        self.routing_rule = RULE_TYPES[rule]
        given = {"k": k, "min_similarity": min_similarity, "tool_weight": tool_weight, "balance": balance,
                 "fallback": fallback}
        unused = sorted(n for n, v in given.items() if v is not None and n not in self.routing_rule.settings)
        if unused:
            raise ValueError(f"the {rule!r} routing rule does not use {unused}; it reads "
                             f"{sorted(self.routing_rule.settings)}")
        k = DEFAULTS["k"] if k is None else k
        min_similarity = DEFAULTS["min_similarity"] if min_similarity is None else min_similarity
        tool_weight = DEFAULTS["tool_weight"] if tool_weight is None else tool_weight
        balance = DEFAULTS["balance"] if balance is None else balance
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if tool_weight < 0:
            raise ValueError(f"tool_weight must be ≥ 0, got {tool_weight}")
        self.index, self.outcomes = index.split_outcomes()  # the rules see the labelled examples only
        self.embedder = embedder or Embedder(index.model)
        self.k, self.min_similarity, self.tool_weight, self.balance = k, min_similarity, tool_weight, balance
        self.rule = rule
        self._last: tuple[str, np.ndarray] | None = None
        self.labels = sorted({lab for lab in index.labels if lab != NO_ADAPTER})  # outcome labels included
        fallback = fallback if fallback is not None else index.settings.get("fallback")
        self.fallback = fallback or (self.labels[0] if self.labels else NO_ADAPTER)
        if "fallback" in self.routing_rule.settings and self.fallback != NO_ADAPTER and self.fallback not in self.labels:
            self.labels = sorted([*self.labels, self.fallback])  # it may have no example left (leave-one-out)
        joint = index.settings.get("joint")
        if joint and joint not in self.labels:  # the needs rule's joint adapter, which has no example of its own
            self.labels = sorted([*self.labels, joint])
        counts = Counter(self.index.labels)
        self._prior = {lab: n / len(self.index.labels) for lab, n in counts.items()} if self.index.labels else {}

    def _encode(self, text: str) -> np.ndarray:
        """The query's embedding (the last one is kept: the gate and the vote embed the same message)."""
        if self._last is None or self._last[0] != text:
            self._last = (text, self.embedder.encode([text])[0])
        return self._last[1]

    def neighbours(self, text: str, k: int | None = None, tools: list[dict[str, Any]] | None = None) -> list[tuple[int, float]]:
        q = self._encode(text)
        names = tool_names(tools)
        weights = self.index.tool_agreement(names) ** self.tool_weight if names is not None and self.tool_weight else None
        return self.index.nearest(q, k or self.k, weights)

    def votes(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, float]:
        """Per label, its (balanced) similarity-weighted vote among the neighbours above ``min_similarity``
        (the adapters' examples only where the rule leaves the base model's out: ``gate``)."""
        text = first_user_message(messages)
        if text is None:
            return {}
        adapters_only = not self.routing_rule.base_votes
        found = self.neighbours(text, len(self.index.texts) if adapters_only else None, tools)
        if adapters_only:  # the k nearest of the adapters' examples
            found = [(i, s) for i, s in found if self.index.labels[i] != NO_ADAPTER][:self.k]
        votes: dict[str, float] = defaultdict(float)
        for i, s in found:
            if s >= self.min_similarity:
                lab = self.index.labels[i]
                votes[lab] += s / (len(self._prior) * self._prior[lab]) if self.balance else s
        return dict(votes)

    def kept_by_base(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> bool:
        """``rule="gate"``'s test: the nearest example offering exactly these tools is the base model's, close enough."""
        text = first_user_message(messages)
        if text is None or not len(self.index.texts):
            return True
        q = self._encode(text)
        names = tool_names(tools)
        same = [i for i, ex in enumerate(self.index.tools) if names is None or ex is None or sorted(ex) == names]
        if not same:
            return False
        i, sim = self._closest(same, q)
        return self.index.labels[i] == NO_ADAPTER and sim >= self.min_similarity

    def by_outcome(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str | None:
        """The label of the nearest outcome example offering exactly these tools when its cosine is at least
        ``min_similarity``; ``None`` when there is no such example (the rule decides)."""
        text = first_user_message(messages)
        if text is None or not self.outcomes.texts:
            return None
        names = tool_names(tools)
        same = [i for i, ex in enumerate(self.outcomes.tools) if names is None or ex is None or sorted(ex) == names]
        if not same:
            return None
        i, sim = self._closest(same, self._encode(text), self.outcomes)
        return self.outcomes.labels[i] if sim >= self.min_similarity else None

    def _closest(self, among: list[int], q: np.ndarray, index: RouterIndex | None = None) -> tuple[int, float]:
        """The example of ``among`` (a non-empty list of indices into ``index``, default the labelled examples) whose
        message is nearest ``q`` by cosine, and that cosine; ties go to the earlier example."""
        sims = (index if index is not None else self.index).vectors[among] @ q
        j = int(np.lexsort((np.arange(len(sims)), -sims))[0])
        return among[j], float(sims[j])

    def covering(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """``rule="cover"``'s choice: the nearest adapter example's label if it is close enough and the
        conversation offers all its tools, else :data:`NO_ADAPTER`."""
        text = first_user_message(messages)
        candidates = [i for i, lab in enumerate(self.index.labels) if lab != NO_ADAPTER]
        if text is None or not candidates:
            return NO_ADAPTER
        i, sim = self._closest(candidates, self._encode(text))
        example, names = self.index.tools[i], tool_names(tools)
        covered = example is None or names is None or set(example) <= set(names)
        return self.index.labels[i] if covered and sim >= self.min_similarity else NO_ADAPTER

    def route(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        if first_user_message(messages) is None:
            return NO_ADAPTER
        decided = self.by_outcome(messages, tools)
        return decided if decided is not None else self.routing_rule.route(self, messages, tools)
