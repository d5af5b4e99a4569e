"""The worlds capability specs are written over: one :class:`CapabilityDomain` per ``domain:`` value.

A spec's ``domain`` names an entry of :data:`DOMAIN_FACTORIES` (the built-ins) or a plug-in
registered through the ``trace_gym.domains`` entry-point group or the ``TRACE_GYM_DOMAINS``
variable (:mod:`trace_gym.capabilities.plugins`); :func:`get_domain` builds it once.  The spec loader asks the domain which tools exist, which of them write, which tables
slots may draw from and which may be cloned, and lets it check what only it can check; the
environment asks it for the exposed tools, a seeded synthetic database, a backend that runs
calls on that database, and the system prompt.  Generic code never names a domain.

Domains: ``retail`` and ``airline`` (τ²-bench, :class:`Tau2Domain`), ``telecom`` (τ²-bench with
dual control, :class:`TelecomDomain`) and ``toolsandbox``
(:class:`trace_gym.capabilities.ts_domain.ToolSandboxDomain`); plug-ins on top
(:func:`domain_names` lists every name).  A plug-in over a plain dict state can be built with
:class:`trace_gym.capabilities.dict_domain.DictDomain`.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from typing import Any

from .domain_protocol import CapabilityDomain, DomainBackend, DomainToolSet

__all__ = ["CapabilityDomain", "DomainBackend", "DomainToolSet", "Tau2Domain", "TelecomDomain", "DOMAIN_FACTORIES",
           "get_domain", "domain_names", "reset_domains"]


class Tau2Domain:
    """A τ²-bench domain: the benchmark's tools.json and policy, the engine on an injected database."""

    def __init__(self, name: str):
        self.name = name

    def tool_names(self) -> frozenset[str]:
        from .tau2_tools import DOMAIN_GENERIC_TOOLS, GENERIC_TOOLS, READ_TOOLS, WRITE_TOOLS

        return frozenset(READ_TOOLS[self.name] | WRITE_TOOLS[self.name] | DOMAIN_GENERIC_TOOLS.get(self.name, GENERIC_TOOLS))

    def user_tool_names(self) -> frozenset[str]:
        """None: the user of a single-control domain has no tools of their own."""
        return frozenset()

    def write_tools(self) -> frozenset[str]:
        from .tau2_tools import WRITE_TOOLS

        return frozenset(WRITE_TOOLS[self.name])

    def tables(self) -> tuple[str, ...]:
        from .tau2_tools import TABLES

        return TABLES[self.name]

    def clonable(self) -> tuple[str, ...]:
        from .synthdb.clone import CLONABLE

        return CLONABLE[self.name]

    def check_spec(self, doc: dict[str, Any], source: str) -> None:
        """Nothing beyond the spec loader's own checks."""

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
        return EngineBackend(data, data.base_from(db))

    def system_prompt(self) -> str:
        from .domain import domain_policy

        return domain_policy(self.name)


class TelecomDomain(Tau2Domain):
    """τ²-bench's telecom domain, with dual control: the user operates their own phone with tools of
    their own (:mod:`~trace_gym.capabilities.dual_control`), the world holds that device too, and a
    spec's world sizes and cases are checked against what the telecom generator can draw."""

    def __init__(self) -> None:
        super().__init__("telecom")

    def user_tool_names(self) -> frozenset[str]:
        """The tools the user runs on their own device (the benchmark's user_tools.json)."""
        from .tau2_tools import USER_READ_TOOLS, USER_WRITE_TOOLS

        return frozenset(USER_READ_TOOLS[self.name] | USER_WRITE_TOOLS[self.name])

    def check_spec(self, doc: dict[str, Any], source: str) -> None:
        """World sizes within the generator's range, and cases that serve every issue the world can hold."""
        from .dual_control import check_telecom_spec

        check_telecom_spec(doc, source)

    def backend(self, db: dict[str, Any]) -> DomainBackend:
        """The engine on the agent's tables and the user's device (:class:`~trace_gym.capabilities.dual_control.DualControlBackend`)."""
        from ..tau2.domain_spec import load_domain
        from .dual_control import DualControlBackend

        return DualControlBackend(load_domain(self.name), db)


def _toolsandbox() -> CapabilityDomain:
    return importlib.import_module(".ts_domain", __package__).ToolSandboxDomain()


DOMAIN_FACTORIES: dict[str, Callable[[], CapabilityDomain]] = {
    "retail": lambda: Tau2Domain("retail"),
    "airline": lambda: Tau2Domain("airline"),
    "toolsandbox": _toolsandbox,
    "telecom": TelecomDomain,
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
