"""File primitives every data installer shares: checksums, downloads, staging and atomic installs.

Errors: :class:`DataFetchError` (a ``RuntimeError``) for anything a user can fix; its message says what
went wrong and what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DataFetchError", "MARKER", "MAX_DOWNLOAD", "sha256_path", "matches", "download", "staging",
           "install_staged", "read_marker"]

MARKER = ".trace-gym-data.json"  # written into an installed copy: where it came from, what it lacks
MAX_DOWNLOAD = 1 << 30


class DataFetchError(RuntimeError):
    """Fetching or verifying benchmark data failed; the message says what to do."""


def sha256_path(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def matches(data: bytes, entry: dict[str, Any]) -> bool:
    """Whether ``data`` has the size and sha256 of a manifest ``entry``."""
    return len(data) == entry["size"] and hashlib.sha256(data).hexdigest() == entry["sha256"]


def download(url: str, dest: Path, log: Callable[[str], None]) -> None:
    """Download ``url`` to ``dest`` (at most :data:`MAX_DOWNLOAD` bytes), logging progress every 5 s."""
    import urllib.error
    import urllib.request

    log(f"downloading {url}")
    req = urllib.request.Request(url, headers={"User-Agent": "trace-gym"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp, open(dest, "wb") as out:
            total, last = 0, time.monotonic()
            while chunk := resp.read(1 << 20):
                total += len(chunk)
                if total > MAX_DOWNLOAD:
                    raise DataFetchError(f"{url}: larger than {MAX_DOWNLOAD >> 20} MiB; is this the right URL?")
                out.write(chunk)
                if time.monotonic() - last > 5:
                    log(f"  {total >> 20} MiB so far")
                    last = time.monotonic()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DataFetchError(f"cannot download {url}: {exc}. Check the network, or download it yourself and pass "
                             "--from FILE") from None
    log(f"  {total / (1 << 20):.1f} MiB")


def staging(dest: Path, kind: str = "partial") -> Path:
    """A fresh staging folder beside ``dest`` (its parent created; a failure there is a :class:`DataFetchError`)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataFetchError(f"cannot create {dest.parent}: {exc.strerror or exc}") from None
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}.{kind}-", dir=dest.parent))


def install_staged(staged: Path, dest: Path, marker: dict[str, Any]) -> None:
    """Write the install marker into ``staged`` and move it into place at ``dest`` in one rename; an existing
    ``dest`` is moved aside first and removed only once the new copy is in place."""
    os.chmod(staged, 0o755)
    (staged / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        os.replace(dest, old)
    try:
        os.replace(staged, dest)
    except BaseException:
        if old is not None:
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_marker(root: Path) -> dict[str, Any]:
    """The install marker of a copy (``{}`` when there is none or it is unreadable)."""
    try:
        data = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
