"""The seam between capability specs and the worlds they are written over.

:class:`CapabilityDomain` is what a domain (built-in or plug-in) implements; :class:`DomainBackend`
runs one episode's calls; :class:`DomainToolSet` is the exposed tools.  The registry that builds
domains by name is :mod:`trace_gym.capabilities.domains`.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

__all__ = ["CapabilityDomain", "DomainBackend", "DomainToolSet", "protocol_methods"]


class DomainBackend(Protocol):
    """Where one episode's tool calls run, on the episode's database.

    Error contract: :meth:`call` never raises for any name or arguments; a failed call is a
    ``ToolResult(error=True)`` and leaves the database unchanged.
    """

    def call(self, name: str, args: dict[str, Any]) -> Any: ...  # a ToolResult
    def initial_db(self) -> dict[str, Any]: ...  # the state the rewards compare against (do not mutate)
    def current_db(self) -> dict[str, Any]: ...  # a fresh copy of the state now
    def state_view(self) -> dict[str, Any]: ...  # the state now, no copy: may share parts with initial_db (read only)
    def fingerprint(self) -> str: ...  # equal iff the state is the same
    def fork(self) -> DomainBackend: ...  # a fresh backend on the same starting database


class DomainToolSet(Protocol):
    """The exposed tools: ``toolset`` (agent-facing schemas), ``kinds`` (name → read/write/generic),
    ``backend`` (set by the environment each episode) and ``validate`` (``None`` or the problem)."""

    toolset: Any
    kinds: dict[str, str]
    backend: Any

    def validate(self, name: str, args: dict[str, Any]) -> str | None: ...


class CapabilityDomain(Protocol):
    """What the spec loader and :class:`~trace_gym.capabilities.env.CapabilityEnv` ask a domain.

    A domain supplies its tools over its own state (:meth:`tools`, run by :meth:`backend`),
    which of them write (:meth:`write_tools`), a seeded synthetic-world generator
    (:meth:`generate`: everything drawn from the ``rng`` it is given, so one seed is one
    world) and the system prompt.  Built-ins and plug-ins implement this same protocol.
    Where the user operates a device of their own (dual control: τ²-bench's telecom),
    :meth:`user_tool_names` names the tools a scripted user's ``do`` rules may call; every
    other domain returns an empty set (:class:`~trace_gym.capabilities.dict_domain.DictDomain`
    does).

    Optional: ``capabilities()`` — the capabilities the domain's own specs train, as
    :class:`~trace_gym.analysis.labels.Capability` items (or mappings) whose ``starter_env``
    is the id of such a spec; ``trace-gym synthesize --domain NAME`` uses those specs as
    templates (see :func:`trace_gym.capabilities.plugins.domain_capabilities`).

    Error contract: :meth:`check_spec` raises :class:`~trace_gym.capabilities.specfile.SpecError`
    (naming the field) for a spec the domain cannot serve and nothing else; :meth:`tools`
    raises ``ValueError`` for unknown tool names; :meth:`tools`, :meth:`backend` and
    :meth:`system_prompt` raise :class:`~trace_gym.data.DataDirError` when the domain's
    data folder is missing; :meth:`generate` is deterministic in its ``rng`` and returns a
    dict holding every table :meth:`tables` names; the backend's ``call`` never raises
    (:class:`DomainBackend`).  A plug-in that breaks this is refused when first built, with
    one line naming it and the problem (:func:`trace_gym.capabilities.plugins.check_domain`).
    """

    name: str

    def tool_names(self) -> frozenset[str]: ...  # every tool a spec may expose
    def write_tools(self) -> frozenset[str]: ...  # the tools that change the world
    def tables(self) -> tuple[str, ...]: ...  # database tables slots may draw from
    def clonable(self) -> tuple[str, ...]: ...  # tables distractors may copy records of
    def check_spec(self, doc: dict[str, Any], source: str) -> None: ...
    def tools(self, names: list[str]) -> DomainToolSet: ...
    def generate(self, rng: random.Random, **sizes: int) -> dict[str, Any]: ...
    def backend(self, db: dict[str, Any]) -> DomainBackend: ...  # db: what generate() drew (the backend may share it)
    def system_prompt(self) -> str: ...
    def user_tool_names(self) -> frozenset[str]: ...  # dual control: the tools the user runs on their own device


def protocol_methods(protocol: type) -> tuple[str, ...]:
    """The methods ``protocol`` declares, in declaration order (its attributes and dunders aside)."""
    return tuple(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_"))
