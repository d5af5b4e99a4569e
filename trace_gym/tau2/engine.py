"""τ²-bench tool engine: per-episode databases, tool dispatch and tau2's result texts.

How a domain plugs in
=====================

A domain is a module ``trace_gym/tau2/domains/<name>.py`` that defines a
module-level ``DOMAIN = DomainSpec(...)``; :func:`trace_gym.tau2.domains.get_domain_spec`
imports it on first use.  The module provides:

* one :class:`Toolkit` subclass for the agent side and optionally one for the user
  side.  **Name the class as tau2 names its toolkit** (``AirlineTools``,
  ``MockUserTools``, ``TelecomTools`` ...): tools are plain Python methods called with
  ``**arguments``, so CPython's own ``TypeError`` texts for missing/unexpected
  arguments (``AirlineTools.get_user_details() missing 1 required positional
  argument: 'user_id'``) come out exactly as in tau2.  Mark each tool with
  ``@tool("read"|"write"|"generic"|"think")``.  Any other public method is an
  "env function" usable by ``initialization_actions`` / env assertions.
* a normaliser ``normalise_db(raw) -> dict`` turning the parsed data file (JSON or
  TOML) into the canonical plain-JSON dict (README §5: pydantic defaults filled in,
  keys in model field order), and the same for the user DB if any.
* optionally ``tau2_view(collection, record)`` (values as tau2's ``default=str``
  renders them, e.g. telecom datetimes with a space) and ``sync(env)`` (tau2's
  ``sync_tools``, run after every successful call).

Inside a tool, ``self.db`` is a :class:`DbState`:

* read with ``self.db.users`` (attribute access; a missing top-level key raises
  tau2's ``'<Model>' object has no attribute '<name>'``) or ``self.db["users"]``.
  **Never mutate what you read.**
* to change a record, first take a private copy: ``rec = self.db.own("users", uid)``
  (``own("device")`` for a top-level value that is not a collection); add with
  ``self.db.put(coll, key, rec)``, delete with ``self.db.remove(coll, key)``.
* return a ``str`` (sent verbatim), :class:`Model` / list of ``Model`` (a pydantic
  model in tau2: rendered with numbers kept), or plain dict/list/number/date values
  (tau2's ``to_json_str`` stringifies bare numbers/bools).
* raise any exception to make the call fail with ``Error: <str(exc)>``; for pydantic
  constructor failures raise :class:`trace_gym.tau2.validation.ValidationError`.

State model
===========

A :class:`DomainData` (cached per domain and data folder) holds the immutable base
DBs.  A :class:`DbState` starts as a view on the base and copies only what a write
touches: a top-level collection container on its first change, a record on its
first ``own``.  Every tool call is a transaction: if the tool raises, the records it
touched are restored, so a failed call never changes state (tau2 itself never
changes state on the error paths its corpus exercises).  Call arguments are deep-copied
before dispatch, so the state never shares objects with the caller.

``DbState.version`` (and ``Tau2Environment.state_version``) changes on every
committed change and is restored by a rollback, so two equal versions mean the same
state.  Hashes are computed from cached per-record serialisations (see
:mod:`trace_gym.tau2.hashing`) and memoised per version: hashing an unchanged state
is free, and a changed 7 MB airline state costs one join plus one sha256.  Likewise the
result text of a tool that returns an unchanged base record (or a list of them) is
serialised once per base database and reused (:meth:`BaseDb.model_text`).

Deliberate divergence from tau2: a failed call is rolled back even where tau2 would
keep a partial change, and airline ``cancel_reservation`` refuses once a repeated
cancellation would double the payment history past 4096 entries.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from trace_gym.core.tools import ToolResult

from .hashing import SerialCache, View, join_object, sha256_of

__all__ = [
    "DbState",
    "DomainData",
    "DomainSpec",
    "Model",
    "Tau2Environment",
    "Toolkit",
    "ToolResult",
    "clone",
    "corpus_uuid_source",
    "load_domain",
    "to_json_str",
    "tool",
]

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


class Model:
    """A tool result that tau2 returns as a pydantic model: rendered as its dict, numbers kept."""

    __slots__ = ("data",)

    def __init__(self, data: Any):
        self.data = data

    def __repr__(self) -> str:
        return f"Model({self.data!r})"


def _process(value: Any) -> Any:
    if isinstance(value, Model):
        return value.data
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, list):
        return [_process(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_process(v) for v in value)
    if isinstance(value, dict):
        return {k: _process(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise ValueError(f"Unsupported type: {type(value)}")


def to_json_str(value: Any) -> str:
    """tau2's ``Environment.to_json_str``: strings verbatim, everything else JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(_process(value), default=str)


