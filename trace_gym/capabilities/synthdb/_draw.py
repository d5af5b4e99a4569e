"""Draws the synthetic databases make, with less overhead than ``random.Random``'s methods.

Each helper takes the same numbers from the generator, in the same order, as the
``random.Random`` method it stands for, so a database drawn with them is the one the
method would have drawn: ``sample(rng, population, k)`` is ``rng.sample(population, k)``.
Elsewhere the generators call ``rng._randbelow`` directly: ``rng.randrange(a, b)`` is
``a + rng._randbelow(b - a)`` and ``rng.choice(seq)`` is ``seq[rng._randbelow(len(seq))]``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from math import ceil, log
from typing import Any

__all__ = ["sample"]


def sample(rng: random.Random, population: Sequence[Any], k: int) -> list[Any]:
    """``rng.sample(population, k)`` for a sequence (same result, same draws)."""
    n = len(population)
    if not 0 <= k <= n:
        raise ValueError("Sample larger than population or is negative")
    below = rng._randbelow
    result: list[Any] = [None] * k
    setsize = 21  # random.sample's choice between its two methods
    if k > 5:
        setsize += 4 ** ceil(log(k * 3, 4))
    if n <= setsize:
        pool = list(population)
        for i in range(k):
            j = below(n - i)
            result[i] = pool[j]
            pool[j] = pool[n - i - 1]
        return result
    selected: set[int] = set()
    for i in range(k):
        j = below(n)
        while j in selected:
            j = below(n)
        selected.add(j)
        result[i] = population[j]
    return result
