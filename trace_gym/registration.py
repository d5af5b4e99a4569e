"""One place that registers every ``trace/*`` environment id with Gymnasium.

Each entry is one line: id, entry point, one-line description, default kwargs.
``import trace_gym`` calls :func:`register_all`; ``gym.make("trace_gym:trace/...")``
works without a prior import because Gymnasium imports ``trace_gym`` first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

__all__ = ["EnvEntry", "ENTRIES", "register_all", "list_envs", "add_entry"]


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)


ENTRIES: list[EnvEntry] = []


def add_entry(entry: EnvEntry) -> None:
    """Register one env id (idempotent for the same entry)."""
    if entry.id in gym.registry:
        return
    gym.register(id=entry.id, entry_point=entry.entry_point, kwargs=dict(entry.kwargs), disable_env_checker=False)
    if all(e.id != entry.id for e in ENTRIES):
        ENTRIES.append(entry)


def _builtin_entries() -> list[EnvEntry]:
    entries: list[EnvEntry] = []
    # Each module contributes its own ``ENV_ENTRIES`` list; importing them is cheap (no data is loaded).
    import importlib

    for mod in _ENTRY_MODULES:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # a module not yet present in this build
            if exc.name and mod.startswith(exc.name):
                continue
            raise
        entries.extend(getattr(m, "ENV_ENTRIES", []))
    return entries


# Modules that define ENV_ENTRIES. Add one line per family of environments.
_ENTRY_MODULES: list[str] = [
    "trace_gym.tau2.entries",
    "trace_gym.toolsandbox.entries",
    "trace_gym.capabilities.entries",
]


def register_all() -> None:
    for e in _builtin_entries():
        add_entry(e)


def list_envs() -> list[tuple[str, str]]:
    """``(env id, one-line description)`` for every registered ``trace/*`` environment."""
    register_all()
    return sorted((e.id, e.description) for e in ENTRIES)
