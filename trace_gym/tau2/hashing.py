"""The two τ²-bench database hashes, computed from plain JSON data.

* ``tau2`` format — tau2's own ``get_db_hash``: ``json.dumps(data, sort_keys=True,
  default=str)`` with the default ``", "`` / ``": "`` separators, then sha256.
* ``canonical`` format — ``json.dumps(data, sort_keys=True, separators=(",", ":"),
  ensure_ascii=True)``, then sha256.

A 7 MB database takes a noticeable time to serialise, so :class:`SerialCache`
keeps the serialised text of every record of an immutable base database.  A
per-episode state that changed only a few records is then hashed by joining the
cached text of untouched records with freshly serialised changed ones; the bytes
fed to sha256 are exactly those ``json.dumps`` would produce for the whole
database (checked by the tests).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any, Literal

__all__ = ["HashFormat", "dumps", "sha256_of", "SerialCache", "canonical_sha256", "tau2_hash"]

HashFormat = Literal["tau2", "canonical"]

_SEP = {"tau2": (", ", ": "), "canonical": (",", ":")}


def dumps(value: Any, fmt: HashFormat) -> str:
    """Serialise ``value`` exactly as the named hash does."""
    if fmt == "tau2":
        return json.dumps(value, sort_keys=True, default=str)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_sha256(value: Any) -> str:
    """``db_canonical_sha256`` of a plain-JSON database (no caching)."""
    return sha256_of(dumps(value, "canonical"))


def tau2_hash(value: Any) -> str:
    """tau2's ``db_hash`` of a database whose tau2 view equals ``value`` (no caching)."""
    return sha256_of(dumps(value, "tau2"))


def join_object(items: Iterable[tuple[str, str]], fmt: HashFormat) -> str:
    """``{"k": v, ...}`` from already-serialised values, keys sorted by the caller."""
    item_sep, kv_sep = _SEP[fmt]
    return "{" + item_sep.join(json.dumps(k) + kv_sep + v for k, v in items) + "}"


def join_array(parts: Iterable[str], fmt: HashFormat) -> str:
    return "[" + _SEP[fmt][0].join(parts) + "]"


View = Callable[[str, Any], Any]
"""``view(collection, record) -> record`` applied before serialising in tau2 format (telecom datetimes)."""


class SerialCache:
    """Serialised text of an immutable base database, per top-level key and per record.

    Top-level values that are dicts or lists are treated as collections of records;
    anything else is serialised whole.  Entries are filled lazily.
    """

    def __init__(self, data: dict[str, Any], fmt: HashFormat, view: View | None = None):
        self.data = data
        self.fmt = fmt
        self.view = view
        self._chunks: dict[str, str] = {}
        self._records: dict[str, dict[Any, str]] = {}
        self._items: dict[str, tuple[list[Any], list[str], dict[Any, int]]] = {}

    def record_text(self, coll: str, record: Any) -> str:
        if self.view is not None and self.fmt == "tau2":
            record = self.view(coll, record)
        return dumps(record, self.fmt)

    def base_record(self, coll: str, key: Any) -> str:
        cache = self._records.get(coll)
        if cache is None:
            cache = self._records[coll] = {}
        text = cache.get(key)
        if text is None:
            text = cache[key] = self.record_text(coll, self.data[coll][key])
        return text

    def collection_text(self, coll: str, value: Any, changed: set[Any] | None) -> str:
        """Serialised text of top-level ``coll`` whose current value is ``value``.

        ``changed`` is the set of record keys that differ from the base (``None``:
        the value is the untouched base value).
        """
        if changed is None:
            text = self._chunks.get(coll)
            if text is None:
                text = self._chunks[coll] = self._build(coll, self.data[coll], set())
            return text
        if not changed and isinstance(value, dict):
            return self.collection_text(coll, None, None)
        return self._build(coll, value, changed)

    def _base_items(self, coll: str) -> tuple[list[Any], list[str], dict[Any, int]]:
        """Sorted keys, serialised ``"key": record`` items and key positions of a base dict collection."""
        got = self._items.get(coll)
        if got is None:
            kv_sep = _SEP[self.fmt][1]
            keys = sorted(self.data[coll])
            items = [json.dumps(k) + kv_sep + self.base_record(coll, k) for k in keys]
            got = self._items[coll] = (keys, items, {k: i for i, k in enumerate(keys)})
        return got

    def _build(self, coll: str, value: Any, changed: set[Any]) -> str:
        base = self.data.get(coll)
        item_sep, kv_sep = _SEP[self.fmt]
        if isinstance(value, dict) and isinstance(base, dict):
            keys, items, pos = self._base_items(coll)
            if not changed:
                return "{" + item_sep.join(items) + "}"
            keys, items = list(keys), list(items)
            removed = []
            added = []
            for k in changed:
                i = pos.get(k)
                if i is None:
                    if k in value:
                        added.append(k)
                elif k in value:
                    items[i] = json.dumps(k) + kv_sep + self.record_text(coll, value[k])
                else:
                    removed.append(i)
            for i in sorted(removed, reverse=True):
                del keys[i]
                del items[i]
            for k in added:
                j = bisect.bisect_left(keys, k)
                keys.insert(j, k)
                items.insert(j, json.dumps(k) + kv_sep + self.record_text(coll, value[k]))
            return "{" + item_sep.join(items) + "}"
        if isinstance(value, list) and isinstance(base, list):
            n_base = len(base)
            return join_array(
                (
                    self.record_text(coll, rec) if (i in changed or i >= n_base) else self.base_record(coll, i)
                    for i, rec in enumerate(value)
                ),
                self.fmt,
            )
        return self.record_text(coll, value)
