"""The checksum manifests shipped with trace-gym (``checksums/<benchmark>.json``) and verification against them.

A manifest lists every file of a benchmark's data folder with its sha256, size, whether the engine
needs it (``required``) and where it comes from upstream.  ``files_under`` says where the listed paths
start inside a data root (``"tau2"`` for τ²-bench's ``<root>/tau2/``; ``""`` for ToolSandbox).
Written by ``scripts/make_data_manifests.py``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from .files import DataFetchError, sha256_path

__all__ = ["BENCHMARKS", "load_manifest", "files_root", "verify_folder", "packaged_files"]

BENCHMARKS = ("tau2", "toolsandbox")


def load_manifest(benchmark: str) -> dict[str, Any]:
    """The shipped checksum manifest of ``benchmark`` (``tau2`` or ``toolsandbox``)."""
    if benchmark not in BENCHMARKS:
        raise DataFetchError(f"unknown benchmark {benchmark!r}: use one of {', '.join(BENCHMARKS)}")
    text = resources.files("trace_gym.data").joinpath("checksums", f"{benchmark}.json").read_text(encoding="utf-8")
    return json.loads(text)


def files_root(manifest: dict[str, Any], root: Path) -> Path:
    """Where the manifest's relative paths start inside data root ``root``."""
    return root / manifest["files_under"] if manifest["files_under"] else root


def packaged_files(manifest: dict[str, Any]) -> list[str]:
    """The files trace-gym ships inside the package: what the engine reads, and the upstream LICENSE."""
    return sorted(rel for rel, e in manifest["files"].items() if e["required"] or rel == "LICENSE")


def verify_folder(benchmark: str, root: Path, manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compare every manifest file under data root ``root``: ``{"ok": [...], "missing": [...],
    "mismatch": [...], "missing_required": [...], "complete": bool}`` (complete: every required
    file present and every present file matching)."""
    manifest = manifest or load_manifest(benchmark)
    base = files_root(manifest, root)
    ok, missing, mismatch = [], [], []
    for rel, entry in manifest["files"].items():
        path = base / rel
        if not path.is_file():
            missing.append(rel)
        elif path.stat().st_size != entry["size"] or sha256_path(path) != entry["sha256"]:
            mismatch.append(rel)
        else:
            ok.append(rel)
    missing_required = [r for r in missing if manifest["files"][r]["required"]]
    return {"ok": ok, "missing": missing, "mismatch": mismatch, "missing_required": missing_required,
            "complete": not mismatch and not missing_required}
