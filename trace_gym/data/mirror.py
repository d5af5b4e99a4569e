"""Install a verified copy of a benchmark's data from archives or folders that hold its files (mirrors,
upstream's source archives): every file with an upstream source must verify, or nothing is installed.

A file is taken from a source when its path ends with the file's path in the manifest (the shortest such
path first) and its bytes match the checksum; member names are never used as output paths.  Files are
staged in a temporary folder that is renamed into place at the end, and removed on any error.  Errors are
:class:`~trace_gym.data.files.DataFetchError`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .archive import Source, open_source
from .files import DataFetchError, install_staged, matches, staging
from .manifest import files_root

__all__ = ["Derive", "install_from_sources", "upstream_tag"]

# Derive the wanted files that can be rebuilt from a source's code: ``(source, wanted, files_dir, derived)``
# writes the verified ones under files_dir, records in ``derived`` what each came from, returns failures.
Derive = Callable[[Source, dict[str, dict[str, Any]], Path, dict[str, list[str]]], dict[str, str]]


def upstream_tag(entry: dict[str, Any]) -> str | None:
    """The upstream tag a manifest file comes from (copied, or derived from that tag's code)."""
    return (entry["source"] or entry.get("derive") or {}).get("tag")


def _keep_keys(data: bytes, keys: list[str]) -> bytes | None:
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    return (json.dumps({k: obj[k] for k in keys if k in obj}, indent=4) + "\n").encode("utf-8")


def install_from_sources(manifest: dict[str, Any], sources: list[tuple[str, str | None]], dest: Path,
                         log: Callable[[str], None], *, label: str, derive: Derive | None = None) -> dict[str, Any]:
    """Install into ``dest`` every manifest file found (and verified) in ``sources`` (``(path or URL, tag)``;
    a tag limits a source to the files of that upstream tag).  Returns ``{"path", "files", "not_in_source",
    "derived"}``; raises :class:`DataFetchError` when a file is corrupted or an upstream file is missing,
    leaving ``dest`` as it was."""
    for src, _ in sources:  # a local source that is not there fails before anything is created
        if not src.startswith(("http://", "https://")) and not Path(src).expanduser().exists():
            raise DataFetchError(f"--from {src}: no such file or folder")
    staged = staging(dest)
    try:
        files_dir = files_root(manifest, staged)
        pending = dict(manifest["files"])
        bad: dict[str, str] = {}
        derived: dict[str, list[str]] = {}  # file -> the source files it was derived from
        for src, tag in sources:
            wanted = {r: e for r, e in pending.items() if tag is None or upstream_tag(e) == tag}
            if not wanted:
                continue
            with open_source(src, staged, log) as files:
                for rel, entry in wanted.items():
                    keep = (entry["source"] or {}).get("keep_keys")
                    seen = False
                    for data in files.candidates(rel):
                        seen = True
                        if not matches(data, entry) and keep:
                            data = _keep_keys(data, keep) or data
                        if matches(data, entry):
                            target = files_dir / rel
                            target.parent.mkdir(parents=True, exist_ok=True)
                            target.write_bytes(data)
                            del pending[rel]
                            bad.pop(rel, None)
                            break
                    else:
                        if seen:
                            bad[rel] = f"checksum mismatch in {src}"
                if derive is not None:
                    still = {r: e for r, e in wanted.items() if r in pending}
                    for rel, why in derive(files, still, files_dir, derived).items():
                        bad[rel] = f"{why} in {src}"
                    for rel in derived:
                        pending.pop(rel, None)
                        bad.pop(rel, None)
        upstream_missing = [r for r, e in pending.items() if e["source"] and r not in bad]
        if bad or upstream_missing:
            lines = [f"  {rel}: {why} (corrupted or a different version)" for rel, why in sorted(bad.items())]
            lines += [f"  {rel}: not found in the source" for rel in upstream_missing]
            raise DataFetchError(
                f"{manifest['name']} {manifest['version']}: {len(lines)} file(s) failed verification; nothing was "
                f"installed:\n" + "\n".join(lines) + "\nDownload the archive again or use another --from source."
            )
        not_in_source = sorted(pending)
        count = len(manifest["files"]) - len(not_in_source)
        marker = {"benchmark": manifest["benchmark"], "version": manifest["version"], "source": label,
                  "files": count, "not_in_source": not_in_source, "derived": derived}
        install_staged(staged, dest, marker)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return {"path": str(dest), "files": count, "not_in_source": not_in_source, "derived": sorted(derived)}
