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
:func:`score_record` / :func:`score_corpus` check the scorer alone against conformance records.

Rows are checked against the bus / world schemas (:data:`DB_SCHEMAS`): every column present, no
extra world columns, cells of the column's type or null.  Nothing here mutates its inputs;
malformed inputs raise :class:`EvaluationInputError` with a message naming the offending field.
"""

from __future__ import annotations

import heapq
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.toolsandbox.extractors import extract_candidates
from trace_gym.toolsandbox.scenarios import (
    WORLD_DATABASES,
    Constraint,
    FrozenDict,
    Milestone,
    Scenario,
    automatic_guardrails,
    load_scenarios,
    thaw,
)
from trace_gym.toolsandbox.similarity import table_similarity

__all__ = [
    "DB_SCHEMAS",
    "EvaluationInputError",
    "EvaluationResult",
    "ROLES",
    "RecordCheck",
    "Trajectory",
    "aborted_result",
    "automatic_guardrails",
    "constraint_similarity",
    "evaluate",
    "first_user_index",
    "score_corpus",
    "score_record",
    "turn_count",
]

# Column name -> polars dtype name of every database (the message bus is ``SANDBOX``).
DB_SCHEMAS: dict[str, dict[str, str]] = {
    "SANDBOX": {
        "sender": "Enum",
        "recipient": "Enum",
        "content": "String",
        "openai_tool_call_id": "String",
        "openai_function_name": "String",
        "conversation_active": "Boolean",
        "tool_call_exception": "String",
        "tool_trace": "List",
        "visible_to": "List",
    },
    "SETTING": {
        "device_id": "String",
        "cellular": "Boolean",
        "wifi": "Boolean",
        "location_service": "Boolean",
        "low_battery_mode": "Boolean",
        "latitude": "Float64",
        "longitude": "Float64",
    },
    "CONTACT": {
        "person_id": "String",
        "name": "String",
        "phone_number": "String",
        "relationship": "String",
        "is_self": "Boolean",
    },
    "MESSAGING": {
        "message_id": "String",
        "sender_person_id": "String",
        "sender_phone_number": "String",
        "recipient_person_id": "String",
        "recipient_phone_number": "String",
        "content": "String",
        "creation_timestamp": "Float64",
    },
    "REMINDER": {
        "reminder_id": "String",
        "content": "String",
        "creation_timestamp": "Float64",
        "reminder_timestamp": "Float64",
        "latitude": "Float64",
        "longitude": "Float64",
    },
}

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


class EvaluationInputError(ValueError):
    """The message bus or the database snapshots handed to the evaluator are malformed."""


# --------------------------------------------------------------------------- trajectory


def first_user_index(messages: Sequence[Mapping[str, Any]]) -> int:
    """Index of the first ``USER`` row that is not user-simulator few-shot (``visible_to != ["USER"]``)."""
    for position, row in enumerate(messages):
        if row.get("sender") == "USER" and _as_list(row.get("visible_to")) != ["USER"]:
            return position
    raise EvaluationInputError("messages: no user message (sender USER, not few-shot) to start the episode from")


def _as_list(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def turn_count(messages: Iterable[Mapping[str, Any]]) -> int:
    """Upstream's effective turn count (EVALUATION.md §8); seeded rows (null ``visible_to``) don't count."""
    count = 0
    for row in messages:
        sender, recipient, visible = row.get("sender"), row.get("recipient"), _as_list(row.get("visible_to"))
        if sender == "SYSTEM" or visible is None or visible == ["USER"]:
            continue
        if {sender, recipient} == {"USER", "EXECUTION_ENVIRONMENT"}:
            continue
        count += 1
    return count


ROLES = frozenset({"SYSTEM", "USER", "AGENT", "EXECUTION_ENVIRONMENT"})
_STRING_COLUMNS = ("content", "openai_tool_call_id", "openai_function_name", "tool_call_exception")


def _check_message(pos: int, row: Mapping[str, Any]) -> None:
    """Reject a bus row whose cells do not have the bus schema's types."""
    where = f"messages[{pos}]"
    for col in ("sender", "recipient"):
        if not isinstance(row[col], str) or row[col] not in ROLES:
            raise EvaluationInputError(f"{where}.{col}: expected one of {sorted(ROLES)}, got {row[col]!r:.60}")
    for col in _STRING_COLUMNS:
        if row[col] is not None and not isinstance(row[col], str):
            raise EvaluationInputError(f"{where}.{col}: expected a string or null, got {type(row[col]).__name__}")
    if row["conversation_active"] is not None and not isinstance(row["conversation_active"], bool):
        raise EvaluationInputError(f"{where}.conversation_active: expected a boolean or null")
    visible = row["visible_to"]
    if visible is not None and not (
        isinstance(visible, list) and all(isinstance(v, str) and v in ROLES for v in visible)
    ):
        raise EvaluationInputError(f"{where}.visible_to: expected null or a list of roles, got {visible!r:.60}")
    trace = row["tool_trace"]
    if trace is not None:
        if not isinstance(trace, list) or not all(isinstance(t, Mapping) and "tool_name" in t for t in trace):
            raise EvaluationInputError(
                f"{where}.tool_trace: expected null or a list of traced calls {{tool_name, arguments, result}}"
            )


