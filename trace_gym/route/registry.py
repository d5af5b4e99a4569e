"""The adapter registry: what ``adapters/manifest.json`` says each trained adapter is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AdapterEntry", "AdapterRegistry"]


@dataclass(frozen=True)
class AdapterEntry:
    name: str
    path: Path
    capability: str | None
    env_id: str | None
    base_model: str | None
    raw: dict[str, Any]


class AdapterRegistry:
    """Read-only view of a manifest; adapter folders are resolved next to the manifest when relative."""

    def __init__(self, manifest: str | Path = "adapters/manifest.json"):
        self.manifest = Path(manifest)
        if self.manifest.is_dir():
            self.manifest = self.manifest / "manifest.json"
        if not self.manifest.exists():
            raise FileNotFoundError(f"no adapter manifest at {self.manifest}; train one with `trace-gym train --out adapters/NAME`")
        try:
            data = json.loads(self.manifest.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{self.manifest}: not valid JSON ({exc})") from None
        self.entries: dict[str, AdapterEntry] = {}
        for e in data.get("adapters", []):
            p = Path(e["path"])
            if not p.is_absolute() and not p.exists():
                p = self.manifest.parent / p.name
            name = e.get("name") or p.name
            self.entries[name] = AdapterEntry(name, p, e.get("capability"), e.get("env_id"), e.get("base_model"), e)

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
