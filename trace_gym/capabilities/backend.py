"""Where a capability episode's tool calls run: the τ²-bench engine on an injected database.

:class:`EngineBackend` wraps one :class:`~trace_gym.tau2.engine.Tau2Environment` started on
the episode's synthetic database (injected through the engine's ``db`` argument), so tool
results and error texts are the benchmark's own — the same engine the τ²-bench
conformance suite checks.  There is no other implementation: a missing τ²-bench data
folder is a :class:`~trace_gym.data.DataDirError` naming the path, never a silent
fallback.
"""

from __future__ import annotations

from typing import Any

from ..core.tools import ToolResult
from ..tau2.db import BaseDb
from ..tau2.domain_spec import DomainData
from ..tau2.engine import Tau2Environment

__all__ = ["EngineBackend"]


class EngineBackend:
    """The τ²-bench engine on an injected database (copy-on-write: no copy at reset).

    Args:
        domain: the τ²-bench domain (a name, or its loaded :class:`DomainData`).
        db: the episode's database in the domain's layout (normalised like the data file),
            or a :class:`BaseDb` to share (what :meth:`fork` passes).
    """

    def __init__(self, domain: str | DomainData, db: dict[str, Any] | BaseDb):
        self._env = Tau2Environment(domain, db=db)
        self.domain = self._env.domain

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run one agent tool call; failures are ``ToolResult(error=True)`` with tau2's text."""
        return self._env.get_response(name, args)  # already a ToolResult

    def initial_db(self) -> dict[str, Any]:
        """The database the episode started from (canonical; do not mutate)."""
        return self._env.base.data

    def current_db(self) -> dict[str, Any]:
        """The database now (a fresh canonical copy)."""
        return self._env.canonical_db()

    def state_view(self) -> dict[str, Any]:
        """The database now without a copy (shares the unchanged records with :meth:`initial_db`:
        read it, never change it)."""
        return self._env.db.data

    def fingerprint(self) -> str:
        """A hash of the current database (equal iff the content is the same)."""
        return self._env.db.hash("canonical")

    def fork(self) -> EngineBackend:
        """A fresh backend on the same starting database (used to dry-run reference solutions)."""
        return EngineBackend(self._env.data, self._env.base)
