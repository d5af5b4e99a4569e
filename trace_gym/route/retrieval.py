"""Retrieval routing: embed the first user message, vote among the nearest indexed examples."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from .base import NO_ADAPTER, first_user_message, tool_names
from .embed import Embedder
from .index import RouterIndex

__all__ = ["RetrievalRouter"]


class RetrievalRouter:
    """Similarity-weighted vote of the ``k`` nearest examples; below ``min_similarity`` → no adapter.

    Examples labelled :data:`NO_ADAPTER` (conversations the base model already handles)
    take part in the vote like any capability.  An example's similarity to the query is the
    cosine of their first user messages times the overlap (Jaccard) of the tools the two
    conversations offer, raised to ``tool_weight``: the same request with a tool withheld
    is another task (``tool_weight=0`` routes by the messages alone; an example or a query
    whose tools are not known counts as full overlap).  With ``balance`` each label's vote
    is divided by its share of the index, so a label with many examples (typically the
    base model's successes) does not win by number alone.
    """

    name = "retrieval"

    def __init__(self, index: RouterIndex, embedder: Embedder | None = None, k: int = 5, min_similarity: float = 0.3,
                 tool_weight: float = 2.0, balance: bool = True):
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if tool_weight < 0:
            raise ValueError(f"tool_weight must be ≥ 0, got {tool_weight}")
        self.index = index
        self.embedder = embedder or Embedder(index.model)
        self.k, self.min_similarity, self.tool_weight, self.balance = k, min_similarity, tool_weight, balance
        self.labels = sorted({lab for lab in index.labels if lab != NO_ADAPTER})
        counts = Counter(index.labels)
        self._prior = {lab: n / len(index.labels) for lab, n in counts.items()} if index.labels else {}

    def neighbours(self, text: str, k: int | None = None, tools: list[dict[str, Any]] | None = None) -> list[tuple[int, float]]:
        q = self.embedder.encode([text])[0]
        names = tool_names(tools)
        weights = self.index.tool_agreement(names) ** self.tool_weight if names is not None and self.tool_weight else None
        return self.index.nearest(q, k or self.k, weights)

    def votes(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, float]:
        """Per label, its (balanced) similarity-weighted vote among the neighbours above ``min_similarity``."""
        text = first_user_message(messages)
        if text is None:
            return {}
        votes: dict[str, float] = defaultdict(float)
        for i, s in self.neighbours(text, tools=tools):
            if s >= self.min_similarity:
                lab = self.index.labels[i]
                votes[lab] += s / (len(self._prior) * self._prior[lab]) if self.balance else s
        return dict(votes)

    def route(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        votes = self.votes(messages, tools)
        if not votes:
            return NO_ADAPTER
        return max(sorted(votes), key=lambda lab: votes[lab])
