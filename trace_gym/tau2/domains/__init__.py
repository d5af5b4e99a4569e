"""Registry of τ²-bench domains.

Each domain lives in ``trace_gym/tau2/domains/<name>.py`` and exposes a module-level
``DOMAIN`` (:class:`trace_gym.tau2.engine.DomainSpec`); modules are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trace_gym.tau2.engine import DomainSpec

__all__ = ["DOMAIN_NAMES", "get_domain_spec"]

DOMAIN_NAMES: tuple[str, ...] = ("mock", "airline", "retail", "telecom")

_SPECS: dict[str, DomainSpec] = {}


def get_domain_spec(name: str) -> DomainSpec:
    """The :class:`DomainSpec` of ``name`` (``ValueError`` for an unknown domain)."""
    spec = _SPECS.get(name)
    if spec is not None:
        return spec
    if name not in DOMAIN_NAMES:
        raise ValueError(f"unknown τ²-bench domain {name!r}; known: {', '.join(DOMAIN_NAMES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    spec = getattr(module, "DOMAIN", None)
    if spec is None:
        raise ImportError(f"{module.__name__} does not define DOMAIN")
    _SPECS[name] = spec
    return spec
