"""The four ToolSandbox world databases as in-process, snapshotted tables.

A :class:`World` holds ``SETTING``, ``CONTACT``, ``MESSAGING`` and ``REMINDER``.  Each
database is a list of snapshots ``(sandbox_message_index, rows)``; the state "at
index *i*" is the last snapshot whose tag is at most *i*.  Writes go to the snapshot
tagged :attr:`World.write_index` (the index the answer to the message being processed
will get), which is created as a copy of the latest snapshot on first write.  Rows are
plain dicts of scalars whose key order is the database's column order.

Snapshots are copy-on-write: :meth:`World.copy` shares every snapshot with the copy, and a
world copies a snapshot's rows before it first changes them after sharing them.  A
:meth:`World.savepoint` makes the next writes copy too, so :meth:`World.rollback` undoes
them without any copy having been taken up front.

A world also carries the frozen clock (``now``) and the generator of new row ids.
There is no module-level state: every environment owns its own world.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "DATABASES", "COLUMNS", "FLOAT_COLUMNS", "World", "WorldError", "NoDataError", "counter_ids",
    "BASE_SETTINGS", "REFERENCE_NOW",
]

DATABASES: tuple[str, ...] = ("SETTING", "CONTACT", "MESSAGING", "REMINDER")

COLUMNS: dict[str, tuple[str, ...]] = {
    "SETTING": ("device_id", "cellular", "wifi", "location_service", "low_battery_mode", "latitude", "longitude"),
    "CONTACT": ("person_id", "name", "phone_number", "relationship", "is_self"),
    "MESSAGING": (
        "message_id", "sender_person_id", "sender_phone_number", "recipient_person_id",
        "recipient_phone_number", "content", "creation_timestamp",
    ),
    "REMINDER": ("reminder_id", "content", "creation_timestamp", "reminder_timestamp", "latitude", "longitude"),
}

# Columns stored as 64-bit floats: integers written there are stored as floats.
FLOAT_COLUMNS: frozenset[str] = frozenset({"latitude", "longitude", "creation_timestamp", "reminder_timestamp"})

# The setting flags of the plain ``base`` world; other base worlds switch some of them off.
BASE_SETTINGS: dict[str, bool] = {"cellular": True, "wifi": True, "location_service": True, "low_battery_mode": False}

# The frozen reference clock of the recorded corpus: 2025-06-04T09:00:00 UTC.
REFERENCE_NOW: float = 1749027600.0


class WorldError(Exception):
    """A database operation that cannot be carried out (the message says why)."""


class NoDataError(WorldError):
    """No row matched a removal or update."""


def counter_ids(prefix: str = "toolsandbox-conformance/") -> Callable[[], str]:
    """The corpus id rule: the k-th id of an episode is ``uuid5(NAMESPACE_URL, prefix + str(k))``."""
    state = {"k": 0}

    def draw() -> str:
        k = state["k"]
        state["k"] = k + 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{prefix}{k}"))

    return draw


_COLUMN_SETS: dict[str, frozenset[str]] = {db: frozenset(cols) for db, cols in COLUMNS.items()}
_FLOATS_OF: dict[str, tuple[str, ...]] = {db: tuple(c for c in cols if c in FLOAT_COLUMNS) for db, cols in COLUMNS.items()}


def _normalise(db: str, row: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``row`` with every column of ``db`` in order (missing ones null), integers in float columns as floats."""
    cols = COLUMNS[db]
    if type(row) is dict and tuple(row) == cols:  # already every column, in order: a plain copy
        out = dict(row)
    else:
        if not _COLUMN_SETS[db].issuperset(row):
            unknown = set(row) - set(cols)
            raise WorldError(f"unknown column(s) {sorted(unknown)} for database {db}")
        get = row.get
        out = {col: get(col) for col in cols}
    for col in _FLOATS_OF[db]:
        v = out[col]
        if v is not None and type(v) is not float and isinstance(v, (int, float)) and not isinstance(v, bool):
            out[col] = float(v)
    return out


