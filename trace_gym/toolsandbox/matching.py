"""The best assignment of a DAG's nodes to trajectory indices, as ToolSandbox matches milestones.

EVALUATION.md §5: nodes are put one after another in a topological order, each at an index no
lower than the previous one's; a node's similarity may depend on where the nodes it references
were put; the assignment with the largest sum of similarities wins, and among equal sums the one
upstream's exhaustive depth-first search reports.  :func:`best_assignment` finds it by dynamic
programming instead of search; it knows nothing of milestones (``evaluation`` supplies the scores).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["best_assignment"]

# A float's exact value times 2**1074 is an integer: sums compared as integers are exact.
_EXACT_BITS = 1074


def _union(masks: Iterable[int]) -> int:
    out = 0
    for mask in masks:
        out |= mask
    return out


def _exact(value: float) -> int:
    numerator, denominator = value.as_integer_ratio()
    return numerator << (_EXACT_BITS + 1 - denominator.bit_length())


_ONE = _exact(1.0)


def _exact_above(value: float) -> int:
    """:func:`_exact` of ``value`` raised by a relative 2**-40: an upper bound that survives the
    last-bit differences of ``math.pow`` and of products taken in another order."""
    exact = _exact(value)
    return exact + (exact >> 40) + 1 if exact > 0 else 0


def _checked_graph(nodes: Sequence[int], edges: Sequence[tuple[int, int]], references: Mapping[int, Sequence[int]],
                   ) -> tuple[dict[int, int], dict[int, int], dict[int, tuple[int, ...]]]:
    """``(bit of each node, bits of its predecessors, the nodes it references)``, after checking that ``edges``
    join two of ``nodes`` without a cycle and that each node references only its ancestors."""
    bit = {m: 1 << k for k, m in enumerate(nodes)}
    if len(bit) != len(nodes):
        raise ValueError(f"nodes {list(nodes)} repeat a node")
    preds = dict.fromkeys(nodes, 0)
    for a, b in edges:
        if a not in bit or b not in bit:
            raise ValueError(f"edge {(a, b)} is not between two of the nodes {list(nodes)}")
        preds[b] |= bit[a]
    ancestors: dict[int, int] = {}
    while len(ancestors) < len(nodes):  # in topological order, so a node's predecessors come first
        ready = [m for m in nodes if m not in ancestors and all(p in ancestors for p in nodes if preds[m] & bit[p])]
        if not ready:
            raise ValueError(f"the graph has a cycle through nodes {sorted(set(nodes) - set(ancestors))}")
        for m in ready:
            ancestors[m] = preds[m] | _union(ancestors[p] for p in nodes if preds[m] & bit[p])
    refs = {m: tuple(references.get(m, ())) for m in nodes}
    for m in nodes:
        for r in refs[m]:
            if r not in bit or not ancestors[m] & bit[r]:
                raise ValueError(f"node {m} references node {r}, which is not one of its ancestors")
    return bit, preds, refs


def _moves(mask: int, nodes: Sequence[int], bit: Mapping[int, int], preds: Mapping[int, int],
           refs: Mapping[int, tuple[int, ...]], memo: dict[int, Any],
           ) -> tuple[tuple[int, ...], list[tuple[int, int, tuple[int, ...], tuple[int, ...]]]]:
    """The moves out of the state whose nodes left are ``mask`` (stored in ``memo``): the assigned nodes they
    reference, and per ready node ``(node, mask left, positions of its references among those, positions of the
    next state's references: -1 is the node itself)``."""
    inside = {m for m in nodes if mask & bit[m]}
    have = tuple(sorted({r for m in inside for r in refs[m]} - inside))
    options = []
    for m in sorted(inside):
        if not preds[m] & mask:
            rest = mask & ~bit[m]
            after = sorted({r for x in inside - {m} for r in refs[x]} - (inside - {m}))
            options.append(
                (
                    m,
                    rest,
                    tuple(have.index(r) for r in refs[m]),
                    tuple(-1 if r == m else have.index(r) for r in after),
                )
            )
    out = memo[mask] = (have, options)
    return out


def _best_path(mask: int, target: int, first: int, last: int, moves_of: Callable[[int], Any],
               names: Mapping[int, list[Hashable]], bound: Mapping[int, list[int]], free_of: Callable[[int], list[int]],
               scored: Callable[..., tuple[float, int]], best: Callable[[int, tuple[int, ...], int], int],
               ) -> list[tuple[int, int, float]]:
    """The assignment of :func:`best_assignment` whose exact sum is ``target``, move by move from the state of all
    nodes ``mask``: at each step the candidate ``(-similarity, node, index)`` that comes first among those that
    still reach the target."""
    path: list[tuple[int, int, float]] = []
    held: tuple[int, ...] = ()
    lower = first
    while mask:
        have, options = moves_of(mask)
        keys = tuple(names[r][i] for r, i in zip(have, held, strict=True))
        choice = None
        for m, rest, mine, nxt in options:
            for index in range(lower, last + 1):
                k = index - first
                ceiling = free_of(rest)[k]
                if bound[m][k] + ceiling < target:
                    continue
                sim, exact = scored(m, index, tuple(held[p] for p in mine), tuple(keys[p] for p in mine))
                if exact + ceiling < target or (choice is not None and (-sim, m, index) >= choice[0]):
                    continue
                child = tuple(index if p < 0 else held[p] for p in nxt)
                if exact + best(rest, child, index) == target:
                    choice = ((-sim, m, index), rest, child, exact, sim)
        assert choice is not None
        (_, m, index), mask, held, exact, sim = choice
        path.append((m, index, sim))
        lower, target = index, target - exact
    return path


def best_assignment(
    nodes: Sequence[int],
    edges: Sequence[tuple[int, int]],
    references: Mapping[int, Sequence[int]],
    score: Callable[[int, int, tuple[int, ...]], float],
    first: int,
    last: int,
    reference_keys: Mapping[int, Sequence[Hashable]] | None = None,
    upper: Callable[[int, int], float] | None = None,
) -> list[tuple[int, int, float]]:
    """The best assignment of DAG ``nodes`` to indices in ``[first, last]`` (EVALUATION.md §5).

    Nodes are assigned one after another in a topological order of ``edges``, each at an index no
    lower than the previous one's.  ``score(node, index, held)`` is a node's similarity, in [0, 1],
    when the nodes ``references[node]`` (ancestors of it) sit at the indices ``held``.  The
    result maximises the sum of similarities; among maximal assignments it is the one upstream's
    exhaustive search reports: at each step the candidate ``(-similarity, node, index)`` that
    comes first.  Returns ``[(node, index, similarity), ...]`` in assignment order.

    Optional, for speed: ``reference_keys[r][i]`` names everything a score can read of node ``r``
    at index ``i`` (equal names, equal scores; by default the index itself), and ``upper(node,
    index)`` bounds the node's score there whatever its references hold.

    Dynamic programming over states (nodes left, lowest index, names of where their references
    sit): a state's best sum is the better of skipping its lowest index or putting a ready node
    there, computed once per state in exact integer arithmetic (so ties are ties) and skipping
    moves that the bounds show cannot win.  (Upstream adds floats in assignment order; two
    mappings whose sums differ by rounding alone may therefore be told apart differently.)
    """
    if first > last:
        raise ValueError(f"no index to assign: first {first} is after last {last}")
    bit, preds, refs = _checked_graph(nodes, edges, references)
    span = range(first, last + 1)
    names = {
        r: list(reference_keys[r]) if reference_keys and r in reference_keys else list(range(last + 1))
        for m in nodes
        for r in refs[m]
    }

    # mask -> (assigned nodes its nodes reference, [(node, mask left, positions of the node's
    # references among them, positions of the next state's references: -1 is the node itself)])
    moves: dict[int, tuple[tuple[int, ...], list[tuple[int, int, tuple[int, ...], tuple[int, ...]]]]] = {}

    def moves_of(mask: int) -> tuple[tuple[int, ...], list[tuple[int, int, tuple[int, ...], tuple[int, ...]]]]:
        out = moves.get(mask)
        return out if out is not None else _moves(mask, nodes, bit, preds, refs, moves)

    scores: dict[tuple[Hashable, ...], tuple[float, int]] = {}

    def scored(m: int, index: int, held: tuple[int, ...], keys: tuple[Hashable, ...]) -> tuple[float, int]:
        key = (m, index, keys)
        out = scores.get(key)
        if out is None:
            sim = score(m, index, held)
            out = scores[key] = (sim, _exact(sim))
        return out

    # Upper bounds: per node and index, then the best sum of those ignoring references, per (mask, index).
    bound = {m: [_exact_above(upper(m, i)) if upper is not None else _ONE for i in span] for m in nodes}
    free: dict[int, list[int]] = {0: [0] * (len(span) + 1)}

    def free_of(mask: int) -> list[int]:
        out = free.get(mask)
        if out is None:
            out = [0] * (len(span) + 1)
            options = moves_of(mask)[1]
            for k in range(len(span) - 1, -1, -1):
                value = out[k + 1]
                for m, rest, _, _ in options:
                    value = max(value, bound[m][k] + free_of(rest)[k])
                out[k] = value
            free[mask] = out
        return out

    tables: dict[tuple[Hashable, ...], list[Any]] = {}

    def best(mask: int, held: tuple[int, ...], lower: int) -> int:
        """Best exact sum for the nodes of ``mask`` at indices >= ``lower``; ``held`` are the
        indices of the assigned nodes they reference."""
        if not mask:
            return 0
        have, options = moves_of(mask)
        keys = tuple(names[r][i] for r, i in zip(have, held, strict=True))
        table = tables.get((mask, keys))
        if table is None:
            table = tables[(mask, keys)] = [last + 1, [0] * len(span)]
        low, values = table
        if lower < low:
            plans = [
                (
                    m,
                    rest,
                    mine,
                    nxt,
                    bound[m],
                    free_of(rest),
                    tuple(keys[p] for p in mine),
                    tuple(held[p] for p in mine),
                )
                for m, rest, mine, nxt in options
            ]
            value = values[low - first] if low <= last else -1
            for index in range(low - 1, lower - 1, -1):
                k = index - first
                for m, rest, _, nxt, ub, ceiling, ref_names, ref_held in plans:
                    if ub[k] + ceiling[k] <= value:
                        continue
                    found = scores.get((m, index, ref_names))
                    sim = found[1] if found is not None else scored(m, index, ref_held, ref_names)[1]
                    if sim + ceiling[k] <= value:
                        continue
                    total = sim + best(rest, tuple(index if p < 0 else held[p] for p in nxt), index)
                    if total > value:
                        value = total
                values[k] = value
            table[0] = lower
        return values[lower - first]

    mask = sum(bit.values())
    return _best_path(mask, best(mask, (), first), first, last, moves_of, names, bound, free_of, scored, best)
