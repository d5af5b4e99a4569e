"""τ²-bench (tau2 1.0.1) domains as trace-gym environments.

Light on import: the engine and domain modules load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import Tau2Environment

__all__ = ["Tau2Environment", "load_domain"]


def __getattr__(name: str) -> Any:
    if name in ("Tau2Environment", "load_domain"):
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