class World:
    """Snapshotted tables plus the clock and the id source of one episode."""

    def __init__(
        self,
        snapshots: dict[str, list[tuple[int, list[dict[str, Any]]]]] | None = None,
        *,
        now: float = REFERENCE_NOW,
        new_id: Callable[[], str] | None = None,
    ):
        self._snaps: dict[str, list[tuple[int, list[dict[str, Any]]]]] = {db: [] for db in DATABASES}
        for db, snaps in (snapshots or {}).items():
            if db not in self._snaps:
                raise WorldError(f"unknown database {db!r}; expected one of {DATABASES}")
            self._snaps[db] = [(int(tag), [_normalise(db, r) for r in rows]) for tag, rows in snaps]
        for db in DATABASES:
            if not self._snaps[db]:
                self._snaps[db] = [(0, [])]
        self.now = float(now)
        self.new_id: Callable[[], str] = new_id or counter_ids()
        self.write_index = max(s[-1][0] for s in self._snaps.values()) + 1
        # db -> the latest snapshot's rows when this world alone holds them (may change them in place)
        self._own: dict[str, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tables(
        cls,
        tables: dict[str, list[dict[str, Any]]],
        *,
        now: float = REFERENCE_NOW,
        new_id: Callable[[], str] | None = None,
    ) -> World:
        """A world whose databases hold ``tables`` (``{db: rows}``) from index 0.

        ``SETTING`` defaults to one row of :data:`BASE_SETTINGS` (no device id, no location).
        Use it to run the tools on a world of your own (e.g. a synthetic one).
        """
        tables = dict(tables)
        tables.setdefault("SETTING", [dict(BASE_SETTINGS)])
        return cls({db: [(0, rows)] for db, rows in tables.items()}, now=now, new_id=new_id)  # rows are copied there

    @classmethod
    def from_scenario(
        cls,
        world_rows: dict[str, list[dict[str, Any]]],
        world_index: int,
        *,
        now: float = REFERENCE_NOW,
        new_id: Callable[[], str] | None = None,
    ) -> World:
        """The initial world of a scenario, snapshotted as upstream builds it.

        Index 0 holds the default device settings and empty tables; ``world_index``
        (the row after the user simulator's few-shot dialog) holds the scenario rows.
        The settings get a second snapshot only when they differ from the defaults.
        """
        setting_rows = [dict(r) for r in world_rows.get("SETTING", [])]
        if len(setting_rows) != 1:
            raise WorldError(f"SETTING must have exactly one row, got {len(setting_rows)}")
        base = dict(setting_rows[0])
        base.update(BASE_SETTINGS)
        snaps: dict[str, list[tuple[int, list[dict[str, Any]]]]] = {"SETTING": [(0, [base])]}
        if setting_rows[0] != base:
            snaps["SETTING"].append((world_index, setting_rows))
        for db in DATABASES[1:]:
            snaps[db] = [(0, []), (world_index, [dict(r) for r in world_rows.get(db, [])])]
        return cls(snaps, now=now, new_id=new_id)

    # ------------------------------------------------------------------ reading
    def rows(self, db: str) -> list[dict[str, Any]]:
        """Copies of the rows of the latest snapshot of ``db``."""
        return [dict(r) for r in self._latest(db)]

    def latest_rows(self, db: str) -> list[dict[str, Any]]:
        """The rows of the latest snapshot of ``db`` themselves, not copies: read them, never change them."""
        return self._latest(db)

    def _latest(self, db: str) -> list[dict[str, Any]]:
        try:
            return self._snaps[db][-1][1]
        except KeyError:
            raise WorldError(f"unknown database {db!r}; expected one of {DATABASES}") from None

    def setting(self, name: str) -> Any:
        rows = self._latest("SETTING")
        if not rows:
            raise WorldError("the SETTING table is empty")
        return rows[0][name]

    def state_at(self, db: str, index: int) -> list[dict[str, Any]]:
        """Rows of ``db`` at message index ``index`` (the last snapshot tagged <= index)."""
        found: list[dict[str, Any]] = []
        for tag, rows in self._snaps[db]:
            if tag > index:
                break
            found = rows
        return [dict(r) for r in found]

    def snapshots(self) -> dict[str, list[dict[str, Any]]]:
        """Every snapshot, in the corpus format ``{db: [{sandbox_message_index, rows}]}``."""
        return {
            db: [{"sandbox_message_index": tag, "rows": [dict(r) for r in rows]} for tag, rows in snaps]
            for db, snaps in self._snaps.items()
        }

    def copy(self) -> World:
        """An independent copy that shares the id source (ids keep counting across copies).

        Nothing is copied now: both worlds share the snapshots, and each copies a snapshot's
        rows before it first changes them.
        """
        new = World.__new__(World)
        new._snaps = {db: list(snaps) for db, snaps in self._snaps.items()}
        new._own = {}
        self._own = {}  # the rows are shared from now on
        new.now = self.now
        new.new_id = self.new_id
        new.write_index = self.write_index
        return new

    def savepoint(self) -> dict[str, tuple[int, tuple[int, list[dict[str, Any]]]]]:
        """A mark to :meth:`rollback` to: later writes copy the rows they change first."""
        self._own = {}
        return {db: (len(snaps), snaps[-1]) for db, snaps in self._snaps.items()}

    def rollback(self, mark: dict[str, tuple[int, tuple[int, list[dict[str, Any]]]]]) -> None:
        """Undo every write since :meth:`savepoint` returned ``mark`` (the clock and ids are kept)."""
        for db, (n, last) in mark.items():
            snaps = self._snaps[db]
            del snaps[n:]
            snaps[n - 1] = last
        self._own = {}

    # ------------------------------------------------------------------ writing
    def _target(self, db: str) -> list[dict[str, Any]]:
        snaps = self._snaps[db]
        tag, rows = snaps[-1]
        if tag > self.write_index:
            raise WorldError(f"cannot write {db} at index {self.write_index}: a later snapshot ({tag}) exists")
        if tag == self.write_index and self._own.get(db) is rows:
            return rows
        copied = [dict(r) for r in rows]
        if tag < self.write_index:
            snaps.append((self.write_index, copied))
        else:  # this snapshot is shared (with a copy or a savepoint): change a copy of it
            snaps[-1] = (tag, copied)
        self._own[db] = copied
        return copied

    def add(self, db: str, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows (missing columns are null)."""
        new = [_normalise(db, r) for r in rows]
        self._target(db).extend(new)

    def remove(self, db: str, column: str, value: Any) -> None:
        """Delete the rows whose ``column`` equals ``value``.

        Like upstream, the snapshot for this write is created before the check, so a
        removal that matches nothing still leaves an (identical) snapshot behind.  The
        error text mimics upstream's, which shows the (truncated) filter expression.
        """
        target = self._target(db)
        keep = [r for r in target if not (r[column] is not None and r[column] == value)]
        if len(keep) == len(target):
            expr = f'[([(col("{column}")) == (String({value}))]) & ([(col("sandbox_message_index")) == (dyn int: {self.write_index})])]'
            shown = f"{expr[:30]}\u2026" if len(expr) > 30 else expr
            # Upstream shows the expression object's address, which differs on every run; a number drawn
            # from the expression keeps the text's shape and makes it a function of the episode.
            raise NoDataError(f"No db entry matching predicate=<Expr [{shown!r}] at 0x{zlib.crc32(expr.encode()):08X}> found")
        target[:] = keep

    def set_setting(self, name: str, value: Any) -> None:
        target = self._target("SETTING")
        for r in target:
            r[name] = value