def _fits(value: Any, dtype: str) -> bool:
    """Whether a world-table cell has its column's type (null always fits)."""
    if value is None:
        return True
    if dtype == "String":
        return isinstance(value, str)
    if dtype == "Boolean":
        return isinstance(value, bool)
    if dtype == "Float64":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


class Trajectory:
    """A finished episode: the message bus plus the world databases' snapshots, validated.

    ``state(db, i)`` is the database at message ``i`` (its latest snapshot with index <= i, a
    list of rows); for ``SANDBOX`` it is the single message row ``i``.  ``state_key`` names that
    state, so equal keys mean equal states (used for caching).
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]], db_snapshots: Mapping[str, Any]) -> None:
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
            raise EvaluationInputError("messages: expected a non-empty list of message rows")
        self.messages: list[dict[str, Any]] = []
        for pos, row in enumerate(messages):
            if not isinstance(row, Mapping):
                raise EvaluationInputError(f"messages[{pos}]: expected a row object, got {type(row).__name__}")
            if row.get("sandbox_message_index") != pos:
                raise EvaluationInputError(
                    f"messages[{pos}].sandbox_message_index: expected {pos} (rows must be numbered 0, 1, 2, ...), "
                    f"got {row.get('sandbox_message_index')!r}"
                )
            missing = [c for c in DB_SCHEMAS["SANDBOX"] if c not in row]
            if missing:
                raise EvaluationInputError(f"messages[{pos}]: missing columns {missing}")
            plain = {c: thaw(row[c]) for c in DB_SCHEMAS["SANDBOX"]}
            _check_message(pos, plain)
            self.messages.append(plain)
        self.last_index = len(self.messages) - 1
        if not isinstance(db_snapshots, Mapping):
            raise EvaluationInputError("db_snapshots: expected an object keyed by database name")
        unknown = sorted(set(db_snapshots) - set(WORLD_DATABASES))
        if unknown:
            raise EvaluationInputError(f"db_snapshots: unknown databases {unknown} (expected {list(WORLD_DATABASES)})")
        self._tags: dict[str, list[int]] = {}
        self._tables: dict[str, list[list[dict[str, Any]]]] = {}
        self._slots: dict[str, list[int]] = {}
        for db in WORLD_DATABASES:
            if db not in db_snapshots:
                raise EvaluationInputError(f"db_snapshots: missing database {db!r}")
            self._load_db(db, db_snapshots[db])

    def _load_db(self, db: str, snaps: Any) -> None:
        if not isinstance(snaps, Sequence) or isinstance(snaps, (str, bytes)):
            raise EvaluationInputError(f"db_snapshots.{db}: expected a list of snapshots")
        columns = DB_SCHEMAS[db]
        entries: list[tuple[int, list[dict[str, Any]]]] = []
        for k, snap in enumerate(snaps):
            where = f"db_snapshots.{db}[{k}]"
            if not isinstance(snap, Mapping):
                raise EvaluationInputError(f"{where}: expected {{sandbox_message_index, rows}}")
            tag = snap.get("sandbox_message_index")
            if not isinstance(tag, int) or isinstance(tag, bool) or tag < 0:
                raise EvaluationInputError(
                    f"{where}.sandbox_message_index: expected a non-negative integer, got {tag!r}"
                )
            rows = snap.get("rows")
            if not isinstance(rows, Sequence) or isinstance(rows, (str, bytes)):
                raise EvaluationInputError(f"{where}.rows: expected a list of rows")
            plain_rows = []
            for j, row in enumerate(rows):
                if not isinstance(row, Mapping):
                    raise EvaluationInputError(f"{where}.rows[{j}]: expected a row object")
                keys = set(row) - {"sandbox_message_index"}
                if keys != set(columns):
                    raise EvaluationInputError(
                        f"{where}.rows[{j}]: columns {sorted(keys)} differ from the {db} schema {sorted(columns)}"
                    )
                plain = {c: thaw(row[c]) for c in columns}
                for col, dtype in columns.items():
                    if not _fits(plain[col], dtype):
                        raise EvaluationInputError(
                            f"{where}.rows[{j}].{col}: expected {dtype} or null, got {type(plain[col]).__name__}"
                        )
                plain_rows.append(plain)
            entries.append((tag, plain_rows))
        entries.sort(key=lambda e: e[0])
        tags = [t for t, _ in entries]
        if len(set(tags)) != len(tags):
            raise EvaluationInputError(f"db_snapshots.{db}: two snapshots share a sandbox_message_index")
        self._tags[db] = tags
        self._tables[db] = [rows for _, rows in entries]

    def _slot(self, db: str, index: int) -> int:
        """Position of the snapshot in effect at ``index`` (-1: before any snapshot, an empty table)."""
        slots = self._slots.get(db)
        if slots is None:
            tags = self._tags[db]
            slots, k = [], -1
            for i in range(self.last_index + 1):
                while k + 1 < len(tags) and tags[k + 1] <= i:
                    k += 1
                slots.append(k)
            self._slots[db] = slots
        return slots[index]

    def state(self, db: str, index: int) -> list[dict[str, Any]]:
        if db == "SANDBOX":
            return [self.messages[index]]
        slot = self._slot(db, index)
        return self._tables[db][slot] if slot >= 0 else []

    def state_key(self, db: str, index: int) -> int:
        return index if db == "SANDBOX" else self._slot(db, index)


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


# --------------------------------------------------------------------------- conformance (scorer only)


@dataclass(frozen=True)
class RecordCheck:
    """The scorer's verdict on one conformance record: ``ok`` and, if not, what differed."""

    record_id: str
    ok: bool
    problems: tuple[str, ...]
    result: EvaluationResult | None
    seconds: float


