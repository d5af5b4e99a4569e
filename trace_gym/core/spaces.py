"""Text spaces for LLM input and output.

Gymnasium's :class:`gymnasium.spaces.Text` only admits strings drawn from a fixed
character set.  An LLM emits arbitrary unicode, so :class:`TextSpace` admits *any*
``str`` (the empty string included) up to ``max_length`` characters.

It subclasses :class:`gymnasium.spaces.Text` so that Gymnasium's vector utilities
(``batch_space``, ``concatenate``, ``iterate``) treat it like a text space: batched
observations are tuples of strings.  Strings have no fixed-size buffer, so an
:class:`~gymnasium.vector.AsyncVectorEnv` must be created with
``shared_memory=False`` (``gym.make_vec(..., vectorization_mode="async",
vector_kwargs={"shared_memory": False})``); with shared memory on it raises
:class:`SharedMemoryError` saying so (Gymnasium's handler for ``Text`` would
otherwise hand back fixed-size buffers that read as ``"aaaa..."``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import create_shared_memory

__all__ = ["TextSpace", "DEFAULT_MAX_LENGTH", "SharedMemoryError"]

DEFAULT_MAX_LENGTH = 1_000_000

# Characters used by ``sample()``: printable ASCII plus a few multi-byte code points,
# so that consumers are exercised on unicode from the start.
_SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " .,;:!?'\"()[]{}<>_-+=*/\\|@#$%^&~`\n\t"
    "éüßøçñ€中文日本語한국어😀→∑"
)


class TextSpace(spaces.Text):
    """Any Python ``str`` of length ``0..max_length`` (unicode allowed).

    >>> space = TextSpace(max_length=16, seed=0)
    >>> space.contains("héllo 😀")
    True
    >>> space.contains(b"bytes")
    False
    """

    def __init__(self, max_length: int = DEFAULT_MAX_LENGTH, *, seed: int | np.random.Generator | None = None):
        if not isinstance(max_length, int) or max_length < 0:
            raise ValueError(f"TextSpace max_length must be a non-negative int, got {max_length!r}")
        super().__init__(max_length=max_length, min_length=0, charset=_SAMPLE_ALPHABET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A seeded random string (length 0..min(max_length, 64)) over a unicode alphabet."""
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        upper = min(self.max_length, 64)
        length = int(self.np_random.integers(0, upper + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in idx)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("TextSpace", self.max_length))


class SharedMemoryError(ValueError):
    """An async vector env was asked to share a :class:`TextSpace` through fixed-size memory."""


SHARED_MEMORY_HELP = (
    "trace-gym observations are text of any length and cannot travel through the async vector env's shared memory; "
    'pass vector_kwargs={"shared_memory": False} to gym.make_vec(..., vectorization_mode="async") '
    "(or shared_memory=False to AsyncVectorEnv)"
)


@create_shared_memory.register(TextSpace)
def _no_shared_memory(space: TextSpace, n: int = 1, ctx: Any = None) -> Any:
    raise SharedMemoryError(SHARED_MEMORY_HELP)
