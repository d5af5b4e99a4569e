"""The folder of GGUF files made from other files (float copies, merged adapters, LoRA GGUFs).

An entry is named by a digest of its sources' *contents*, so the same model installed in another
environment (a fresh venv, a CI checkout) finds the copy already made, and a retrained adapter gets a
new one.  The folder is bounded: after each new entry the least recently used files are removed until
the folder holds at most :func:`cache_budget` bytes (``TRACE_GYM_GGUF_CACHE_GB``, default 6); the
entry just made and files in use by another process are safe (an open or memory-mapped file lives on
after it is unlinked, and a later call re-creates it).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["BUDGET_ENV", "cache_budget", "cached_gguf_path", "content_digest", "entry", "prune_cache"]

BUDGET_ENV = "TRACE_GYM_GGUF_CACHE_GB"
_DEFAULT_GB = 6.0
_digests: dict[tuple[str, int, int], str] = {}


def content_digest(path: str | Path) -> str:
    """SHA-256 of the file's bytes, remembered per (path, size, modification time) within the process."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        _digests[key] = h.hexdigest()
    return _digests[key]


def cached_gguf_path(cache_dir: str | Path, stem: str, tag: str, sources: list[Path]) -> Path:
    """Where the ``tag`` file made from ``sources`` is cached: ``<stem>-<key>.<tag>.gguf`` with ``key`` a
    digest of the sources' names and contents (missing sources count as absent)."""
    stamp = "|".join(f"{p.name}:{content_digest(p)}" for p in sources if p.is_file())
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{stem}-{key}.{tag}.gguf"


def cache_budget() -> int:
    """The folder's size limit in bytes, from ``TRACE_GYM_GGUF_CACHE_GB`` (a positive number of GiB)."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return int(_DEFAULT_GB * 2**30)
    try:
        gb = float(raw)
    except ValueError:
        raise ValueError(f"{BUDGET_ENV} must be a number of GiB, not {raw!r}") from None
    if not gb > 0:
        raise ValueError(f"{BUDGET_ENV} must be positive, not {raw!r}")
    return int(gb * 2**30)


def prune_cache(cache_dir: str | Path, *, keep: Path | None = None, budget: int | None = None) -> list[Path]:
    """Remove the least recently used ``*.gguf`` files of ``cache_dir`` until the rest fit ``budget`` bytes
    (default :func:`cache_budget`); never ``keep``.  Returns what was removed."""
    budget = cache_budget() if budget is None else budget
    entries = []
    for p in Path(cache_dir).glob("*.gguf"):
        try:
            st = p.stat()
        except FileNotFoundError:  # removed by another process meanwhile
            continue
        entries.append((st.st_mtime_ns, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    removed = []
    for _, size, p in sorted(entries):
        if total <= budget:
            break
        if keep is not None and p == keep:
            continue
        try:
            p.unlink()
        except FileNotFoundError:
            pass
        total -= size
        removed.append(p)
    return removed


def entry(path: Path, make: Callable[[Path], Any]) -> Path:
    """The cache entry ``path``: made by ``make(path)`` when absent (then the folder is pruned around it), else
    marked as just used (its modification time orders eviction)."""
    if not path.is_file():
        make(path)
        prune_cache(path.parent, keep=path)
        return path
    try:
        os.utime(path)
    except OSError:  # read-only cache: still usable
        pass
    return path