def _mapping_from_json(raw: Any) -> dict[int, tuple[int, float]]:
    return {int(k): (int(v[0]), float(v[1])) for k, v in (raw or {}).items()}


def score_record(
    record: Mapping[str, Any], scenarios: Mapping[str, Scenario] | None = None, tolerance: float = 1e-6
) -> RecordCheck:
    """Score a conformance record's ``messages`` + ``db_snapshots`` and compare with its ``result``.

    Similarities must agree within ``tolerance``, ``turn_count`` and the mapped indices exactly
    (mapped similarities within ``tolerance``).  Aborted records (``result.exception``) are scored
    with :func:`aborted_result`.
    """
    rid = str(record.get("id", "?"))
    scenarios = load_scenarios() if scenarios is None else scenarios
    name = record.get("scenario")
    if name not in scenarios:
        return RecordCheck(rid, False, (f"unknown scenario {name!r}",), None, 0.0)
    scenario = scenarios[name]
    expected = record.get("result") or {}
    start = time.perf_counter()
    try:
        if expected.get("exception"):
            result = aborted_result(scenario, expected["exception"])
        else:
            result = evaluate(scenario, record["messages"], record["db_snapshots"])
    except (EvaluationInputError, KeyError) as exc:
        return RecordCheck(rid, False, (f"{type(exc).__name__}: {exc}",), None, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    problems = []
    for key in ("similarity", "milestone_similarity", "minefield_similarity"):
        want, got = float(expected.get(key, math.nan)), getattr(result, key)
        if not abs(want - got) <= tolerance:
            problems.append(f"{key}: expected {want!r}, got {got!r}")
    if expected.get("turn_count") != result.turn_count:
        problems.append(f"turn_count: expected {expected.get('turn_count')!r}, got {result.turn_count!r}")
    for key in ("milestone_mapping", "minefield_mapping"):
        want_map = _mapping_from_json(expected.get(key))
        got_map = dict(getattr(result, key))
        same = want_map.keys() == got_map.keys() and all(
            want_map[k][0] == got_map[k][0] and abs(want_map[k][1] - got_map[k][1]) <= tolerance for k in want_map
        )
        if not same:
            problems.append(f"{key}: expected {want_map}, got {got_map}")
    return RecordCheck(rid, not problems, tuple(problems), result, seconds)


def _read_records(path: Path) -> Iterable[tuple[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                where = f"{path.name}:{lineno}"
                try:
                    yield where, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield where, exc


def score_corpus(
    files: Iterable[str | Path],
    scenarios: Mapping[str, Scenario] | None = None,
    tolerance: float = 1e-6,
) -> tuple[int, int, list[str]]:
    """Scorer-only conformance over JSONL record files: ``(agree, total, failures)``.

    Each failure is a line ``"<record id>: <what differed>"``.  A file that cannot be read or a
    line that is not JSON counts as one failed record.
    """
    scenarios = load_scenarios() if scenarios is None else scenarios
    agree = total = 0
    failures: list[str] = []
    for name in files:
        path = Path(name)
        if not path.is_file():
            total += 1
            failures.append(f"{path}: no such file")
            continue
        for where, record in _read_records(path):
            total += 1
            if isinstance(record, Exception) or not isinstance(record, Mapping):
                failures.append(f"{where}: not a JSON record ({record})")
                continue
            check = score_record(record, scenarios, tolerance)
            if check.ok:
                agree += 1
            else:
                failures.append(f"{check.record_id}: " + "; ".join(check.problems))
    return agree, total, failures
