"""``trace-gym data status``: which copy of each benchmark's data the engines read, and how it verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .fetch import exporter
from .files import read_marker, sha256_path
from .locations import FETCH_HINT, HOW, locate, packaged_root
from .manifest import files_root, load_manifest, packaged_files, verify_folder

__all__ = ["status", "describe", "same_as_packaged"]


def same_as_packaged(benchmark: str, root: Path) -> dict[str, list[str]]:
    """Compare the packaged files with the copy at data root ``root``, byte for byte:
    ``{"identical": [...], "different": [...], "absent": [...]}`` (paths as in the manifest)."""
    manifest = load_manifest(benchmark)
    here = files_root(manifest, root)
    packaged = packaged_root() / benchmark
    out: dict[str, list[str]] = {"identical": [], "different": [], "absent": []}
    for rel in packaged_files(manifest):
        mine, theirs = here / rel, packaged / rel
        if not mine.is_file():
            out["absent"].append(rel)
        elif mine.stat().st_size == theirs.stat().st_size and sha256_path(mine) == sha256_path(theirs):
            out["identical"].append(rel)
        else:
            out["different"].append(rel)
    return out


def status(benchmark: str) -> dict[str, Any]:
    """Where ``benchmark``'s data is, its version and how it compares with the shipped checksums."""
    manifest = load_manifest(benchmark)
    found, tried = locate(benchmark)
    doc: dict[str, Any] = {"benchmark": benchmark, "name": manifest["name"], "expected_version": manifest["version"],
                           "files_in_manifest": len(manifest["files"]), "found": found is not None}
    if found is None:
        doc.update(path=None, how=None, looked_in=tried, version=None)
        return doc
    check = verify_folder(benchmark, found.path, manifest)
    marker = read_marker(found.path)
    if check["ok"] and not check["mismatch"]:
        version = manifest["version"]
    elif check["mismatch"]:
        version = f"unknown ({len(check['mismatch'])} file(s) differ from {manifest['version']})"
    else:
        version = "unknown (no file of the manifest found)"
    derived = marker.get("derived")
    derived = sorted(r for r in derived if r in check["ok"]) if isinstance(derived, dict) else []
    derivable = sorted(r for r, e in manifest["files"].items() if e.get("derive"))
    doc.update(path=str(found.path), how=found.how, version=version, fetched_from=marker.get("source"),
               derived=derived, derivable=derivable, **check)
    return doc


def describe(doc: dict[str, Any]) -> list[str]:
    """Human lines for one :func:`status` document."""
    name = doc["name"]
    if not doc["found"]:
        return [f"{name}: not found (looked in {', '.join(doc['looked_in'])}); {FETCH_HINT[doc['benchmark']]}"]
    lines = [f"{name}: {doc['path']}  (the {HOW[doc['how']]})",
             f"  version: {doc['version']}" + (f"; fetched from {doc['fetched_from']}" if doc.get("fetched_from") else "")]
    n = doc["files_in_manifest"]
    lines.append(f"  checksums: {len(doc['ok'])} of {n} files match"
                 + (f", {len(doc['mismatch'])} differ" if doc["mismatch"] else "")
                 + (f", {len(doc['missing'])} absent" if doc["missing"] else "")
                 + (" (the package ships the files the engine reads; the conformance corpora are not shipped)"
                    if doc["how"] == "packaged" else ""))
    for rel in doc["mismatch"]:
        lines.append(f"  differs: {rel}")
    if doc["derived"]:
        what = exporter(doc["benchmark"]).derived_what
        lines.append(f"  derived at fetch time from {name}'s Python source: {len(doc['derived'])} {what} "
                     "(verified like the others)")
    if set(doc["derivable"]) & set(doc["missing"]):
        lines.append(f"  tool schemas missing: `trace-gym data fetch {doc['benchmark']}` (upstream's source archive) "
                     "derives them from its Python code")
    if doc["missing_required"]:
        shown = ", ".join(doc["missing_required"][:8]) + (" ..." if len(doc["missing_required"]) > 8 else "")
        lines.append(f"  missing files the engine reads: {shown}")
    lines.append("  complete: yes" if doc["complete"] else "  complete: no (the envs may fail; see above)")
    return lines
