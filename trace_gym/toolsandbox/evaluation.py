"""Scoring a ToolSandbox episode: milestone similarity, minefields and turn count.

Interface (agreed with the engine, ``trace_gym/toolsandbox/{engine,env,conformance}.py``)
----------------------------------------------------------------------------------------

    evaluate(scenario, messages, db_snapshots) -> EvaluationResult

* ``scenario`` -- a :class:`trace_gym.toolsandbox.scenarios.Scenario` (``load_scenarios()[name]``).
* ``messages`` -- the whole message bus, seeded rows included, as a sequence of row dicts with the
  corpus's columns: ``sandbox_message_index, sender, recipient, content, openai_tool_call_id,
  openai_function_name, conversation_active, tool_call_exception, tool_trace, visible_to``.
  ``tool_trace`` is ``None`` or a *list* of ``{tool_name, arguments, result}`` dicts; ``sender``,
  ``recipient`` and the ``visible_to`` items are upstream's role strings (``"AGENT"``, ``"USER"``, ...).
* ``db_snapshots`` -- ``{"SETTING"|"CONTACT"|"MESSAGING"|"REMINDER": [{"sandbox_message_index": k,
  "rows": [row dict, ...]}, ...]}``, exactly like a conformance record. The state of a database at
  message *i* is the snapshot with the largest index <= *i*.

The result is an immutable :class:`EvaluationResult` with ``similarity``, ``milestone_similarity``,
``minefield_similarity``, ``turn_count``, ``milestone_mapping`` / ``minefield_mapping``
(``{milestone: (sandbox_message_index, similarity)}``, sorted by milestone) and ``exception``.
An episode that aborted (upstream: the agent named a tool it was not offered, malformed arguments)
is scored with :func:`aborted_result` instead, as upstream's runner does.
The scorer alone is checked against conformance records by
:func:`trace_gym.toolsandbox.conformance.score_record` / ``score_corpus``.

The inputs are read as a :class:`~trace_gym.toolsandbox.trajectory.Trajectory`: rows are checked
against the bus / world schemas (:data:`DB_SCHEMAS`).  Nothing here mutates its inputs;
malformed inputs raise :class:`EvaluationInputError` with a message naming the offending field.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .extractors import extract_candidates
from .scenarios import Constraint, FrozenDict, Milestone, Scenario, automatic_guardrails, thaw
from .similarity import table_similarity
from .trajectory import DB_SCHEMAS, ROLES, EvaluationInputError, Trajectory, first_user_index, turn_count

__all__ = [
    "DB_SCHEMAS",
    "EvaluationInputError",
    "EvaluationResult",
    "ROLES",
    "Trajectory",
    "aborted_result",
    "automatic_guardrails",
    "constraint_similarity",
    "evaluate",
    "first_user_index",
    "turn_count",
]

# The value a null becomes before `addition`/`removal`/`update` compare rows (upstream's zero fill).
_ZERO_BY_DTYPE: dict[str, Any] = {
    "String": "",
    "Utf8": "",
    "Boolean": False,
    "Float64": 0.0,
    "Float32": 0.0,
    "Int64": 0,
    "Int32": 0,
}


# --------------------------------------------------------------------------- one constraint


def _zero_fill(rows: Sequence[Mapping[str, Any]], dtypes: Mapping[str, str]) -> list[dict[str, Any]]:
    """Replace nulls with the zero of their column's type ("" / 0 / 0.0 / False)."""
    out = []
    for row in rows:
        filled = {}
        for col, value in row.items():
            if value is None:
                value = _ZERO_BY_DTYPE.get(dtypes.get(col, ""), None)
            filled[col] = value
        out.append(filled)
    return out


def _pair_count(rows: Sequence[Mapping[str, Any]], others: Sequence[Mapping[str, Any]]) -> int:
    """Number of (row, other) pairs that are equal on every column (an inner join's size)."""
    return sum(1 for r in rows for o in others if r == o)


