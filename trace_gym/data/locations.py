"""Where the benchmark data the engines read is found.

* τ²-bench: a data root holds ``tau2/domains/<domain>/`` and ``tau2/user_simulator/`` (tau2's own
  ``TAU2_DATA_DIR`` convention: tau2-bench's ``data/`` folder).
* ToolSandbox: the data folder holds ``scenarios/base_scenarios.jsonl`` and ``tools.json``.

Where the data is looked for, first match wins:

1. the environment variable (``TAU2_DATA_DIR`` / ``TOOLSANDBOX_DATA_DIR``).  When it is set
   (non-empty) it is the only place looked at: a folder without the data is an error, never a
   silent fall-back to another copy;
2. the per-user cache that ``trace-gym data fetch`` fills (``platformdirs``' user cache folder
   for ``trace-gym``, or ``TRACE_GYM_CACHE_DIR``), under ``data/``;
3. the copy packaged with trace-gym (``trace_gym/data/packaged/``: the files the engine reads and
   each benchmark's upstream LICENSE, verified against the shipped checksums);
4. a development checkout's sibling ``shared/`` folder (``<repo>/../shared``), then ``./shared``
   and ``../shared`` relative to the working directory.

Errors: :class:`DataDirError` (a ``FileNotFoundError``) whose message says where it looked and how
to get the data (``trace-gym data fetch``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DataDirError", "DataLocation", "cache_root", "cache_folder", "locate", "packaged_root",
           "tau2_data_dir", "toolsandbox_data_dir", "tau2_domain_dir", "FETCH_HINT", "HOW"]

_REPO_ROOT = Path(__file__).resolve().parents[2]
TAU2_VERSION = "1.0.1"

FETCH_HINT = {
    "tau2": "run `trace-gym data fetch tau2` (downloads τ²-bench 1.0.1's data and verifies it)",
    "toolsandbox": ("run `trace-gym data fetch toolsandbox --from PATH_OR_URL` with a copy of that folder (or an "
                    "archive of one); without --from it builds the scenarios from upstream's code, but not tools.json"),
}
HOW = {"env": "environment variable", "cache": "per-user cache (trace-gym data fetch)",
       "packaged": "copy packaged with trace-gym", "sibling": "sibling shared/ folder"}
_ENV_VAR = {"tau2": "TAU2_DATA_DIR", "toolsandbox": "TOOLSANDBOX_DATA_DIR"}
_LABEL = {"tau2": "τ²-bench", "toolsandbox": "ToolSandbox"}
_WHAT = {
    "tau2": "the folder that holds tau2/domains/<domain>/, tau2-bench's data/ folder",
    "toolsandbox": "the folder holding scenarios/base_scenarios.jsonl and tools.json",
}


class DataDirError(FileNotFoundError):
    """The benchmark data could not be found; the message says where we looked and how to fix it."""


@dataclass(frozen=True)
class DataLocation:
    """Where a benchmark's data was found: ``path`` (what the engine reads) and ``how``
    (``"env"``, ``"cache"``, ``"packaged"`` or ``"sibling"``; see :data:`HOW`)."""

    benchmark: str
    path: Path
    how: str


def cache_root() -> Path:
    """The per-user cache folder of trace-gym (``TRACE_GYM_CACHE_DIR`` overrides it)."""
    env = os.environ.get("TRACE_GYM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("trace-gym", appauthor=False))


def cache_folder(benchmark: str) -> Path:
    """Where ``trace-gym data fetch BENCHMARK`` installs the data (a data root as the engine reads it)."""
    folders = {"tau2": f"tau2-{TAU2_VERSION}", "toolsandbox": "toolsandbox"}
    if benchmark not in folders:
        raise ValueError(f"unknown benchmark {benchmark!r} (tau2 or toolsandbox)")
    return cache_root() / "data" / folders[benchmark]


def packaged_root() -> Path:
    """The folder of the packaged copy: ``tau2/`` (a τ²-bench data root's content) and ``toolsandbox/``."""
    return Path(__file__).resolve().with_name("packaged")


def _siblings() -> list[Path]:
    cwd = Path.cwd()
    return list(dict.fromkeys([_REPO_ROOT.parent / "shared", cwd / "shared", cwd.parent / "shared"]))


def _tau2_root(folder: Path) -> Path | None:
    if (folder / "tau2" / "domains").is_dir():
        return folder
    if folder.name == "tau2" and (folder / "domains").is_dir():  # pointed one level too deep: accept it
        return folder.parent
    return None


def _toolsandbox_root(folder: Path) -> Path | None:
    need = Path("scenarios") / "base_scenarios.jsonl"
    if (folder / need).is_file():
        return folder
    if (folder / "toolsandbox" / need).is_file():
        return folder / "toolsandbox"
    return None


_CHECK = {"tau2": _tau2_root, "toolsandbox": _toolsandbox_root}


def locate(benchmark: str) -> tuple[DataLocation | None, list[str]]:
    """Find a benchmark's data by the rules above: ``(location or None, places looked at)``."""
    check = _CHECK[benchmark]
    var = _ENV_VAR[benchmark]
    env = os.environ.get(var)
    if env:
        folder = Path(env).expanduser()
        root = check(folder)
        return (DataLocation(benchmark, root, "env") if root else None), [f"{var}={env}"]
    places: list[tuple[Path, str]] = []
    try:
        places.append((cache_folder(benchmark), "cache"))
    except ModuleNotFoundError:  # platformdirs missing from a broken install: skip the cache
        pass
    places.append((packaged_root(), "packaged"))
    places += [(c, "sibling") for c in _siblings()]
    tried: list[str] = []
    for folder, how in places:
        tried.append(str(folder if how == "cache" else folder / benchmark))
        root = check(folder)
        if root is not None:
            return DataLocation(benchmark, root, how), tried
    return None, tried


def _not_found(benchmark: str, tried: list[str]) -> DataDirError:
    var, label = _ENV_VAR[benchmark], _LABEL[benchmark]
    hint = FETCH_HINT[benchmark]
    env = os.environ.get(var)
    if env:
        return DataDirError(
            f"{var}={env!r} holds no {label} data; point it at {_WHAT[benchmark]}, or unset it and {hint}"
        )
    return DataDirError(
        f"{label} data not found: {hint}, or set {var} to {_WHAT[benchmark]}. Looked in: {', '.join(tried)}"
    )


def tau2_data_dir() -> Path:
    """The folder holding ``tau2/domains/`` (what ``TAU2_DATA_DIR`` names)."""
    found, tried = locate("tau2")
    if found is None:
        raise _not_found("tau2", tried)
    return found.path


def tau2_domain_dir(domain: str) -> Path:
    path = tau2_data_dir() / "tau2" / "domains" / domain
    if not path.is_dir():
        raise DataDirError(f"τ²-bench domain {domain!r} not found: no folder {path}; {FETCH_HINT['tau2']}")
    return path


def toolsandbox_data_dir() -> Path:
    """The folder holding ToolSandbox's ``scenarios/base_scenarios.jsonl`` and ``tools.json``."""
    found, tried = locate("toolsandbox")
    if found is None:
        raise _not_found("toolsandbox", tried)
    return found.path
