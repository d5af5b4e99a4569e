"""``trace-gym data fetch``: install a verified copy of a benchmark's data, through that benchmark's exporter.

An exporter knows where a benchmark's data comes from upstream and how to rebuild it; every copy it
installs is verified against the shipped checksums (:mod:`.manifest`) and installed atomically, so a
fetched copy is byte-identical to the packaged one wherever both hold a file.  Exporters are registered by
benchmark name (:func:`register_exporter`); the built-in ones are τ²-bench's
(:class:`~trace_gym.data.tau2_export.Tau2Exporter`) and ToolSandbox's
(:class:`~trace_gym.data.toolsandbox_export.ToolSandboxExporter`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .files import DataFetchError
from .locations import cache_folder
from .manifest import BENCHMARKS

__all__ = ["Exporter", "register_exporter", "exporter", "fetch", "not_in_source_note"]


class Exporter(Protocol):
    """Fetches one benchmark's data.

    ``fetch(source, dest, log)`` installs a verified copy at ``dest`` from ``source`` (``None``: upstream's
    default source) and returns ``{"path", "files", "not_in_source", "derived"}`` (optionally ``"kept"``);
    it raises :class:`~trace_gym.data.files.DataFetchError` for anything a user can fix, leaving ``dest``
    as it was.  ``missing_note(missing, dest)`` says what to do about files the source did not have
    (``None`` when nothing is missing).  ``derived_what`` names the files a fetch derives, for status lines.
    """

    benchmark: str
    derived_what: str

    def fetch(self, source: str | None, dest: Path, log: Callable[[str], None]) -> dict[str, Any]: ...

    def missing_note(self, missing: list[str], dest: str | Path) -> str | None: ...


_EXPORTERS: dict[str, Exporter | str] = {
    "tau2": "trace_gym.data.tau2_export:Tau2Exporter",
    "toolsandbox": "trace_gym.data.toolsandbox_export:ToolSandboxExporter",
}


def register_exporter(benchmark: str, exp: Exporter) -> None:
    """Use ``exp`` to fetch ``benchmark``'s data (replacing any exporter registered before)."""
    _EXPORTERS[benchmark] = exp


def exporter(benchmark: str) -> Exporter:
    """The exporter registered for ``benchmark`` (a :class:`DataFetchError` names the known ones)."""
    if benchmark not in _EXPORTERS:
        raise DataFetchError(f"unknown benchmark {benchmark!r}: use one of {', '.join(BENCHMARKS)}")
    exp = _EXPORTERS[benchmark]
    if isinstance(exp, str):
        module, _, name = exp.partition(":")
        exp = _EXPORTERS[benchmark] = getattr(importlib.import_module(module), name)()
    return exp


def fetch(benchmark: str, source: str | None = None, *, dest: Path | None = None,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Install a verified copy of ``benchmark``'s data into ``dest`` (default: the per-user cache).

    Returns ``{"path", "files", "not_in_source", "derived"}`` (``not_in_source``: generated files the
    source did not have).  Raises :class:`DataFetchError` when a file is corrupted or missing; nothing is
    left at ``dest`` then (an older copy there stays as it was)."""
    exp = exporter(benchmark)
    return exp.fetch(source, Path(dest) if dest is not None else cache_folder(benchmark), log)


def not_in_source_note(benchmark: str, missing: list[str], dest: str | Path = "<cache>") -> str | None:
    """What to tell a user when generated files were not in the source (``None`` when all came)."""
    return exporter(benchmark).missing_note(missing, dest)
