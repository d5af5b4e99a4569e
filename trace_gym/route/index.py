"""The router index: example first-user-messages per capability, with their embeddings and
the names of the tools each example's conversation offered.

An example is either *labelled* (its label says which adapter, or none, the conversation needs) or an
*outcome* example (``outcome`` true: its label is whichever of the base model and the adapters scored the
highest reward when each played that scenario; see :class:`~trace_gym.route.retrieval.RetrievalRouter`).

Stored as ``router_index.json`` (texts, labels, sources, tools, embedding model and the
router's ``settings``, e.g. ``{"rule": "gate", "fallback": "cap-0-..."}``, which every router
loaded from the index uses) plus ``router_index.npy`` (the embedding matrix), both written
atomically.  An index may carry a :class:`~trace_gym.route.needs.NeedGate` (``gate``, for the ``needs``
rule), stored beside it as ``router_index-needs.json`` and ``router_index-needs.npy``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..io import atomic_write_bytes, atomic_write_json

__all__ = ["RouterIndex"]


@dataclass
class RouterIndex:
    model: str
    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # where each example came from (env id + seed)
    vectors: np.ndarray | None = None
    tools: list[list[str] | None] = field(default_factory=list)  # offered tool names per example; None: not known
    settings: dict[str, Any] = field(default_factory=dict)  # how routers over this index route (RetrievalRouter)
    outcome: list[bool] = field(default_factory=list)  # per example: labelled by the best scoring source (module doc)
    gate: Any = None  # a NeedGate (route.needs) for the ``needs`` rule; None: none

    def __post_init__(self) -> None:
        if not self.outcome:
            self.outcome = [False] * len(self.texts)
        if len(self.outcome) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.outcome)} outcome flags")

    def add(self, texts: list[str], labels: list[str], sources: list[str], vectors: np.ndarray,
            tools: list[list[str] | None] | None = None, *, outcome: bool = False) -> None:
        """Append examples (``outcome``: they are outcome examples, see the module docstring)."""
        tools = list(tools) if tools is not None else [None] * len(texts)
        if not (len(texts) == len(labels) == len(sources) == len(vectors) == len(tools)):
            raise ValueError("texts, labels, sources, tools and vectors must have the same length")
        self.texts += texts
        self.labels += labels
        self.sources += sources
        self.tools += [sorted(t) if t is not None else None for t in tools]
        self.outcome += [bool(outcome)] * len(texts)
        self.vectors = vectors if self.vectors is None or len(self.vectors) == 0 else np.vstack([self.vectors, vectors])

    def select(self, keep: list[int]) -> RouterIndex:
        """A copy holding the examples at the indices ``keep``, in that order (same model and settings)."""
        vectors = self.vectors[keep] if self.vectors is not None and len(self.vectors) else self.vectors
        return RouterIndex(self.model, [self.texts[i] for i in keep], [self.labels[i] for i in keep],
                           [self.sources[i] for i in keep], vectors, [self.tools[i] for i in keep], dict(self.settings),
                           [self.outcome[i] for i in keep], self.gate)

    def without(self, sources: Collection[str]) -> RouterIndex:
        """A copy without the examples whose source is in ``sources`` (leave-one-out routing)."""
        drop = set(sources)
        return self.select([i for i, s in enumerate(self.sources) if s not in drop])

    def split_outcomes(self) -> tuple[RouterIndex, RouterIndex]:
        """``(labelled examples, outcome examples)`` as two indexes."""
        return (self.select([i for i, o in enumerate(self.outcome) if not o]),
                self.select([i for i, o in enumerate(self.outcome) if o]))

    def tool_agreement(self, tools: list[str] | None) -> np.ndarray:
        """Per example, the Jaccard overlap of its offered tools with ``tools`` (1 where either side is not known)."""
        out = np.ones(len(self.texts), dtype=np.float64)
        if tools is None:
            return out
        query = set(tools)
        for i, ex in enumerate(self.tools):
            if ex is not None:
                union = query | set(ex)
                out[i] = len(query & set(ex)) / len(union) if union else 1.0
        return out

    def nearest(self, query: np.ndarray, k: int = 5, weights: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` examples most similar to ``query`` (cosine, times ``weights`` per example when given)."""
        if self.vectors is None or len(self.vectors) == 0:
            return []
        sims = self.vectors @ query
        if weights is not None:
            sims = sims * weights
        order = np.lexsort((np.arange(len(sims)), -sims))[:k]  # ties broken by insertion order
        return [(int(i), float(sims[i])) for i in order]

    def save(self, path: str | Path) -> None:
        path = Path(path)
        atomic_write_json(path.with_suffix(".json"), {"model": self.model, "texts": self.texts, "labels": self.labels,
                                                      "sources": self.sources, "tools": self.tools,
                                                      "settings": self.settings, "outcome": self.outcome})
        buf = io.BytesIO()
        np.save(buf, self.vectors if self.vectors is not None else np.zeros((0, 0), np.float32))
        atomic_write_bytes(path.with_suffix(".npy"), buf.getvalue())
        if self.gate is not None:
            self.gate.save(_gate_path(path))

    @classmethod
    def load(cls, path: str | Path) -> RouterIndex:
        path = Path(path)
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        vectors = np.load(path.with_suffix(".npy"))
        if len(vectors) != len(meta["texts"]):
            raise ValueError(f"{path}: {len(meta['texts'])} texts but {len(vectors)} vectors; rebuild the index")
        n = len(meta["texts"])
        tools = meta.get("tools") or [None] * n  # an index from before tools were recorded: not known
        if len(tools) != n:
            raise ValueError(f"{path}: {n} texts but {len(tools)} tool lists; rebuild the index")
        outcome = meta.get("outcome") or [False] * n  # an index from before outcome examples: none
        if len(outcome) != n:
            raise ValueError(f"{path}: {n} texts but {len(outcome)} outcome flags; rebuild the index")
        gate = None
        if _gate_path(path).with_suffix(".json").exists():
            from .needs import NeedGate

            gate = NeedGate.load(_gate_path(path))
        return cls(meta["model"], meta["texts"], meta["labels"], meta.get("sources", [""] * n), vectors, tools,
                   dict(meta.get("settings") or {}), [bool(o) for o in outcome], gate)


def _gate_path(path: Path) -> Path:
    """Where an index's need gate is stored: ``<index>-needs`` (``.json`` and ``.npy``)."""
    stem = path.with_suffix("") if path.suffix in (".json", ".npy") else path
    return stem.with_name(stem.name + "-needs")