def _anti_join(rows: Sequence[Mapping[str, Any]], others: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows that equal none of ``others`` on every column."""
    return [r for r in rows if not any(r == o for o in others)]


@dataclass(frozen=True)
class _Prepared:
    """A constraint with its target rows thawed once (plain lists/dicts for comparisons)."""

    constraint: Constraint
    target_rows: tuple[dict[str, Any], ...]
    filled_target_rows: tuple[dict[str, Any], ...]


def _prepare(constraint: Constraint) -> _Prepared:
    rows = tuple(thaw(r) for r in constraint.target_rows)
    filled = tuple(_zero_fill(rows, constraint.target_dtypes))
    return _Prepared(constraint, rows, filled)


def _snapshot(prep: _Prepared, rows: Sequence[Mapping[str, Any]], target_rows: Sequence[Mapping[str, Any]]) -> float:
    c = prep.constraint
    return table_similarity(rows, DB_SCHEMAS[c.database], target_rows, c.column_similarity)


def _tool_trace_dependant(prep: _Prepared, current: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    c = prep.constraint
    assert c.extractor is not None
    traces = reference.get("tool_trace")
    if traces is None:
        return 0.0
    candidates: list[dict[str, Any]] = []
    for trace in traces:
        candidates.extend(extract_candidates(c.extractor, trace))
    best = 0.0
    first = prep.target_rows[0]
    for candidate in candidates:
        if c.fill_to == "content":
            template = first.get("content")
            if not isinstance(template, str):
                return 0.0
            try:
                filled_value: Any = template.format(**candidate)
            except (KeyError, IndexError):
                return 0.0  # upstream quirk: a missing placeholder zeroes the whole constraint
            except (ValueError, AttributeError, TypeError):
                return 0.0  # a malformed format string: treated like a missing placeholder
        else:
            golden = first.get("tool_trace")
            alternatives = [golden] if isinstance(golden, Mapping) else list(golden or [])
            filled_value = []
            for alt in alternatives:
                if not isinstance(alt, Mapping):
                    continue
                args = dict(alt.get("arguments") or {})
                filled_value.append({**alt, "arguments": {**args, **candidate}})
                filled_value.append({**alt, "arguments": {**candidate, **args}})
        targets = [{**row, c.fill_to: filled_value} for row in prep.target_rows]
        best = max(best, _snapshot(prep, [current], targets))
    return best


def constraint_similarity(
    prepared: _Prepared | Constraint, trajectory: Trajectory, current: int, reference: int | None
) -> float:
    """Similarity of one constraint with its milestone at message ``current`` and its reference
    milestone at message ``reference`` (``None``: no reference)."""
    prep = prepared if isinstance(prepared, _Prepared) else _prepare(prepared)
    c = prep.constraint
    state = trajectory.state(c.database, current)
    ref_state = trajectory.state(c.database, reference) if reference is not None else None
    kind = c.similarity
    if kind == "snapshot":
        return _snapshot(prep, state, prep.target_rows)
    if ref_state is None:
        return 0.0  # the loader rejects reference-less constraints of the kinds below
    if kind == "guardrail":
        return 1.0 if state == ref_state else 0.0
    if kind == "tool_trace_dependant":
        return _tool_trace_dependant(prep, state[0], ref_state[0])
    dtypes = DB_SCHEMAS[c.database]
    now, before = _zero_fill(state, dtypes), _zero_fill(ref_state, dtypes)
    if kind == "removal":
        now, before = before, now
    if kind in ("addition", "removal"):
        if _pair_count(now, before) != len(before):
            return 0.0
    elif kind == "update":
        if len(now) != len(before):
            return 0.0
    else:
        raise ValueError(f"unknown constraint similarity {kind!r}")
    return _snapshot(prep, _anti_join(now, before), prep.filled_target_rows)


# --------------------------------------------------------------------------- matching milestones


class _NodeScorer:
    """Similarity of one milestone at an index given the mapping so far, with per-constraint caches."""

    def __init__(self, node: Milestone, trajectory: Trajectory, first_index: int) -> None:
        self.trajectory = trajectory
        self.first_index = first_index
        self.items: list[tuple[_Prepared, dict[tuple[int, int | None], float]]] = []
        for c in node.constraints:
            self.items.append((_prepare(c), {}))
        for g in node.guardrails:
            guard = Constraint(
                database=g.database,
                similarity="guardrail",
                reference=g.reference,
                target_columns=(),
                target_dtypes=FrozenDict(),
                target_rows=(),
                column_similarity=FrozenDict(),
            )
            self.items.append((_prepare(guard), {}))
        self.count = sum(1 for p, _ in self.items if p.constraint.similarity != "guardrail")
        self.references = tuple(sorted({p.constraint.reference for p, _ in self.items} - {None, -1}))
        self.memo: dict[tuple[int, ...], float] = {}

    def score(self, index: int, mapping: Mapping[int, int]) -> float:
        memo_key = (index, *(mapping[r] for r in self.references))
        value = self.memo.get(memo_key)
        if value is None:
            value = self.memo[memo_key] = self._score(index, mapping)
        return value

    def _score(self, index: int, mapping: Mapping[int, int]) -> float:
        product = 1.0
        for prep, cache in self.items:
            c = prep.constraint
            if c.reference is None:
                ref = None
            elif c.reference == -1:
                ref = self.first_index
            else:
                ref = mapping[c.reference]
            key = (
                self.trajectory.state_key(c.database, index),
                self.trajectory.state_key(c.database, ref) if ref is not None else None,
            )
            value = cache.get(key)
            if value is None:
                value = constraint_similarity(prep, self.trajectory, index, ref)
                cache[key] = value
            product *= value
        return math.pow(product, 1 / self.count)


def _match(
    nodes: Sequence[Milestone], edges: Sequence[tuple[int, int]], trajectory: Trajectory, first_index: int
) -> tuple[dict[int, tuple[int, float]], float | None]:
    """Best mapping of nodes to message indices and its mean similarity (None when there are no nodes).

    Exhaustive depth-first search in upstream's order (EVALUATION.md §5): at each level every
    ready node is scored at every index from the last assigned index on; candidates are tried by
    descending similarity, then node, then index; a candidate is skipped when even perfect scores
    for the rest could not beat the level's best; only a strictly larger sum replaces it.
    """
    if not nodes:
        return {}, None
    scorers = [_NodeScorer(node, trajectory, first_index) for node in nodes]
    graph_nodes = set(range(len(nodes))) if len(nodes) == 1 else {x for e in edges for x in e}
    preds: dict[int, set[int]] = {i: set() for i in graph_nodes}
    for a, b in edges:
        preds[b].add(a)
    last = trajectory.last_index

    # A subtree's outcome depends only on what its nodes can see: the nodes left, the lower
    # bound, the indices of already-assigned nodes they reference and the exact running sum.
    # Equal keys therefore give identical searches, so their results are reused.
    refs_of = {m: set(scorers[m].references) for m in graph_nodes}
    memo: dict[tuple[Any, ...], tuple[tuple[tuple[int, int, float], ...], float]] = {}

    def search(
        assigned: tuple[tuple[int, int, float], ...], assigned_sum: float, remaining: frozenset[int]
    ) -> tuple[tuple[tuple[int, int, float], ...], float]:
        """Best continuation (the assignments it adds) of ``assigned`` and its total sum."""
        if not remaining:
            return (), assigned_sum
        lower = assigned[-1][1] if assigned else first_index
        mapping = {m: idx for m, idx, _ in assigned}
        seen = sorted({r for m in remaining for r in refs_of[m]} & mapping.keys())
        key = (remaining, lower, tuple(mapping[r] for r in seen), tuple(seen), assigned_sum)
        cached = memo.get(key)
        if cached is not None:
            return cached
        heap = []
        for m in sorted(remaining):
            if preds[m] & remaining:
                continue
            for idx in range(lower, last + 1):
                heap.append((-scorers[m].score(idx, mapping), m, idx))
        heapq.heapify(heap)
        best: tuple[tuple[int, int, float], ...] = ()
        best_sum = -1.0
        while heap:
            neg, m, idx = heapq.heappop(heap)
            sim = -neg
            if assigned_sum + sim + len(remaining) - 1 <= best_sum:
                continue
            step = ((m, idx, sim),)
            found, total = search(assigned + step, assigned_sum + sim, remaining - {m})
            if total > best_sum:
                best, best_sum = step + found, total
        memo[key] = (best, best_sum)
        return best, best_sum

    found, total = search((), 0, frozenset(graph_nodes))
    mapping = {m: (idx, sim) for m, idx, sim in sorted(found)}
    return mapping, total / len(nodes)


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class EvaluationResult:
    """Upstream's score of one episode.

    ``milestone_mapping`` / ``minefield_mapping`` map a node to ``(sandbox_message_index,
    similarity)``, sorted by node.  ``exception`` is ``None`` or ``{type, message, phase}`` for an
    aborted episode.
    """

    similarity: float
    milestone_similarity: float
    minefield_similarity: float
    turn_count: int
    milestone_mapping: Mapping[int, tuple[int, float]] = field(default_factory=FrozenDict)
    minefield_mapping: Mapping[int, tuple[int, float]] = field(default_factory=FrozenDict)
    exception: Mapping[str, Any] | None = None

    @property
    def per_milestone_scores(self) -> dict[int, float]:
        """Similarity of each matched milestone."""
        return {m: sim for m, (_, sim) in self.milestone_mapping.items()}

    @property
    def per_minefield_scores(self) -> dict[int, float]:
        return {m: sim for m, (_, sim) in self.minefield_mapping.items()}

    def to_dict(self) -> dict[str, Any]:
        """The corpus's ``result`` layout (string keys, ``[index, similarity]`` pairs)."""
        return {
            "similarity": self.similarity,
            "milestone_similarity": self.milestone_similarity,
            "minefield_similarity": self.minefield_similarity,
            "turn_count": self.turn_count,
            "milestone_mapping": {str(k): [i, s] for k, (i, s) in self.milestone_mapping.items()},
            "minefield_mapping": {str(k): [i, s] for k, (i, s) in self.minefield_mapping.items()},
            "exception": dict(self.exception) if self.exception is not None else None,
        }


def _mapping(entries: Mapping[int, tuple[int, float]]) -> FrozenDict:
    return FrozenDict({k: (int(i), float(s)) for k, (i, s) in entries.items()})


def evaluate(
    scenario: Scenario, messages: Sequence[Mapping[str, Any]], db_snapshots: Mapping[str, Any]
) -> EvaluationResult:
    """Score a finished episode of ``scenario`` exactly as upstream does (see the module docstring)."""
    trajectory = Trajectory(messages, db_snapshots)
    first = first_user_index(trajectory.messages)
    m_map, m_sim = _match(scenario.milestones, scenario.milestone_edges, trajectory, first)
    f_map, f_sim = _match(scenario.minefields, scenario.minefield_edges, trajectory, first)
    milestone_similarity = 1.0 if m_sim is None else float(m_sim)
    minefield_similarity = 0.0 if f_sim is None else float(f_sim)
    return EvaluationResult(
        similarity=milestone_similarity if minefield_similarity == 0 else 0.0,
        milestone_similarity=milestone_similarity,
        minefield_similarity=minefield_similarity,
        turn_count=turn_count(trajectory.messages),
        milestone_mapping=_mapping(m_map),
        minefield_mapping=_mapping(f_map),
    )


def aborted_result(scenario: Scenario, exception: Mapping[str, Any] | None = None) -> EvaluationResult:
    """How upstream's runner scores an episode whose play raised: zeros and ``max_messages`` turns."""
    return EvaluationResult(
        similarity=0.0,
        milestone_similarity=0.0,
        minefield_similarity=0.0,
        turn_count=scenario.max_messages,
        exception=FrozenDict(exception)
        if exception is not None
        else FrozenDict({"type": "Exception", "message": "", "phase": "play"}),
    )
