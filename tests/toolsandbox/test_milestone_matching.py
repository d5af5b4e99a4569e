"""The milestone matcher (``best_assignment``) against an exhaustive search on generated DAGs.

The reference below is upstream's search as EVALUATION.md §5 describes it: depth first, at each
step every ready node scored at every index from the last assigned one on, candidates tried by
``(-similarity, node, index)``, a candidate skipped when even perfect scores for the rest could
not beat the step's best, a best replaced only by a strictly larger sum.  It is exponential and
lives only here.

Similarities on a dyadic grid (multiples of 1/64 times factors 0, 1/2, 1) add up exactly in
floating point, so the reference's float sums order mappings exactly as the matcher's exact
sums do: the mappings must be identical, ties included.  On other values the two may break a
tie that only rounding makes differently, so there the matcher must reach the same best sum.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.corpora import corpus_files, missing
from trace_gym.toolsandbox.matching import best_assignment

Score = Callable[[int, int, tuple[int, ...]], float]


def exhaustive(
    nodes: Sequence[int],
    edges: Sequence[tuple[int, int]],
    references: Mapping[int, Sequence[int]],
    score: Score,
    first: int,
    last: int,
) -> list[tuple[int, int, float]]:
    preds: dict[int, set[int]] = {m: set() for m in nodes}
    for a, b in edges:
        preds[b].add(a)

    def search(assigned: tuple, assigned_sum: float, remaining: frozenset) -> tuple[tuple, float]:
        if not remaining:
            return (), assigned_sum
        lower = assigned[-1][1] if assigned else first
        where = {m: index for m, index, _ in assigned}
        heap = []
        for m in sorted(remaining):
            if preds[m] & remaining:
                continue
            held = tuple(where[r] for r in references.get(m, ()))
            for index in range(lower, last + 1):
                heap.append((-score(m, index, held), m, index))
        heapq.heapify(heap)
        best: tuple = ()
        best_sum = -1.0
        while heap:
            neg, m, index = heapq.heappop(heap)
            sim = -neg
            if assigned_sum + sim + len(remaining) - 1 <= best_sum:
                continue
            step = ((m, index, sim),)
            found, total = search(assigned + step, assigned_sum + sim, remaining - {m})
            if total > best_sum:
                best, best_sum = step + found, total
        return best, best_sum

    return list(search((), 0, frozenset(nodes))[0])


@st.composite
def problems(draw: st.DrawFn, values: Sequence[float], max_nodes: int, max_span: int) -> dict:
    """A DAG over shuffled node ids, references to ancestors, and a similarity table."""
    n = draw(st.integers(1, max_nodes))
    nodes = draw(st.permutations(range(n)))  # topological position -> node id
    pairs = [(nodes[i], nodes[j]) for i, j in itertools.combinations(range(n), 2)]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    ancestors: dict[int, set[int]] = {m: set() for m in nodes}
    for m in nodes:  # in topological order
        for a, b in edges:
            if b == m:
                ancestors[m] |= {a} | ancestors[a]
    references = {
        m: tuple(draw(st.permutations(sorted(draw(st.sets(st.sampled_from(sorted(ancestors[m]))))))))
        if ancestors[m]
        else ()
        for m in nodes
    }
    first = draw(st.integers(0, 3))
    last = first + draw(st.integers(0, max_span - 1))
    coarse = draw(st.booleans())  # scores read a reference only through index // 2

    def seen(i: int) -> int:
        return i // 2 if coarse else i

    base = {(m, i): draw(st.sampled_from(values)) for m in nodes for i in range(first, last + 1)}
    factor = {
        (m, r, seen(i)): draw(st.sampled_from([0.0, 0.5, 1.0, 1.0]))
        for m in nodes
        for r in references[m]
        for i in range(first, last + 1)
    }

    def score(m: int, index: int, held: tuple[int, ...]) -> float:
        assert len(held) == len(references[m])
        value = base[(m, index)]
        for r, i in zip(references[m], held, strict=True):
            assert i <= index
            value *= factor[(m, r, seen(i))]
        return value

    def upper(m: int, index: int) -> float:
        return base[(m, index)]

    return {
        "nodes": list(draw(st.permutations(nodes))),  # any listing order
        "edges": draw(st.permutations(edges)),
        "references": references,
        "score": score,
        "first": first,
        "last": last,
        "reference_keys": {r: [seen(i) for i in range(last + 1)] for m in nodes for r in references[m]}
        if coarse
        else None,
        "upper": draw(st.sampled_from([None, upper])),
    }


DYADIC = [k / 64 for k in (0, 0, 1, 16, 21, 32, 32, 48, 63, 64, 64)]
ROUNDED = [0.0, 0.1, 0.2, 0.3, 1 / 3, 0.7, 2 / 3, 1.0, 1.0]


def _matched(p: dict) -> list[tuple[int, int, float]]:
    return best_assignment(
        p["nodes"],
        p["edges"],
        p["references"],
        p["score"],
        p["first"],
        p["last"],
        reference_keys=p["reference_keys"],
        upper=p["upper"],
    )


def _exact_sum(path: list[tuple[int, int, float]]) -> Fraction:
    return sum((Fraction(sim) for _, _, sim in path), Fraction(0))


def _check_shape(p: dict, path: list[tuple[int, int, float]]) -> None:
    """Every node once, in a topological order, indices non-decreasing from ``first``."""
    assert sorted(m for m, _, _ in path) == sorted(p["nodes"])
    position = {m: k for k, (m, _, _) in enumerate(path)}
    assert all(position[a] < position[b] for a, b in p["edges"])
    indices = [index for _, index, _ in path]
    assert indices == sorted(indices) and p["first"] <= indices[0] and indices[-1] <= p["last"]


@settings(max_examples=200)
@given(problems(DYADIC, max_nodes=5, max_span=4))
def test_matches_the_exhaustive_search_exactly_on_a_dyadic_grid(p: dict) -> None:
    path = _matched(p)
    _check_shape(p, path)
    assert path == exhaustive(p["nodes"], p["edges"], p["references"], p["score"], p["first"], p["last"])


@settings(max_examples=100)
@given(problems(DYADIC, max_nodes=3, max_span=9))
def test_matches_the_exhaustive_search_exactly_on_longer_trajectories(p: dict) -> None:
    path = _matched(p)
    assert path == exhaustive(p["nodes"], p["edges"], p["references"], p["score"], p["first"], p["last"])


@settings(max_examples=100)
@given(problems(ROUNDED, max_nodes=4, max_span=5))
def test_reaches_the_exhaustive_best_sum_on_rounded_values(p: dict) -> None:
    path = _matched(p)
    _check_shape(p, path)
    reference = exhaustive(p["nodes"], p["edges"], p["references"], p["score"], p["first"], p["last"])
    assert abs(_exact_sum(path) - _exact_sum(reference)) <= Fraction(1, 10**12)
    # each reported similarity is the node's score where it was put
    where = {m: index for m, index, _ in path}
    for m, index, sim in path:
        assert sim == p["score"](m, index, tuple(where[r] for r in p["references"][m]))


def test_ties_go_to_the_lowest_node_then_the_lowest_index() -> None:
    # two independent nodes (both before a third) that score 1 everywhere
    path = best_assignment([2, 0, 1], [(0, 2), (1, 2)], {}, lambda m, i, held: 1.0, 5, 9)
    assert path == [(0, 5, 1.0), (1, 5, 1.0), (2, 5, 1.0)]
    # a better later index wins over an equal-sum earlier one only when strictly better
    table = {(0, 5): 0.5, (0, 6): 0.5, (1, 5): 0.25, (1, 6): 0.75}
    path = best_assignment([0, 1], [(0, 1)], {}, lambda m, i, held: table[(m, i)], 5, 6)
    assert path == [(0, 5, 0.5), (1, 6, 0.75)]


def test_a_long_tied_trajectory_is_cheap() -> None:
    """Six chained nodes that score 0 everywhere on 70 indices: every one of the ~10^8 mappings
    ties, which an exhaustive search walks; the matcher scores each (node, index) once."""
    calls = []

    def score(m: int, index: int, held: tuple[int, ...]) -> float:
        calls.append((m, index, held))
        return 0.0

    nodes = list(range(6))
    path = best_assignment(
        nodes,
        [(i, i + 1) for i in range(5)],
        {i: (i - 1,) for i in range(1, 6)},
        score,
        0,
        69,
        reference_keys={i: [0] * 70 for i in range(5)},
    )
    assert path == [(m, 0, 0.0) for m in nodes]
    assert len(calls) == len(set((m, index) for m, index, _ in calls)) <= 6 * 70


@pytest.mark.parametrize(
    ("edges", "references", "message"),
    [
        ([(0, 1), (1, 0)], {}, "cycle"),
        ([(0, 1)], {0: (1,)}, "not one of its ancestors"),
        ([(0, 1)], {1: (7,)}, "not one of its ancestors"),
        ([(0, 3)], {}, "not between two of the nodes"),
        ([(0, 1)], {0: (0,)}, "not one of its ancestors"),
    ],
)
def test_malformed_graphs_are_rejected(edges: list, references: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        best_assignment([0, 1], edges, references, lambda m, i, held: 1.0, 0, 3)


# --------------------------------------------------------------------------- on real trajectories


def _stretched_records(limit: int) -> list[tuple[str, dict, list[dict]]]:
    """Conformance records of DAG scenarios whose milestones read other milestones' messages,
    with their agent/execution rows repeated (a looping agent) to 24 messages."""
    import json

    from trace_gym.toolsandbox.scenarios import load_scenarios

    scenarios = load_scenarios()
    out = []
    for path in corpus_files("toolsandbox"):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            scenario = scenarios[rec["scenario"]]
            reads_messages = any(
                c.similarity == "tool_trace_dependant" for m in scenario.milestones for c in m.constraints
            )
            if rec["result"]["exception"] or len(scenario.milestones) < 4 or not reads_messages:
                continue
            rows = rec["messages"]
            loop = [r for r in rows if {r["sender"], r["recipient"]} == {"AGENT", "EXECUTION_ENVIRONMENT"}]
            while loop and len(rows) < 24:
                rows = [*rows, {**loop[len(rows) % len(loop)], "sandbox_message_index": len(rows)}]
            out.append((rec["id"], rec, rows))
    return out[:limit]


STRETCHED = _stretched_records(6)


@pytest.mark.skipif(not STRETCHED, reason=missing("toolsandbox"))
@pytest.mark.parametrize(("record_id", "record", "rows"), STRETCHED, ids=[r[0] for r in STRETCHED])
def test_milestone_mapping_equals_the_exhaustive_search_on_looping_trajectories(
    record_id: str, record: dict, rows: list[dict]
) -> None:
    """The evaluator names a reference by the state or candidates it shows (see
    ``_reference_keys``) and bounds scores; the reference search reads raw indices and no bounds."""
    from trace_gym.toolsandbox.evaluation import _match, _NodeScorer
    from trace_gym.toolsandbox.scenarios import load_scenarios
    from trace_gym.toolsandbox.trajectory import Trajectory, first_user_index

    scenario = load_scenarios()[record["scenario"]]
    trajectory = Trajectory(rows, record["db_snapshots"])
    first = first_user_index(trajectory.messages)
    scorers = [_NodeScorer(node, trajectory, first) for node in scenario.milestones]
    nodes = sorted({x for e in scenario.milestone_edges for x in e})
    want = exhaustive(
        nodes,
        scenario.milestone_edges,
        {m: scorers[m].references for m in nodes},
        lambda m, index, held: scorers[m].score(index, held),
        first,
        trajectory.last_index,
    )
    mapping, mean = _match(scenario.milestones, scenario.milestone_edges, trajectory, first)
    assert mapping == {m: (index, sim) for m, index, sim in sorted(want)}
    assert mean == sum(sim for _, _, sim in want) / len(scenario.milestones)