# --------------------------------------------------------------------------- toolkits

_TOOL_KIND_ATTR = "__tau2_tool_kind__"
_KINDS = ("read", "write", "generic", "think")


def tool(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a toolkit method as a tool of the given kind (``write`` tools mutate state)."""
    if kind not in _KINDS:
        raise ValueError(f"tool kind must be one of {_KINDS}, got {kind!r}")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _TOOL_KIND_ATTR, kind)
        return fn

    return mark


class Toolkit:
    """Base class of a domain's tool collection (one instance per episode and side)."""

    TOOL_KINDS: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kinds: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                kind = getattr(member, _TOOL_KIND_ATTR, None)
                if kind is not None:
                    kinds[name] = kind
        cls.TOOL_KINDS = kinds

    def __init__(self, env: Tau2Environment, db: DbState):
        self.env = env
        self.db = db

    @classmethod
    def has_tool(cls, name: str) -> bool:
        return name in cls.TOOL_KINDS

    def env_function(self, name: str) -> Callable[..., Any]:
        """A public method by name (tools and helpers), as tau2's ``getattr(toolkit, name)``."""
        if not isinstance(name, str) or name.startswith("_") or name in ("env", "db", "env_function", "has_tool"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        fn = getattr(self, name)  # raises AttributeError with CPython's wording
        if not callable(fn):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        return fn


# --------------------------------------------------------------------------- domains


@dataclass(frozen=True)
class DomainSpec:
    """What the engine needs to know about one domain (see module docstring)."""

    name: str
    tools_cls: type[Toolkit]
    db_model: str
    db_file: str
    normalise_db: Callable[[Any], dict[str, Any]]
    user_tools_cls: type[Toolkit] | None = None
    user_db_model: str | None = None
    user_db_file: str | None = None
    normalise_user_db: Callable[[Any], dict[str, Any]] | None = None
    tau2_view: View | None = None
    user_tau2_view: View | None = None
    sync: Callable[[Tau2Environment], None] | None = None
    solo_error: str | None = None
    """``None``: solo mode supported; else the ``ValueError`` text tau2 raises."""


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
        self._txn_owned = set()
        self._txn_version = self.version

    def commit(self) -> None:
        self._journal = None
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


# --------------------------------------------------------------------------- domain data


@dataclass
class DomainData:
    """Immutable data of one domain: base DBs, tool schemas/kinds, policy texts."""

    spec: DomainSpec
    directory: Path
    db: BaseDb
    user_db: BaseDb | None
    tools: list[dict[str, Any]]
    user_tools: list[dict[str, Any]]
    _kinds: dict[str, str] = field(default_factory=dict, repr=False)
    _user_kinds: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._kinds = {t["name"]: t["tool_type"] for t in self.tools}
        self._user_kinds = {t["name"]: t["tool_type"] for t in self.user_tools}

    @property
    def name(self) -> str:
        return self.spec.name

    def base_from(self, data: dict[str, Any], user: bool = False) -> BaseDb:
        """A new base DB from canonical data (used by ``initialization_data``)."""
        if user:
            assert self.spec.user_db_model is not None
            return BaseDb(data, self.spec.user_db_model, self.spec.user_tau2_view)
        return BaseDb(data, self.spec.db_model, self.spec.tau2_view)


_DOMAIN_CACHE: dict[tuple[str, str], DomainData] = {}
_LOOKUP_CACHE: dict[tuple[str, str | None, str | None], DomainData] = {}


def load_domain(name: str, data_dir: str | Path | None = None) -> DomainData:
    """The cached :class:`DomainData` of ``name`` (``data_dir``: the folder holding ``tau2/domains``)."""
    import os

    lookup = (name, None if data_dir is None else str(data_dir), os.environ.get("TAU2_DATA_DIR"))
    hit = _LOOKUP_CACHE.get(lookup)
    if hit is not None:
        return hit
    data = _load_domain(name, data_dir)
    _LOOKUP_CACHE[lookup] = data
    return data


def _load_domain(name: str, data_dir: str | Path | None) -> DomainData:
    from .data import domain_dir, read_db_file, read_tools_json
    from .domains import get_domain_spec

    spec = get_domain_spec(name)
    folder = domain_dir(name, data_dir)
    key = (name, str(folder))
    cached = _DOMAIN_CACHE.get(key)
    if cached is not None:
        return cached
    db = BaseDb(spec.normalise_db(read_db_file(folder / spec.db_file)), spec.db_model, spec.tau2_view)
    user_db = None
    if spec.user_db_file is not None:
        assert spec.normalise_user_db is not None and spec.user_db_model is not None
        raw = read_db_file(folder / spec.user_db_file)
        user_db = BaseDb(spec.normalise_user_db(raw), spec.user_db_model, spec.user_tau2_view)
    tools = read_tools_json(folder / "tools.json")
    user_tools = read_tools_json(folder / "user_tools.json") if (folder / "user_tools.json").is_file() else []
    data = DomainData(spec, folder, db, user_db, tools, user_tools)
    _check_toolkit(spec.tools_cls, tools, folder / "tools.json")
    if spec.user_tools_cls is not None:
        _check_toolkit(spec.user_tools_cls, user_tools, folder / "user_tools.json")
    _DOMAIN_CACHE[key] = data
    return data


def _check_toolkit(cls: type[Toolkit], schemas: list[dict[str, Any]], path: Path) -> None:
    declared = {t["name"]: t["tool_type"] for t in schemas}
    if declared != cls.TOOL_KINDS:
        raise ValueError(
            f"{path}: tools {declared} do not match the implementation {cls.__name__} {cls.TOOL_KINDS}"
        )


# --------------------------------------------------------------------------- ids


def corpus_uuid_source() -> Callable[[], str]:
    """The deterministic uuid4 replacement the conformance corpus used: n-th call ->
    ``sha256(f"tau2-corpus-uuid4:{n}")`` hex (32 digits), per environment."""
    counter = iter(range(1 << 62))

    def next_hex() -> str:
        return hashlib.sha256(f"tau2-corpus-uuid4:{next(counter)}".encode()).hexdigest()[:32]

    return next_hex


# --------------------------------------------------------------------------- environment


class Tau2Environment:
    """One episode's τ²-bench environment: tau2's ``Environment`` semantics on our state model.

    Construction is cheap (domain data is cached; no DB copy), so build a fresh one
    per episode.
    """

    def __init__(
        self,
        domain: str | DomainData,
        *,
        solo_mode: bool = False,
        data_dir: str | Path | None = None,
        uuid_source: Callable[[], str] | None = None,
        db: dict[str, Any] | None = None,
    ):
        """``db`` replaces the domain's database for this environment (same layout as the data
        file; e.g. a synthetic database); it is normalised like the data file."""
        self.data = domain if isinstance(domain, DomainData) else load_domain(domain, data_dir)
        self.spec = self.data.spec
        if solo_mode and self.spec.solo_error is not None:
            raise ValueError(self.spec.solo_error)
        self.solo_mode = solo_mode
        self.new_uuid_hex: Callable[[], str] = uuid_source or corpus_uuid_source()
        self.db = DbState(self.data.db if db is None else self.data.base_from(self.spec.normalise_db(db)))
        self.user_db: DbState | None = DbState(self.data.user_db) if self.data.user_db is not None else None
        self.tools = self.spec.tools_cls(self, self.db)
        self.user_tools: Toolkit | None = (
            self.spec.user_tools_cls(self, self.user_db)  # type: ignore[arg-type]
            if self.spec.user_tools_cls is not None and self.user_db is not None
            else None
        )
        if solo_mode and self.user_tools is not None:
            overlap = set(self.tools.TOOL_KINDS) & set(self.user_tools.TOOL_KINDS)
            if overlap:
                raise ValueError(f"Tool names overlap: {overlap}")
        self.sync_tools()

    # ---- schemas and kinds
    @property
    def domain(self) -> str:
        return self.spec.name

    def agent_tool_schemas(self) -> list[dict[str, Any]]:
        """The agent tools' ``openai_schema`` exactly as in tools.json, in order."""
        return [t["openai_schema"] for t in self.data.tools]

    def user_tool_schemas(self) -> list[dict[str, Any]]:
        """The user tools' ``openai_schema`` exactly as in user_tools.json, in order."""
        return [t["openai_schema"] for t in self.data.user_tools]

    def has_tool(self, name: str) -> bool:
        return name in self.data._kinds or name in self.data._user_kinds

    def tool_kind(self, name: str) -> str | None:
        """``read|write|generic|think`` for a known tool, else ``None``."""
        kind = self.data._kinds.get(name)
        return kind if kind is not None else self.data._user_kinds.get(name)

    def mutates_state(self, name: str) -> bool:
        """Whether replay re-executes the tool (tau2 assumes True for unknown names)."""
        kind = self.tool_kind(name)
        return True if kind is None else kind == "write"

    # ---- calls
    def _dispatch(self, name: str, requestor: str, arguments: dict[str, Any]) -> Any:
        if requestor == "user":
            if self.solo_mode:
                raise ValueError("User tool calls are not allowed in solo mode")
            return self._use(self.user_tools, name, arguments, user=True)
        if requestor == "assistant":
            if self.solo_mode and self.user_tools is not None and self.user_tools.has_tool(name):
                return self._use(self.user_tools, name, arguments, user=True)
            return self._use(self.tools, name, arguments, user=False)
        raise ValueError(f"Invalid requestor: {requestor}")

    def _use(self, kit: Toolkit | None, name: str, arguments: dict[str, Any], user: bool) -> Any:
        if kit is None:
            raise ValueError("User tools not available" if user else "Tools not available")
        if not kit.has_tool(name):
            raise ValueError(f"Tool '{name}' not found.")
        return getattr(kit, name)(**arguments)

    def _begin(self) -> None:
        self.db.begin()
        if self.user_db is not None and self.user_db is not self.db:
            self.user_db.begin()

    def _commit(self) -> None:
        self.db.commit()
        if self.user_db is not None and self.user_db is not self.db:
            self.user_db.commit()

    def _rollback(self) -> None:
        self.db.rollback()
        if self.user_db is not None and self.user_db is not self.db:
            self.user_db.rollback()

    def make_tool_call(self, name: str, arguments: dict[str, Any] | None = None, requestor: str = "assistant") -> Any:
        """Run a tool and return its raw value; raises on failure (no sync, as in tau2).

        A failing call leaves the state unchanged.
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise TypeError(f"arguments must be a JSON object, got {type(arguments).__name__}")
        arguments = clone(arguments)  # the state must never share objects with the caller's arguments
        self._begin()
        try:
            value = self._dispatch(name, requestor, arguments)
        except BaseException:
            self._rollback()
            raise
        self._commit()
        return value

    def get_response(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        requestor: str = "assistant",
        call_id: str | None = None,
    ) -> ToolResult:
        """tau2's ``get_response``: call, sync, and format (``Error: ...`` on any exception)."""
        try:
            value = self.make_tool_call(name, arguments, requestor)
            self.sync_tools()
        except Exception as exc:  # every failure becomes an error result, as in tau2
            return ToolResult(f"Error: {exc}", True)
        try:
            return ToolResult(self._result_text(value), False)
        except Exception as exc:
            return ToolResult(f"Error: {exc}", True)

    def _result_text(self, value: Any) -> str:
        """``to_json_str(value)``, reusing the cached text of unchanged database records for a
        model or a list of models (the usual results of read tools)."""
        if isinstance(value, Model):
            return self._model_text(value.data)
        if isinstance(value, list) and value and all(isinstance(v, Model) for v in value):
            # json.dumps of a list joins its items' texts with ", "
            return "[" + ", ".join(self._model_text(v.data) for v in value) + "]"
        return to_json_str(value)

    def _model_text(self, data: Any) -> str:
        text = self.db._base.model_text(data)
        if text is None and self.user_db is not None and self.user_db is not self.db:
            text = self.user_db._base.model_text(data)
        return json.dumps(data, default=str) if text is None else text

    def sync_tools(self) -> None:
        if self.spec.sync is not None:
            self.spec.sync(self)

    # ---- env functions / assertions
    def _kit(self, env_type: str) -> Toolkit:
        if env_type == "user":
            kit = self.user_tools
        elif env_type == "assistant":
            kit = self.tools
        else:
            raise ValueError(f"Invalid environment type: {env_type}")
        if kit is None:
            raise AttributeError(f"'NoneType' object has no attribute {env_type!r}")
        return kit

    def run_env_function_call(self, func_name: str, arguments: dict[str, Any] | None = None, env_type: str = "assistant") -> Any:
        """Run a toolkit method by name (tool or helper) and sync, as tau2 does for init actions."""
        fn = self._kit(env_type).env_function(func_name)
        self._begin()
        try:
            res = fn(**(arguments or {}))
        except BaseException:
            self._rollback()
            raise
        self._commit()
        self.sync_tools()
        return res

    def run_env_assertion(
        self, func_name: str, arguments: dict[str, Any] | None = None, env_type: str = "assistant",
        assert_value: bool | None = None,
    ) -> bool:
        """Run an assertion function; returns its bool result, or ``result == assert_value`` when given.

        Exceptions raised by the function propagate (tau2's ``evaluation_error``).
        """
        res = self.run_env_function_call(func_name, arguments, env_type)
        if not isinstance(res, bool):
            raise ValueError(f"Function {func_name} returned {type(res)} instead of bool")
        return res if assert_value is None else res == assert_value

    # ---- state
    def set_state(
        self,
        initialization_data: dict[str, Any] | None = None,
        initialization_actions: Iterable[dict[str, Any]] | None = None,
        message_history: Iterable[dict[str, Any]] | None = None,
        strict: bool = True,
    ) -> None:
        """Apply a task's ``initial_state`` the way tau2's ``Environment.set_state`` does.

        * ``initialization_data``: ``{"agent_data": {...}, "user_data": {...}}`` merged
          (recursively for dicts) into the DBs; as in tau2, the other side's DB then
          becomes the very same object.
        * ``initialization_actions``: ``[{"env_type", "func_name", "arguments"}, ...]``.
        * ``message_history``: messages in tau2 form (``role``, ``tool_calls`` with
          ``id/name/arguments/requestor``, tool messages with ``id`` and ``content``) or
          OpenAI form; only mutating tool calls are replayed, unknown names skipped, and a
          replayed output that differs from the recorded one raises ``ValueError``.
        """
        from .data import merge_update

        if self.solo_mode:
            for m in message_history or ():
                if m.get("role") == "user":
                    raise AssertionError("User messages are not allowed in solo mode")
        if initialization_data:
            agent_data = initialization_data.get("agent_data")
            user_data = initialization_data.get("user_data")
            if agent_data is not None:
                merged = self.spec.normalise_db(merge_update(self.db.to_dict(), agent_data))
                self.db = DbState(self.data.base_from(merged))
                self.tools.db = self.db
                if self.user_tools is not None:
                    self.user_db = self.db
                    self.user_tools.db = self.db
            if user_data is not None:
                if self.user_tools is None or self.user_db is None or self.spec.normalise_user_db is None:
                    raise AttributeError("'NoneType' object has no attribute 'update_db'")
                if self.user_db is self.db:  # already aliased to the agent DB: tau2 revalidates it as that model
                    merged = self.spec.normalise_db(merge_update(self.db.to_dict(), user_data))
                    self.user_db = DbState(self.data.base_from(merged))
                else:
                    merged = self.spec.normalise_user_db(merge_update(self.user_db.to_dict(), user_data))
                    self.user_db = DbState(self.data.base_from(merged, user=True))
                self.user_tools.db = self.user_db
                self.db = self.user_db
                self.tools.db = self.user_db
        for action in initialization_actions or ():
            self.run_env_function_call(action["func_name"], action.get("arguments") or {}, action.get("env_type", "assistant"))
        for call, expected in _tool_pairs(message_history or ()):
            if not self.has_tool(call["name"]) or not self.mutates_state(call["name"]):
                continue
            res = self.get_response(call["name"], call.get("arguments") or {}, call.get("requestor", "assistant"), call.get("id"))
            if strict and _loads(res.content) != _loads(expected.get("content")):
                raise ValueError(
                    f"Tool call:\n{call}\n\nReturned:\n{res.content}\n\nExpected:\n{expected.get('content')}"
                )
        self.sync_tools()

    # ---- inspection
    def hashes(self) -> dict[str, str | None]:
        """``db_hash``, ``user_db_hash`` (tau2's own), and the two canonical sha256s."""
        u = self.user_db
        return {
            "db_hash": self.db.hash("tau2"),
            "user_db_hash": u.hash("tau2") if u is not None else None,
            "db_canonical_sha256": self.db.hash("canonical"),
            "user_db_canonical_sha256": u.hash("canonical") if u is not None else None,
        }

    def get_db_hash(self) -> str:
        return self.db.hash("tau2")

    def get_user_db_hash(self) -> str | None:
        return self.user_db.hash("tau2") if self.user_db is not None else None

    def canonical_db(self) -> dict[str, Any]:
        """The agent DB as canonical plain JSON (a fresh deep copy)."""
        return self.db.to_dict()

    def canonical_user_db(self) -> dict[str, Any] | None:
        return self.user_db.to_dict() if self.user_db is not None else None

    def same_state(self, other: Tau2Environment) -> bool:
        """tau2's ``db_match``: equal agent DB and equal user DB (cheap for states of one base)."""
        if (self.user_db is None) != (other.user_db is None):
            return False
        if not self.db.same_content(other.db):
            return False
        return self.user_db is None or self.user_db.same_content(other.user_db)  # type: ignore[arg-type]

    @property
    def state_version(self) -> tuple[int, int]:
        """Changes whenever either DB changes (cheap state comparison between steps)."""
        return (self.db.version, self.user_db.version if self.user_db is not None else 0)


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _norm_call(tc: dict[str, Any], requestor: str) -> dict[str, Any]:
    if "function" in tc:  # OpenAI form
        fn = tc["function"]
        args = fn.get("arguments")
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        return {"id": tc.get("id"), "name": fn.get("name"), "arguments": args or {}, "requestor": requestor}
    out = dict(tc)
    out.setdefault("requestor", requestor)
    return out


def _tool_pairs(messages: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(tool call, tool message) pairs of a history, checked as tau2 checks them."""
    pending = list(messages)[::-1]
    pairs = []
    while pending:
        msg = pending.pop()
        role = msg.get("role")
        if role == "tool":
            raise ValueError("Tool message not expected. Tool messages should always follow a tool call.")
        calls = msg.get("tool_calls") or []
        if role not in ("assistant", "user") or not calls:
            continue
        for tc in calls:
            call = _norm_call(tc, "user" if role == "user" else "assistant")
            if not pending:
                raise ValueError("Tool message expected. Got None.")
            tm = pending.pop()
            if tm.get("role") != "tool":
                raise ValueError(f"Tool message expected. Got {tm.get('role')}")
            tm_id = tm.get("id", tm.get("tool_call_id"))
            if call.get("id") != tm_id:
                raise ValueError(f"Tool call id mismatch. Got {call.get('id')} and {tm_id}")
            pairs.append((call, tm))
    return pairs
