"""The adapter folder and its ``manifest.json``: the one place that writes, reads and validates it.

Trained LoRA adapters live side by side in one folder (``adapters/`` at the top of a
checkout by default; see ``adapters/README.md`` for the layout)::

    adapters/
      manifest.json            # what each adapter is (this module)
      router_index.json/.npy   # the retrieval router's examples (trace_gym.route.index)
      <name>/                  # one PEFT adapter per training run (trace_gym.train.trainer)

``manifest.json`` is ``{"adapters": [entry, ...]}`` with one entry per adapter folder,
keyed by ``path``: training the same folder again replaces its entry in place.  An
entry's fields (:data:`ENTRY_FIELDS`): ``name`` and ``path`` (required strings),
``capability``, ``env_id``, ``spec_hash``, ``base_model`` (string or null), ``config``
(object), ``steps`` and ``rollouts_used`` (non-negative integers), ``rollout_stats``
(object), ``reward_curve`` (list of ``[step, reward]``), ``created`` (UTC timestamp).
Other fields are kept as they are.

Writes hold an exclusive lock and replace the file atomically, so readers and
concurrent training runs never see half a manifest.  Torch-free.  Every problem with a
manifest is a :class:`ManifestError` (a ``ValueError``) naming the file and the field;
a missing manifest is :class:`FileNotFoundError` from :func:`load_adapters` and an
empty manifest from :func:`read_manifest`.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .io import atomic_write_text

__all__ = ["DEFAULT_ADAPTERS_DIR", "MANIFEST_NAME", "ENTRY_FIELDS", "ManifestError", "AdapterEntry", "manifest_path",
           "read_manifest", "validate_manifest", "update_manifest", "load_adapters"]

DEFAULT_ADAPTERS_DIR = "adapters"
MANIFEST_NAME = "manifest.json"

# field -> (accepted types, required)
ENTRY_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": ((str,), True),
    "path": ((str,), True),
    "capability": ((str, type(None)), False),
    "env_id": ((str, type(None)), False),
    "spec_hash": ((str, type(None)), False),
    "base_model": ((str, type(None)), False),
    "config": ((dict, type(None)), False),
    "steps": ((int,), False),
    "rollouts_used": ((int,), False),
    "rollout_stats": ((dict, type(None)), False),
    "reward_curve": ((list,), False),
    "created": ((str, type(None)), False),
}


class ManifestError(ValueError):
    """A manifest that is not valid JSON or does not have the documented shape."""


@dataclass(frozen=True)
class AdapterEntry:
    """One adapter of a manifest, its folder resolved (``raw`` is the entry as stored)."""

    name: str
    path: Path
    capability: str | None
    env_id: str | None
    base_model: str | None
    raw: dict[str, Any]


def manifest_path(where: str | Path = DEFAULT_ADAPTERS_DIR) -> Path:
    """The manifest file for an adapters folder (or the file itself when given one)."""
    p = Path(where)
    return p / MANIFEST_NAME if p.is_dir() or p.suffix != ".json" else p


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join("null" if t is type(None) else {"str": "a string", "int": "an integer", "dict": "an object",
                                                         "list": "a list"}[t.__name__] for t in types)


def validate_manifest(data: Any, source: str = MANIFEST_NAME) -> dict[str, Any]:
    """Check a decoded manifest against the documented shape; returns it unchanged."""
    if not isinstance(data, dict) or not isinstance(data.get("adapters"), list):
        raise ManifestError(f"{source}: expected an object with an 'adapters' list")
    paths: set[str] = set()
    for i, e in enumerate(data["adapters"]):
        where = f"{source}: adapters[{i}]"
        if not isinstance(e, dict):
            raise ManifestError(f"{where}: expected an object, got {type(e).__name__}")
        for key, (types, required) in ENTRY_FIELDS.items():
            if key not in e:
                if required:
                    raise ManifestError(f"{where}: missing {key!r} ({_type_names(types)})")
                continue
            v = e[key]
            if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
                raise ManifestError(f"{where}.{key}: expected {_type_names(types)}, got {type(v).__name__} {v!r:.60}")
            if key in ("steps", "rollouts_used") and v < 0:
                raise ManifestError(f"{where}.{key}: expected a non-negative integer, got {v}")
        if not e["name"] or not e["path"]:
            raise ManifestError(f"{where}: 'name' and 'path' must not be empty")
        for j, point in enumerate(e.get("reward_curve", [])):
            if not (isinstance(point, list) and len(point) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                                          for x in point) and math.isfinite(point[1])):
                raise ManifestError(f"{where}.reward_curve[{j}]: expected [step, finite reward], got {point!r:.60}")
        if e["path"] in paths:
            raise ManifestError(f"{where}.path: {e['path']!r} is listed twice")
        paths.add(e["path"])
    return data


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The validated manifest at ``path`` (a file or an adapters folder); ``{"adapters": []}`` when there is none."""
    p = manifest_path(path)
    if not p.exists():
        return {"adapters": []}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{p} is not valid JSON ({exc}); fix or remove it") from None
    return validate_manifest(data, str(p))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a") as fh:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        yield


def update_manifest(path: str | Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Insert ``entry`` (keyed by its ``path``) into the manifest at ``path``; returns the new manifest.

    The entry is validated first; the file is rewritten atomically under an exclusive lock.
    """
    p = manifest_path(path)
    entry = json.loads(json.dumps(entry, default=str))  # what will be stored (paths and the like as text)
    validate_manifest({"adapters": [entry]}, f"new entry for {p}")
    with _locked(p):
        data = read_manifest(p)
        data["adapters"] = [e for e in data["adapters"] if e.get("path") != entry["path"]] + [entry]
        atomic_write_text(p, json.dumps(data, indent=2, sort_keys=False) + "\n")
    return data


def load_adapters(path: str | Path = DEFAULT_ADAPTERS_DIR) -> list[AdapterEntry]:
    """The adapters a manifest lists, their folders resolved.

    A relative ``path`` is taken as written when it exists (relative to the working
    directory, as training writes it), else as a folder next to the manifest.  Raises
    :class:`FileNotFoundError` when there is no manifest, :class:`ManifestError` for a bad one.
    """
    p = manifest_path(path)
    if not p.exists():
        raise FileNotFoundError(f"no adapter manifest at {p}; train one with `trace-gym train --out {p.parent}/NAME`")
    out = []
    for e in read_manifest(p)["adapters"]:
        folder = Path(e["path"])
        if not folder.is_absolute() and not folder.exists():
            folder = p.parent / folder.name
        out.append(AdapterEntry(e["name"], folder, e.get("capability"), e.get("env_id"), e.get("base_model"), e))
    return out
