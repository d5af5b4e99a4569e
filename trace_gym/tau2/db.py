"""τ²-bench database state: immutable base databases and copy-on-write episode views.

A :class:`BaseDb` holds one immutable database (the domain's data file, or an injected
one) plus its serialisation caches.  A :class:`DbState` starts as a view on a base and
copies only what a write touches: a top-level collection container on its first change,
a record on its first :meth:`DbState.own`.  Inside a transaction
(:meth:`DbState.begin` / :meth:`~DbState.commit` / :meth:`~DbState.rollback`) every change
is journalled, so a failed tool call restores exactly the records it touched.

``DbState.version`` changes on every committed change and is restored by a rollback, so
two equal versions mean the same state.  Hashes are computed from cached per-record
serialisations (see :mod:`trace_gym.tau2.hashing`) and memoised per version.
"""

from __future__ import annotations

import itertools
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .hashing import SerialCache, View, join_object, sha256_of

__all__ = ["BaseDb", "DbState", "clone"]

_MISSING = object()
_VERSIONS = itertools.count(1)  # state versions are unique across all DbStates of the process


# --------------------------------------------------------------------------- values

_ATOMS = frozenset({str, int, float, bool, type(None)})  # immutable JSON values: shared, not copied


def clone(value: Any) -> Any:
    """Deep copy of plain JSON data (dicts, lists, scalars); much faster than ``copy.deepcopy``."""
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _ATOMS else clone(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMS else clone(v) for v in value]
    if isinstance(value, dict):  # subclasses become plain dicts
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def _copy_record(value: Any) -> Any:
    """Deep copy of a DB record (pickle round trip: faster than :func:`clone` for records)."""
    return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


# --------------------------------------------------------------------------- databases


@dataclass
class BaseDb:
    """An immutable database (never mutated after construction) plus its serialisation caches."""

    data: dict[str, Any]
    model: str
    view: View | None = None
    _caches: dict[str, SerialCache] = field(default_factory=dict, repr=False)
    _hashes: dict[str, str] = field(default_factory=dict, repr=False)
    _indexes: dict[str, Any] = field(default_factory=dict, repr=False)
    _record_ids: set[int] | None = field(default=None, repr=False)
    _model_texts: dict[int, str] = field(default_factory=dict, repr=False)

    def cache(self, fmt: str) -> SerialCache:
        c = self._caches.get(fmt)
        if c is None:
            c = self._caches[fmt] = SerialCache(self.data, fmt, self.view)  # type: ignore[arg-type]
        return c

    def model_text(self, record: Any) -> str | None:
        """``json.dumps(record, default=str)`` if ``record`` is one of this database's records
        (the values of its top-level dicts and lists), computed once; else ``None``.

        Base records are never mutated and stay alive with the database, so their identity
        is a safe cache key.
        """
        if self._record_ids is None:
            ids: set[int] = set()
            for value in self.data.values():
                if isinstance(value, dict):
                    ids.update(id(r) for r in value.values() if isinstance(r, (dict, list)))
                elif isinstance(value, list):
                    ids.update(id(r) for r in value if isinstance(r, (dict, list)))
            self._record_ids = ids
        key = id(record)
        if key not in self._record_ids:
            return None
        text = self._model_texts.get(key)
        if text is None:
            text = self._model_texts[key] = json.dumps(record, default=str)
        return text


