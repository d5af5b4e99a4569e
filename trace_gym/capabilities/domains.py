"""The worlds capability specs are written over: one :class:`CapabilityDomain` per ``domain:`` value.

A spec's ``domain`` names an entry of :data:`DOMAIN_FACTORIES` (the built-ins) or a plug-in
registered through the ``trace_gym.domains`` entry-point group or the ``TRACE_GYM_DOMAINS``
variable (:mod:`trace_gym.capabilities.plugins`); :func:`get_domain` builds it once.  The spec loader asks the domain which tools exist, which of them write, which tables
slots may draw from and which may be cloned, and lets it check what only it can check; the
environment asks it for the exposed tools, a seeded synthetic database, a backend that runs
calls on that database, and the system prompt.  Generic code never names a domain.

Domains: ``retail`` and ``airline`` (τ²-bench, :class:`Tau2Domain`) and ``toolsandbox``
(:class:`trace_gym.capabilities.ts_domain.ToolSandboxDomain`); plug-ins on top
(:func:`domain_names` lists every name).  A plug-in over a plain dict state can be built with
:class:`trace_gym.capabilities.dict_domain.DictDomain`.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["CapabilityDomain", "DomainBackend", "DomainToolSet", "Tau2Domain", "DOMAIN_FACTORIES", "get_domain",
           "domain_names", "reset_domains"]


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


class Tau2Domain:
    """A τ²-bench domain: the benchmark's tools.json and policy, the engine on an injected database."""

    def __init__(self, name: str):
        self.name = name

    def tool_names(self) -> frozenset[str]:
        from .spec import DOMAIN_GENERIC_TOOLS, GENERIC_TOOLS, READ_TOOLS, WRITE_TOOLS

        return frozenset(READ_TOOLS[self.name] | WRITE_TOOLS[self.name] | DOMAIN_GENERIC_TOOLS.get(self.name, GENERIC_TOOLS))

    def user_tool_names(self) -> frozenset[str]:
        """The tools the user runs on their own device (dual control; none outside telecom)."""
        from .spec import USER_READ_TOOLS, USER_WRITE_TOOLS

        return frozenset(USER_READ_TOOLS.get(self.name, set()) | USER_WRITE_TOOLS.get(self.name, set()))

    def write_tools(self) -> frozenset[str]:
        from .spec import WRITE_TOOLS

        return frozenset(WRITE_TOOLS[self.name])

    def tables(self) -> tuple[str, ...]:
        from .spec import TABLES

        return TABLES[self.name]

    def clonable(self) -> tuple[str, ...]:
        from .synthdb.clone import CLONABLE

        return CLONABLE[self.name]

    def check_spec(self, doc: dict[str, Any], source: str) -> None:
        if self.name == "telecom":  # world sizes, and cases that serve every issue the world can hold
            from .dual_control import check_telecom_spec

            check_telecom_spec(doc, source)

    def tools(self, names: list[str]) -> DomainToolSet:
        from .domain import DomainTools

        return DomainTools(self.name, names)

    def generate(self, rng: random.Random, **sizes: int) -> dict[str, Any]:
        from .synthdb import GENERATORS

        return GENERATORS[self.name](rng, **sizes)

    def backend(self, db: dict[str, Any]) -> DomainBackend:
        """The engine on ``db``, a database :meth:`generate` drew: it is in the benchmark's canonical
        form already (see :mod:`.synthdb`), so the engine takes it as it is, without a normalised copy."""
        from ..tau2.domain_spec import load_domain
        from .backend import EngineBackend

        data = load_domain(self.name)
        if self.name == "telecom":  # dual control: the world holds the user's device too
            from .dual_control import DualControlBackend

            return DualControlBackend(data, db)
        return EngineBackend(data, data.base_from(db))

    def system_prompt(self) -> str:
        from .domain import domain_policy

        return domain_policy(self.name)


def _toolsandbox() -> CapabilityDomain:
    return importlib.import_module(".ts_domain", __package__).ToolSandboxDomain()


DOMAIN_FACTORIES: dict[str, Callable[[], CapabilityDomain]] = {
    "retail": lambda: Tau2Domain("retail"),
    "airline": lambda: Tau2Domain("airline"),
    "toolsandbox": _toolsandbox,
    "telecom": lambda: Tau2Domain("telecom"),
}


_BUILT: dict[tuple[str, str], CapabilityDomain] = {}  # (name, where it came from) -> the domain, built once


def domain_names() -> list[str]:
    """Every domain a spec may name: the built-ins and the registered plug-ins, sorted (never raises)."""
    from .plugins import plugin_sources

    return sorted(set(DOMAIN_FACTORIES) | {s.name for s in plugin_sources()[0]})


def get_domain(name: str) -> CapabilityDomain:
    """The domain a spec's ``domain:`` names, built once per process.

    Raises ``ValueError`` for an unknown name (the message lists the known ones, and any
    malformed ``TRACE_GYM_DOMAINS`` item) and :class:`~trace_gym.capabilities.plugins.DomainPluginError`
    (a ``ValueError``, one line naming the domain) for a plug-in that cannot be used or a name
    registered twice.
    """
    from . import plugins

    src = plugins.source_for(name, DOMAIN_FACTORIES)
    key = (name, src.target if src is not None else "")
    if key not in _BUILT:
        if src is not None:
            _BUILT[key] = plugins.build_plugin(src)
        else:
            factory = DOMAIN_FACTORIES.get(name)
            if factory is None:
                raise ValueError(f"unknown capability domain {name!r}; expected one of {domain_names()}"
                                 + plugins.unknown_domain_note())
            _BUILT[key] = factory()
    return _BUILT[key]


def reset_domains() -> None:
    """Forget every built domain and the entry points read (for tests and after installing a plug-in)."""
    from .plugins import _entry_point_sources

    _BUILT.clear()
    _entry_point_sources.cache_clear()
