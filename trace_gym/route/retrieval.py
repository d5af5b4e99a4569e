"""Retrieval routing: embed the first user message, vote among the nearest indexed examples."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .base import NO_ADAPTER, first_user_message
from .embed import Embedder
from .index import RouterIndex

__all__ = ["RetrievalRouter"]


class RetrievalRouter:
    """Similarity-weighted vote of the ``k`` nearest examples; below ``min_similarity`` → no adapter.

    Examples labelled :data:`NO_ADAPTER` (conversations the base model already handles)
    take part in the vote like any capability.
    """

    name = "retrieval"

    def __init__(self, index: RouterIndex, embedder: Embedder | None = None, k: int = 5, min_similarity: float = 0.3):
        self.index = index
        self.embedder = embedder or Embedder(index.model)
        self.k, self.min_similarity = k, min_similarity
        self.labels = sorted({lab for lab in index.labels if lab != NO_ADAPTER})

    def neighbours(self, text: str, k: int | None = None) -> list[tuple[int, float]]:
        q = self.embedder.encode([text])[0]
        return self.index.nearest(q, k or self.k)

    def route(self, messages: list[dict[str, Any]]) -> str:
        text = first_user_message(messages)
        if text is None:
            return NO_ADAPTER
        hits = [(i, s) for i, s in self.neighbours(text) if s >= self.min_similarity]
        if not hits:
            return NO_ADAPTER
        votes: dict[str, float] = defaultdict(float)
        for i, s in hits:
            votes[self.index.labels[i]] += s
        return max(sorted(votes), key=lambda lab: votes[lab])
