"""One place that registers every ``trace/*`` environment id with Gymnasium.

Each entry is one line: id, entry point, one-line description, default kwargs.
``import trace_gym`` calls :func:`register_all`; ``gym.make("trace_gym:trace/...")``
works without a prior import because Gymnasium imports ``trace_gym`` first.

An id names one environment.  Registering an id again from the same source (the
same entry point and kwargs; a spec file by its resolved path) does nothing, so
importing or reloading ``trace_gym`` twice is harmless.  Registering it from another
source raises :class:`DuplicateEnvError` naming both, so a spec in a user's folder can
never silently shadow a starter (or be shadowed by it).  ``replace=True`` lets a
program re-register an id it registered itself (e.g. a spec synthesized again into a
new folder); an id registered by ``import trace_gym`` is never replaced.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

__all__ = ["EnvEntry", "ENTRIES", "DuplicateEnvError", "register_all", "list_envs", "add_entry", "source_of", "env_records",
           "make_env_factory"]


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    family: str = ""  # which kind of environment: "tau2", "toolsandbox", "capability", ...
    domain: str = ""  # the tool domain its tasks are played in ("retail", "toolsandbox", ...)

    @property
    def source(self) -> str:
        """Where the environment comes from: its spec file, else its entry point."""
        return _source(self.entry_point, self.kwargs)


class DuplicateEnvError(ValueError):
    """An env id is already registered from another source; ``existing`` and ``new`` name both."""

    def __init__(self, env_id: str, existing: str, new: str):
        self.env_id, self.existing, self.new = env_id, existing, new
        super().__init__(
            f"{env_id} is already registered from {existing}; refusing to register it again from {new}. "
            "Give one of them another id (for a spec: its file name and its 'id' field)"
        )


ENTRIES: list[EnvEntry] = []
_BUILTIN: set[str] = set()  # ids registered by register_all(): never replaced


def _norm_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    spec = out.get("spec")
    if isinstance(spec, (str, Path)):
        try:
            out["spec"] = str(Path(spec).expanduser().resolve())
        except (OSError, RuntimeError):  # an unresolvable path compares as written
            out["spec"] = str(spec)
    return out


def _entry_point_name(entry_point: Any) -> str:
    if isinstance(entry_point, str):
        return entry_point
    module, name = getattr(entry_point, "__module__", None), getattr(entry_point, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(entry_point)


def _source(entry_point: Any, kwargs: dict[str, Any] | None) -> str:
    spec = (kwargs or {}).get("spec")
    if isinstance(spec, (str, Path)):
        return f"spec file {_norm_kwargs({'spec': spec})['spec']}"
    return f"entry point {_entry_point_name(entry_point)}"


def source_of(env_id: str) -> str | None:
    """Where a registered id comes from (its spec file, else its entry point), or None when unregistered."""
    spec = gym.registry.get(env_id)
    return None if spec is None else _source(spec.entry_point, spec.kwargs)


def _same_source(spec: Any, entry: EnvEntry) -> bool:
    return (_entry_point_name(spec.entry_point) == entry.entry_point
            and _norm_kwargs(spec.kwargs or {}) == _norm_kwargs(entry.kwargs))


def add_entry(entry: EnvEntry, *, replace: bool = False) -> None:
    """Register one env id.

    Idempotent for the same source; raises :class:`DuplicateEnvError` when the id is
    registered from another source, unless ``replace`` is set and the id is not one
    that ``import trace_gym`` registered.
    """
    existing = gym.registry.get(entry.id)
    if existing is not None:
        if _same_source(existing, entry):
            if all(e.id != entry.id for e in ENTRIES):
                ENTRIES.append(entry)
            return
        if not replace or entry.id in _BUILTIN:
            raise DuplicateEnvError(entry.id, _source(existing.entry_point, existing.kwargs), entry.source)
        del gym.registry[entry.id]
    gym.register(id=entry.id, entry_point=entry.entry_point, kwargs=dict(entry.kwargs), disable_env_checker=False)
    ENTRIES[:] = [e for e in ENTRIES if e.id != entry.id] + [entry]


def _builtin_entries() -> list[EnvEntry]:
    entries: list[EnvEntry] = []
    # Each module contributes its own ``ENV_ENTRIES`` list; importing them is cheap (no data is loaded).
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
    """Register every built-in id (the benchmarks, the starter specs, ``TRACE_GYM_ENVS_DIR``); idempotent."""
    for e in _builtin_entries():
        add_entry(e)
        _BUILTIN.add(e.id)


def list_envs() -> list[tuple[str, str]]:
    """``(env id, one-line description)`` for every registered ``trace/*`` environment."""
    register_all()
    return sorted((e.id, e.description) for e in ENTRIES)


def env_records() -> list[dict[str, str]]:
    """``{id, family, domain, title, description}`` (title and description are the same line) for every registered
    ``trace/*`` id, sorted by id.

    Family and domain are what each id's registry entry declares (its family's entries
    module, or the spec file's ``domain`` for a capability env), never read off the id.
    """
    list_envs()  # registers everything
    return [{"id": e.id, "family": e.family, "domain": e.domain, "title": e.description, "description": e.description}
            for e in sorted(ENTRIES, key=lambda e: e.id)]


def make_env_factory(env_id: str, env_kwargs: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A factory for fresh instances of the registered env ``env_id`` with ``env_kwargs`` (Gymnasium's env
    checker off: trainers and integrations call it once per episode slot).  An unknown id raises
    Gymnasium's error at once, not at the first call.  (The ``trace/*`` ids are registered: importing
    this module imports ``trace_gym``, which registers them.)"""
    kwargs = dict(env_kwargs or {})
    gym.spec(env_id)

    def factory() -> Any:
        return gym.make(env_id, disable_env_checker=True, **kwargs)

    return factory
