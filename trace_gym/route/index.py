"""The router index: example first-user-messages per capability, with their embeddings.

Stored as ``router_index.json`` (texts, labels, embedding model) plus
``router_index.npy`` (the embedding matrix), both written atomically.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

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

    def add(self, texts: list[str], labels: list[str], sources: list[str], vectors: np.ndarray) -> None:
        if not (len(texts) == len(labels) == len(sources) == len(vectors)):
            raise ValueError("texts, labels, sources and vectors must have the same length")
        self.texts += texts
        self.labels += labels
        self.sources += sources
        self.vectors = vectors if self.vectors is None or len(self.vectors) == 0 else np.vstack([self.vectors, vectors])

    def nearest(self, query: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
        if self.vectors is None or len(self.vectors) == 0:
            return []
        sims = self.vectors @ query
        order = np.lexsort((np.arange(len(sims)), -sims))[:k]  # ties broken by insertion order
        return [(int(i), float(sims[i])) for i in order]

    def save(self, path: str | Path) -> None:
        path = Path(path)
        atomic_write_json(path.with_suffix(".json"), {"model": self.model, "texts": self.texts, "labels": self.labels,
                                                      "sources": self.sources})
        buf = io.BytesIO()
        np.save(buf, self.vectors if self.vectors is not None else np.zeros((0, 0), np.float32))
        atomic_write_bytes(path.with_suffix(".npy"), buf.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> RouterIndex:
        path = Path(path)
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        vectors = np.load(path.with_suffix(".npy"))
        if len(vectors) != len(meta["texts"]):
            raise ValueError(f"{path}: {len(meta['texts'])} texts but {len(vectors)} vectors; rebuild the index")
        return cls(meta["model"], meta["texts"], meta["labels"], meta.get("sources", [""] * len(meta["texts"])), vectors)
