"""The adapter registry: the adapters ``adapters/manifest.json`` lists, by name.

The manifest itself (its fields, validation, atomic writes) belongs to :mod:`trace_gym.adapters`.
"""

from __future__ import annotations

from pathlib import Path

from ..adapters import DEFAULT_ADAPTERS_DIR, MANIFEST_NAME, AdapterEntry, load_adapters, manifest_path

__all__ = ["AdapterEntry", "AdapterRegistry"]


class AdapterRegistry:
    """Read-only view of a manifest (a file or an adapters folder); adapter folders are resolved next to
    the manifest when relative.  Raises :class:`FileNotFoundError` without a manifest and
    :class:`trace_gym.adapters.ManifestError` for a malformed one."""

    def __init__(self, manifest: str | Path = f"{DEFAULT_ADAPTERS_DIR}/{MANIFEST_NAME}"):
        self.manifest = manifest_path(manifest)
        self.entries: dict[str, AdapterEntry] = {e.name: e for e in load_adapters(self.manifest)}

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def __getitem__(self, name: str) -> AdapterEntry:
        if name not in self.entries:
            raise KeyError(f"adapter {name!r} is not in {self.manifest}; known: {sorted(self.entries)}")
        return self.entries[name]

    def names(self) -> list[str]:
        return sorted(self.entries)

    def by_capability(self) -> dict[str, str]:
        """Capability (or env id when none) → adapter name."""
        return {(e.capability or e.env_id or e.name): e.name for e in self.entries.values()}
