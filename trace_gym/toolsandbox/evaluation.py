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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .extractors import extract_candidates
from .matching import best_assignment
from .scenarios import Constraint, FrozenDict, Milestone, Scenario, automatic_guardrails, thaw
from .similarity import column_similarity, table_similarity
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


def _unfillable(prep: _Prepared, current: Mapping[str, Any]) -> bool:
    """Whether ``current`` scores 0 against the targets whatever fills their ``fill_to`` column:
    there is not exactly one target row (a message is one row), a target column is not in the
    table, or another column scores 0 (its cost is infinite, so the row's is)."""
    c = prep.constraint
    if len(prep.target_rows) != 1:
        return True
    columns = DB_SCHEMAS[c.database]
    for col, value in prep.target_rows[0].items():
        if col not in columns:
            return True
        if col != c.fill_to and column_similarity(c.column_similarity[col], col, current.get(col), value) <= 0.0:
            return True
    return False


def _tool_trace_dependant(prep: _Prepared, current: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    c = prep.constraint
    assert c.extractor is not None
    traces = reference.get("tool_trace")
    if traces is None or _unfillable(prep, current):
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


_SCALARS = (str, int, float, bool, type(None))


def _reference_keys(trajectory: Trajectory, constraint: Constraint) -> list[int]:
    """For every message index, a name of what ``constraint`` reads there as its reference:
    equal names, equal similarities.  A ``tool_trace_dependant`` constraint reads only the
    candidates its extractor draws from the reference message's ``tool_trace``: messages with
    none share -1 (they score 0), messages with the same plain candidates share a name."""
    if constraint.similarity != "tool_trace_dependant" or constraint.database != "SANDBOX":
        return trajectory.state_keys(constraint.database)
    assert constraint.extractor is not None
    names: dict[tuple[Any, ...], int] = {}
    out = []
    for i, row in enumerate(trajectory.messages):
        found = [c for trace in row["tool_trace"] or () for c in extract_candidates(constraint.extractor, trace)]
        if not found:
            out.append(-1)
        elif all(isinstance(v, _SCALARS) for c in found for v in c.values()):
            # types and reprs too: 1, 1.0 and True are equal but fill a template differently
            out.append(names.setdefault(tuple(tuple((k, type(v), repr(v)) for k, v in c.items()) for c in found), i))
        else:
            out.append(i)
    return out


class _NodeScorer:
    """Similarity of one milestone at an index given the indices of the nodes it references,
    with per-constraint caches keyed by the states the constraint reads."""

    def __init__(self, node: Milestone, trajectory: Trajectory, first_index: int) -> None:
        self.trajectory = trajectory
        constraints = list(node.constraints)
        for g in node.guardrails:
            constraints.append(
                Constraint(
                    database=g.database,
                    similarity="guardrail",
                    reference=g.reference,
                    target_columns=(),
                    target_dtypes=FrozenDict(),
                    target_rows=(),
                    column_similarity=FrozenDict(),
                )
            )
        self.count = sum(1 for c in constraints if c.similarity != "guardrail")
        # the other nodes whose index the score reads, and for each the key lists of what it reads there
        self.references = tuple(sorted({c.reference for c in constraints} - {None, -1}))
        self.reference_reads: dict[int, list[list[int]]] = {r: [] for r in self.references}
        # per constraint: prepared, cache, keys at the current index, reference position (None: no
        # reference, -1: the first index) and keys at the reference's index
        self.items: list[tuple[_Prepared, dict[tuple[int, int | None], float], list[int], int | None, list[int]]] = []
        # guardrails (0 or 1, so where they sit in the product changes no bit) first: one that fails ends it
        for c in sorted(constraints, key=lambda c: c.similarity != "guardrail"):
            ref_keys = _reference_keys(trajectory, c)
            if c.reference is None or c.reference == -1:
                position = None if c.reference is None else -1
            else:
                position = self.references.index(c.reference)
                if all(keys is not ref_keys for keys in self.reference_reads[c.reference]):
                    self.reference_reads[c.reference].append(ref_keys)
            self.items.append((_prepare(c), {}, trajectory.state_keys(c.database), position, ref_keys))
        self.first_index = first_index

    def _value(self, item: tuple[Any, ...], index: int, ref: int | None) -> float:
        prep, cache, now_keys, _, ref_keys = item
        key = (now_keys[index], None if ref is None else ref_keys[ref])
        value = cache.get(key)
        if value is None:
            value = cache[key] = constraint_similarity(prep, self.trajectory, index, ref)
        return value

    def score(self, index: int, held: Sequence[int]) -> float:
        """Similarity at ``index`` when ``self.references`` are matched at the indices ``held``."""
        product = 1.0
        for item in self.items:
            position = item[3]
            ref = None if position is None else self.first_index if position < 0 else held[position]
            value = self._value(item, index, ref)
            if not value:
                return 0.0
            product *= value
        return math.pow(product, 1 / self.count)

    def upper(self, index: int) -> float:
        """A bound on :meth:`score` at ``index`` whatever the references hold: the constraints that
        read a reference count as 1, except a ``tool_trace_dependant`` one that no fill can match."""
        product = 1.0
        for item in self.items:
            prep, position = item[0], item[3]
            c = prep.constraint
            if position is None or position < 0:
                product *= self._value(item, index, None if position is None else self.first_index)
            elif c.similarity == "tool_trace_dependant" and c.database == "SANDBOX":
                if _unfillable(prep, self.trajectory.messages[index]):
                    return 0.0
        return math.pow(product, 1 / self.count)


def _match(
    nodes: Sequence[Milestone], edges: Sequence[tuple[int, int]], trajectory: Trajectory, first_index: int
) -> tuple[dict[int, tuple[int, float]], float | None]:
    """Best mapping of nodes to message indices and its mean similarity (None when there are no nodes).

    The mapping upstream's exhaustive search finds (EVALUATION.md §5), by :func:`best_assignment`;
    the mean is the similarities summed in assignment order, divided by the number of nodes.
    """
    if not nodes:
        return {}, None
    scorers = [_NodeScorer(node, trajectory, first_index) for node in nodes]
    graph_nodes = sorted(set(range(len(nodes))) if len(nodes) == 1 else {x for e in edges for x in e})
    reads: dict[int, list[list[int]]] = {}
    for scorer in scorers:
        for r, key_lists in scorer.reference_reads.items():
            known = reads.setdefault(r, [])
            known.extend(keys for keys in key_lists if all(keys is not k for k in known))
    path = best_assignment(
        graph_nodes,
        edges,
        {m: scorers[m].references for m in graph_nodes},
        lambda m, index, held: scorers[m].score(index, held),
        first_index,
        trajectory.last_index,
        reference_keys={r: list(zip(*key_lists, strict=True)) for r, key_lists in reads.items()},
        upper=lambda m, index: scorers[m].upper(index),
    )
    total: float = 0
    for _, _, sim in path:
        total += sim
    return {m: (index, sim) for m, index, sim in sorted(path)}, total / len(nodes)


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
