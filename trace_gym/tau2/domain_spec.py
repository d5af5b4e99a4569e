"""τ²-bench domains: what a domain declares (:class:`DomainSpec`), its loaded data
(:class:`DomainData`), and the registry that finds both.

How a domain plugs in
=====================

A domain is a module ``trace_gym/tau2/domains/<name>.py`` (listed in
:data:`DOMAIN_NAMES`) that defines a module-level ``DOMAIN = DomainSpec(...)``;
:func:`get_domain_spec` imports it on first use.  The module provides:

* one :class:`~trace_gym.tau2.toolkit.Toolkit` subclass for the agent side and
  optionally one for the user side.  **Name the class as tau2 names its toolkit**
  (``AirlineTools``, ``MockUserTools``, ``TelecomTools`` ...): tools are plain Python
  methods called with ``**arguments``, so CPython's own ``TypeError`` texts for
  missing/unexpected arguments (``AirlineTools.get_user_details() missing 1 required
  positional argument: 'user_id'``) come out exactly as in tau2.  Mark each tool with
  ``@tool("read"|"write"|"generic"|"think")``.  Any other public method is an
  "env function" usable by ``initialization_actions`` / env assertions.
* a normaliser ``normalise_db(raw) -> dict`` turning the parsed data file (JSON or
  TOML) into the canonical plain-JSON dict (pydantic defaults filled in, keys in model
  field order), and the same for the user DB if any.
* optionally ``tau2_view(collection, record)`` (values as tau2's ``default=str``
  renders them, e.g. telecom datetimes with a space) and ``sync(env)`` (tau2's
  ``sync_tools``, run after every successful call).

Inside a tool, ``self.db`` is a :class:`~trace_gym.tau2.db.DbState`:

* read with ``self.db.users`` (attribute access; a missing top-level key raises
  tau2's ``'<Model>' object has no attribute '<name>'``) or ``self.db["users"]``.
  **Never mutate what you read.**
* to change a record, first take a private copy: ``rec = self.db.own("users", uid)``
  (``own("device")`` for a top-level value that is not a collection); add with
  ``self.db.put(coll, key, rec)``, delete with ``self.db.remove(coll, key)``.
* return a ``str`` (sent verbatim), :class:`~trace_gym.tau2.toolkit.Model` / list of
  ``Model`` (a pydantic model in tau2: rendered with numbers kept), or plain
  dict/list/number/date values (tau2's ``to_json_str`` stringifies bare numbers/bools).
* raise any exception to make the call fail with ``Error: <str(exc)>``; for pydantic
  constructor failures raise :class:`trace_gym.tau2.validation.ValidationError`.

:func:`load_domain` reads a domain's files once per data folder and checks that the
toolkits implement exactly the tools its ``tools.json`` / ``user_tools.json`` declare.
A missing data folder or file raises :class:`~trace_gym.data.DataDirError` naming
the path.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import DOMAINS, domain_dir, read_db_file, read_tools_json
from .db import BaseDb
from .hashing import View
from .toolkit import Toolkit

__all__ = ["DOMAIN_NAMES", "DomainData", "DomainSpec", "get_domain_spec", "load_domain"]

DOMAIN_NAMES: tuple[str, ...] = DOMAINS


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
    sync: Callable[[Any], None] | None = None
    """Called with the episode's :class:`~trace_gym.tau2.engine.Tau2Environment` after every successful call
    that changed a database.  It must read only the databases and leave them synced: run twice in a row,
    the second run changes nothing (the engine skips it)."""
    solo_error: str | None = None
    """``None``: solo mode supported; else the ``ValueError`` text tau2 raises."""


def get_domain_spec(name: str) -> DomainSpec:
    """The :class:`DomainSpec` of ``name`` (``ValueError`` for an unknown domain)."""
    spec = _SPECS.get(name)
    if spec is not None:
        return spec
    if name not in DOMAIN_NAMES:
        raise ValueError(f"unknown τ²-bench domain {name!r}; known: {', '.join(DOMAIN_NAMES)}")
    module = importlib.import_module(f"trace_gym.tau2.domains.{name}")
    spec = getattr(module, "DOMAIN", None)
    if spec is None:
        raise ImportError(f"{module.__name__} does not define DOMAIN")
    _SPECS[name] = spec
    return spec


_SPECS: dict[str, DomainSpec] = {}


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

    def tool_kind(self, name: str) -> str | None:
        """``read|write|generic|think`` for an agent or user tool of this domain, else ``None``."""
        kind = self._kinds.get(name)
        return kind if kind is not None else self._user_kinds.get(name)

    def base_from(self, data: dict[str, Any], user: bool = False) -> BaseDb:
        """A new base DB from canonical data (used by ``initialization_data``)."""
        if user:
            assert self.spec.user_db_model is not None
            return BaseDb(data, self.spec.user_db_model, self.spec.user_tau2_view)
        return BaseDb(data, self.spec.db_model, self.spec.tau2_view)


_DOMAIN_CACHE: dict[tuple[str, str], DomainData] = {}
_LOOKUP_CACHE: dict[tuple[str, str | None, str | None], DomainData] = {}


def load_domain(name: str, data_dir: str | Path | None = None) -> DomainData:
    """The cached :class:`DomainData` of ``name`` (``data_dir``: the folder holding ``tau2/domains``).

    Raises ``ValueError`` for an unknown domain and :class:`~trace_gym.data.DataDirError`
    when the data folder or one of its files is missing.
    """
    lookup = (name, None if data_dir is None else str(data_dir), os.environ.get("TAU2_DATA_DIR"))
    hit = _LOOKUP_CACHE.get(lookup)
    if hit is not None:
        return hit
    data = _load_domain(name, data_dir)
    _LOOKUP_CACHE[lookup] = data
    return data


def _load_domain(name: str, data_dir: str | Path | None) -> DomainData:
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

