"""A finished ToolSandbox episode as the scorer reads it: the message bus plus the world snapshots.

* ``messages`` -- the whole message bus, seeded rows included, as a sequence of row dicts with the
  corpus's columns (:data:`DB_SCHEMAS` ``["SANDBOX"]``); ``tool_trace`` is ``None`` or a list of
  ``{tool_name, arguments, result}`` dicts; roles are upstream's strings (``"AGENT"``, ``"USER"``, ...).
* ``db_snapshots`` -- ``{"SETTING"|"CONTACT"|"MESSAGING"|"REMINDER": [{"sandbox_message_index": k,
  "rows": [row dict, ...]}, ...]}``; the state of a database at message *i* is the snapshot with the
  largest index <= *i*.

Rows are checked against the schemas: every column present, no extra world columns, cells of the
column's type or null.  Nothing here mutates its inputs; malformed inputs raise
:class:`EvaluationInputError` with a message naming the offending field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .data import thaw
from .scenarios import WORLD_DATABASES

__all__ = ["DB_SCHEMAS", "EvaluationInputError", "ROLES", "Trajectory", "first_user_index", "turn_count"]

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


class EvaluationInputError(ValueError):
    """The message bus or the database snapshots handed to the evaluator are malformed."""


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

    def state_keys(self, db: str) -> list[int]:
        """``state_key(db, i)`` for every message index ``i``, as one list (built once)."""
        keys = self._slots.get(db)
        if keys is None:
            if db == "SANDBOX":
                keys = list(range(self.last_index + 1))
            else:  # the position of the snapshot in effect (-1: before any snapshot, an empty table)
                tags, keys, k = self._tags[db], [], -1
                for i in range(self.last_index + 1):
                    while k + 1 < len(tags) and tags[k + 1] <= i:
                        k += 1
                    keys.append(k)
            self._slots[db] = keys
        return keys

    def state(self, db: str, index: int) -> list[dict[str, Any]]:
        if db == "SANDBOX":
            return [self.messages[index]]
        slot = self.state_keys(db)[index]
        return self._tables[db][slot] if slot >= 0 else []

    def state_key(self, db: str, index: int) -> int:
        return self.state_keys(db)[index]