class DbState:
    """One episode's copy-on-write view of a :class:`BaseDb`."""

    __slots__ = (
        "_base", "data", "model", "_copied", "_changed", "_journal", "_txn_owned", "_txn_version", "version", "_hash_memo",
    )

    def __init__(self, base: BaseDb):
        self._base = base
        self.model = base.model
        self.data: dict[str, Any] = dict(base.data)
        self._copied: set[str] = set()  # top-level containers already copied
        self._changed: dict[str, set[Any] | None] = {}  # coll -> changed keys (None: whole value replaced)
        self._journal: list[tuple[str, Any, Any]] | None = None
        self._txn_owned: set[tuple[str, Any]] = set()
        self.version = next(_VERSIONS)
        self._txn_version = self.version
        self._hash_memo: dict[str, tuple[int, str]] = {}

    # ---- reading
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(f"'{self.model}' object has no attribute '{name}'") from None

    def __getitem__(self, name: str) -> Any:
        return self.data[name]

    def __contains__(self, name: object) -> bool:
        return name in self.data

    # ---- writing
    def _container(self, coll: str) -> Any:
        if coll not in self.data:
            raise AttributeError(f"'{self.model}' object has no attribute '{coll}'")
        if coll not in self._copied:
            value = self.data[coll]
            self.data[coll] = value.copy() if isinstance(value, (dict, list)) else value
            self._copied.add(coll)
        return self.data[coll]

    def _log(self, coll: str, key: Any, was_copied: bool) -> None:
        self.version = next(_VERSIONS)
        if self._journal is not None:
            container = self.data[coll]
            if key is _MISSING:
                prev = container
            elif isinstance(container, dict):
                prev = container.get(key, _MISSING)
            else:
                prev = container[key] if 0 <= key < len(container) else _MISSING
            changed = self._changed.get(coll, _MISSING)
            snapshot = changed if changed is None or changed is _MISSING else set(changed)
            self._journal.append((coll, key, (prev, snapshot, was_copied)))

    def _mark(self, coll: str, key: Any) -> None:
        if key is _MISSING:
            self._changed[coll] = None
            return
        s = self._changed.get(coll, _MISSING)
        if s is _MISSING:
            self._changed[coll] = {key}
        elif s is not None:
            s.add(key)

    def own(self, coll: str, key: Any = _MISSING) -> Any:
        """A private, mutable copy of record ``key`` of ``coll`` (or of the whole top-level value)."""
        if key is _MISSING:
            if coll not in self.data:
                raise AttributeError(f"'{self.model}' object has no attribute '{coll}'")
            if self._already_private(coll, key):
                self.version = next(_VERSIONS)  # the caller may mutate it: memoised hashes are stale
                return self.data[coll]
            self._log(coll, _MISSING, coll in self._copied)
            value = _copy_record(self.data[coll])
            self.data[coll] = value
            self._copied.add(coll)
            self._mark(coll, _MISSING)
            if self._journal is not None:
                self._txn_owned.add((coll, key))
            return value
        if self._already_private(coll, key):
            self.version = next(_VERSIONS)  # the caller may mutate it: memoised hashes are stale
            return self.data[coll][key]
        was = coll in self._copied
        container = self._container(coll)
        record = container[key]
        self._log(coll, key, was)
        record = _copy_record(record)
        container[key] = record
        self._mark(coll, key)
        if self._journal is not None:
            self._txn_owned.add((coll, key))
        return record

    def _already_private(self, coll: str, key: Any) -> bool:
        """Whether the current value may be mutated in place (copied earlier in this transaction,
        or, outside transactions, copied earlier in this episode)."""
        if self._journal is not None:
            return (coll, key) in self._txn_owned or (coll, _MISSING) in self._txn_owned
        changed = self._changed.get(coll, _MISSING)
        if changed is _MISSING:
            return False
        return changed is None or key in changed  # type: ignore[operator]

    def put(self, coll: str, key: Any, record: Any) -> None:
        """Insert or replace a record (``key=None`` on a list collection appends)."""
        was = coll in self._copied
        container = self._container(coll)
        if isinstance(container, list) and (key is None or key == len(container)):
            key = len(container)
            self._log(coll, key, was)
            container.append(record)
        else:
            self._log(coll, key, was)
            container[key] = record
        self._mark(coll, key)
        if self._journal is not None:
            self._txn_owned.add((coll, key))

    def remove(self, coll: str, key: Any) -> None:
        was = coll in self._copied
        container = self._container(coll)
        if isinstance(container, list):
            self._log(coll, _MISSING, was)
            self.data[coll] = [r for i, r in enumerate(container) if i != key]
            self._mark(coll, _MISSING)
            return
        self._log(coll, key, was)
        del container[key]
        self._mark(coll, key)

    # ---- transactions
    def begin(self) -> None:
        self._journal = []
        if self._txn_owned:  # empty outside a transaction unless a write left records in it
            self._txn_owned = set()
        self._txn_version = self.version

    def commit(self) -> None:
        self._journal = None
        if self._txn_owned:
            self._txn_owned = set()

    def rollback(self) -> None:
        journal, self._journal = self._journal or [], None
        self._txn_owned = set()
        for coll, key, (prev, changed, was_copied) in reversed(journal):
            if key is _MISSING:
                self.data[coll] = prev
            else:
                container = self.data[coll]
                if prev is _MISSING:
                    if isinstance(container, list):
                        del container[key:]
                    else:
                        container.pop(key, None)
                else:
                    container[key] = prev
            if changed is _MISSING:
                self._changed.pop(coll, None)
            else:
                self._changed[coll] = changed
            if not was_copied:
                self._copied.discard(coll)
                self.data[coll] = self._base.data[coll] if coll in self._base.data else self.data[coll]
        # the state is exactly what it was when the transaction began
        self.version = self._txn_version

    # ---- hashing / export
    def _text(self, fmt: str) -> str:
        cache = self._base.cache(fmt)
        parts = []
        for coll in sorted(self.data):
            if coll in self._changed:
                changed = self._changed[coll]
                if changed is None:
                    text = cache.record_text(coll, self.data[coll])
                else:
                    text = cache.collection_text(coll, self.data[coll], changed)
            else:
                text = cache.collection_text(coll, None, None)
            parts.append((coll, text))
        return join_object(parts, fmt)  # type: ignore[arg-type]

    def hash(self, fmt: str) -> str:
        """``tau2`` (tau2's own ``get_db_hash``) or ``canonical`` sha256 of this state."""
        memo = self._hash_memo.get(fmt)
        if memo is not None and memo[0] == self.version:
            return memo[1]
        if not self._changed:
            h = self._base._hashes.get(fmt)
            if h is None:
                h = self._base._hashes[fmt] = sha256_of(self._text(fmt))
        else:
            h = sha256_of(self._text(fmt))
        self._hash_memo[fmt] = (self.version, h)
        return h

    def base_index(self, name: str, build: Callable[[dict[str, Any]], Any]) -> Any:
        """``build(base data)``, computed once per base DB (for lookups on fields no tool changes)."""
        index = self._base._indexes.get(name, _MISSING)
        if index is _MISSING:
            index = self._base._indexes[name] = build(self._base.data)
        return index

    def same_content(self, other: DbState) -> bool:
        """Whether ``other`` holds the same data (equal hashes), comparing only changed records
        when both states come from the same base; falls back to hashing otherwise."""
        if self is other:
            return True
        if self._base is not other._base:
            return self.hash("tau2") == other.hash("tau2")

        def text(value: Any) -> str:
            return json.dumps(value, sort_keys=True, default=str)

        for coll in set(self._changed) | set(other._changed):
            a, b = self.data.get(coll, _MISSING), other.data.get(coll, _MISSING)
            if a is b:
                continue
            if a is _MISSING or b is _MISSING:
                return False
            ka, kb = self._changed.get(coll, set()), other._changed.get(coll, set())
            if ka is None or kb is None or type(a) is not type(b) or not isinstance(a, (dict, list)):
                if text(a) != text(b):
                    return False
                continue
            if len(a) != len(b):
                return False
            for key in ka | kb:
                if isinstance(a, dict):
                    ra, rb = a.get(key, _MISSING), b.get(key, _MISSING)
                else:
                    ra = a[key] if key < len(a) else _MISSING
                    rb = b[key] if key < len(b) else _MISSING
                if ra is rb:
                    continue
                if ra is _MISSING or rb is _MISSING or text(ra) != text(rb):
                    return False
        return True

    def to_dict(self) -> dict[str, Any]:
        """The canonical DB as a fresh plain dict (a deep copy; safe to mutate)."""
        return clone(self.data)

    def is_shared(self, coll: str, key: Any) -> bool:
        """True when the record is still the base object (not copied by this episode)."""
        base = self._base.data.get(coll)
        if base is None:
            return False
        try:
            return self.data[coll][key] is base[key]
        except (KeyError, IndexError, TypeError):
            return False

