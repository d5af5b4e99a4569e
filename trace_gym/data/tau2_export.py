"""τ²-bench's exporter: its data files from tau2-bench's public source archives at the pinned tags
(``v1.0.1``, plus ``v0.2.0`` for the telecom base tasks file), or from a mirror of them.

τ²-bench's tool schemas (``domains/<domain>/tools.json``, ``user_tools.json``) are not files upstream:
tau2 builds them at run time from its toolkit code.  A fetch derives them from the Python source in the
same archive (``src/tau2/...``, read with :mod:`ast`, never run; see :mod:`trace_gym.data.tau2_schema_derive`),
verified against the shipped checksums like every other file (manifest entries with a ``derive`` key).
The protocol notes and conformance corpora were recorded by running tau2 and are in no archive.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .archive import Source
from .files import matches
from .manifest import files_root, load_manifest
from .mirror import install_from_sources, upstream_tag

__all__ = ["Tau2Exporter"]


def _derive_into(files: Source, wanted: dict[str, dict[str, Any]], files_dir: Path,
                 derived: dict[str, list[str]]) -> dict[str, str]:
    """Derive the ``wanted`` files that have a ``derive`` entry from the source's Python code, write those
    that match their checksum under ``files_dir`` and record in ``derived`` the source files each was
    derived from; returns the files whose derivation failed or differs, with why.  A file whose toolkit
    code is not in the source is skipped (it stays missing)."""
    from .tau2_schema_derive import SchemaDeriveError, derive_domain, toolkit_source

    failed: dict[str, str] = {}
    seen: dict[str, bytes | None] = {}  # each source file is read once (archive members are slow to reach)

    def read(path: str) -> bytes | None:
        if path not in seen:
            seen[path] = files.first(path)
        return seen[path]

    for rel, entry in sorted(wanted.items()):
        if not entry.get("derive") or rel in derived:
            continue
        domain, name = entry["derive"]["domain"], Path(rel).name
        if read(toolkit_source(domain, name)) is None:
            continue
        try:
            out, used = derive_domain(read, domain, [name])
        except SchemaDeriveError as exc:
            failed[rel] = f"cannot derive it from the Python code ({exc})"
            continue
        if not matches(out[name], entry):
            failed[rel] = "derived from the Python code, but the result differs from the checksum"
            continue
        target = files_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(out[name])
        derived[rel] = used
    return failed


class Tau2Exporter:
    """``trace-gym data fetch tau2``: see the module docstring."""

    benchmark = "tau2"
    derived_what = "tool-schema files"

    def fetch(self, source: str | None, dest: Path, log: Callable[[str], None]) -> dict[str, Any]:
        manifest = load_manifest(self.benchmark)
        tags = list(dict.fromkeys(upstream_tag(e) for e in manifest["files"].values() if upstream_tag(e)))
        if source is None:
            sources = [(manifest["archive"]["url"].format(tag=t), t) for t in tags]
        elif "{tag}" in source:  # a mirror of the upstream archives, one per tag
            sources = [(source.replace("{tag}", t), t) for t in tags]
        else:
            sources = [(source, None)]
        return install_from_sources(manifest, sources, dest, log, label=source or "upstream archives",
                                    derive=_derive_into)

    def missing_note(self, missing: list[str], dest: str | Path) -> str | None:
        if not missing:
            return None
        manifest = load_manifest(self.benchmark)
        needed = [r for r in missing if manifest["files"][r]["required"]]
        derivable = any(manifest["files"][r].get("derive") for r in missing)
        text = (f"{len(missing)} file(s) of the manifest are generated from the benchmark's code and are not in "
                f"this source (conformance corpus, protocol notes{', tool schemas' if derivable else ''}).")
        if derivable:
            text += (" The tool schemas are derived from the benchmark's Python source (src/tau2/...), which this "
                     "source lacks: fetch without --from (upstream's source archive) or from a mirror of that archive.")
        if needed:
            text += (f" The environments need {len(needed)} of them ({', '.join(needed[:4])}"
                     f"{' ...' if len(needed) > 4 else ''}): copy them from a complete data folder into "
                     f"{files_root(manifest, Path(dest))}, or fetch again with --from a mirror that has them.")
        return text
