"""Where a capability episode's tool calls run, over an injected synthetic database.

Two interchangeable backends, both with ``call(name, args) -> ToolResult``,
``initial_db()``, ``current_db()`` and ``fork()`` (a fresh backend on the same
starting database, used to dry-run reference solutions):

* :class:`EngineBackend` — the project's τ²-bench engine (:mod:`trace_gym.tau2.engine`)
  with the synthetic database injected, so results and error texts are the benchmark's
  own; preferred whenever that engine is importable.
* :class:`BuiltinBackend` — the small plain-dict implementations in this package
  (:mod:`.retail`, :mod:`.airline`), used when the engine is absent.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from ...core.tools import ToolError, ToolResult
from .airline import AirlineBackend
from .retail import RetailBackend

__all__ = ["AirlineBackend", "RetailBackend", "BACKENDS", "BuiltinBackend", "EngineBackend", "open_backend", "engine_available"]

BACKENDS = {"retail": RetailBackend, "airline": AirlineBackend}

Validator = Callable[[str, dict[str, Any]], "str | None"]


def _render(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class BuiltinBackend:
    """Plain-dict tools; arguments are checked against the tool schemas first."""

    kind = "builtin"

    def __init__(self, domain: str, db: dict[str, Any], validate: Validator, snapshot: bytes | None = None):
        self.domain = domain
        self._validate = validate
        self._snapshot = snapshot if snapshot is not None else pickle.dumps(db, pickle.HIGHEST_PROTOCOL)
        self._impl = BACKENDS[domain](db)

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        problem = self._validate(name, args)
        if problem is not None:
            return ToolResult(f"Error: {name}: {problem}", True)
        fn = getattr(self._impl, name, None)
        if fn is None or name.startswith("_"):
            return ToolResult(f"Error: {name} is not available in the built-in {self.domain} backend", True)
        try:
            return ToolResult(_render(fn(**args)), False)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", True)
        except Exception as exc:  # checks run before changes, so state is intact
            return ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", True)

    def initial_db(self) -> dict[str, Any]:
        return pickle.loads(self._snapshot)

    def current_db(self) -> dict[str, Any]:
        return self._impl.db

    def fingerprint(self) -> str:
        import hashlib
        import json

        return hashlib.sha256(json.dumps(self._impl.db, sort_keys=True).encode()).hexdigest()

    def fork(self) -> BuiltinBackend:
        return BuiltinBackend(self.domain, pickle.loads(self._snapshot), self._validate, self._snapshot)


class EngineBackend:
    """The τ²-bench engine on an injected database (copy-on-write: no copy at reset)."""

    kind = "engine"

    def __init__(self, domain: str, db: dict[str, Any] | None = None, base: Any = None):
        from ...tau2.engine import DbState, Tau2Environment

        self.domain = domain
        self._env = Tau2Environment(domain)
        if base is None:
            base = self._env.data.base_from(self._env.spec.normalise_db(db))
        self._base = base
        self._env.db = DbState(base)
        self._env.tools.db = self._env.db

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        res = self._env.get_response(name, args)
        return ToolResult(res.content, res.error)

    def initial_db(self) -> dict[str, Any]:
        return self._base.data

    def current_db(self) -> dict[str, Any]:
        return self._env.canonical_db()

    def fingerprint(self) -> str:
        return self._env.db.hash("canonical")

    def fork(self) -> EngineBackend:
        return EngineBackend(self.domain, base=self._base)


def engine_available(domain: str) -> bool:
    """Whether the τ²-bench engine can serve ``domain`` (importable and its data found)."""
    try:
        from ...tau2.engine import load_domain

        load_domain(domain)
        return True
    except Exception:
        return False


def open_backend(domain: str, db: dict[str, Any], kind: str, validate: Validator) -> BuiltinBackend | EngineBackend:
    """A backend of ``kind`` (``"engine"`` or ``"builtin"``) over ``db``."""
    if kind == "engine":
        return EngineBackend(domain, db)
    if kind == "builtin":
        return BuiltinBackend(domain, db, validate)
    raise ValueError(f"backend must be 'engine', 'builtin' or 'auto', got {kind!r}")
