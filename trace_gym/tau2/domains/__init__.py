"""The τ²-bench domains, one module each (``mock``, ``airline``, ``retail``, ``telecom``).

Each module exposes a module-level ``DOMAIN`` (:class:`trace_gym.tau2.domain_spec.DomainSpec`)
and is imported on first use by :func:`~trace_gym.tau2.domain_spec.get_domain_spec`, which
this package re-exports with :data:`~trace_gym.tau2.domain_spec.DOMAIN_NAMES`.
"""

from __future__ import annotations

from trace_gym.tau2.domain_spec import DOMAIN_NAMES, get_domain_spec

__all__ = ["DOMAIN_NAMES", "get_domain_spec"]
