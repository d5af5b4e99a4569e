"""Locating benchmark data that trace-gym reads but never ships.

* τ²-bench: ``TAU2_DATA_DIR`` is tau2's own convention — the folder that holds
  ``tau2/domains/<domain>/``.
* ToolSandbox: ``TOOLSANDBOX_DATA_DIR`` is the folder that holds
  ``scenarios/base_scenarios.jsonl`` and ``tools.json``.

When the variable is unset, a development checkout's sibling ``shared/`` folder
(``<repo>/../shared``) and ``./shared`` / ``../shared`` relative to the working
directory are tried, in that order.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DataDirError", "tau2_data_dir", "toolsandbox_data_dir", "tau2_domain_dir"]

_REPO_ROOT = Path(__file__).resolve().parent.parent


class DataDirError(FileNotFoundError):
    """The benchmark data could not be found; the message says where we looked and how to fix it."""


def _candidates() -> list[Path]:
    cwd = Path.cwd()
    return [_REPO_ROOT.parent / "shared", cwd / "shared", cwd.parent / "shared"]


def tau2_data_dir() -> Path:
    """The folder holding ``tau2/domains/`` (what ``TAU2_DATA_DIR`` names)."""
    env = os.environ.get("TAU2_DATA_DIR")
    if env:
        root = Path(env).expanduser()
        if (root / "tau2" / "domains").is_dir():
            return root
        if (root / "domains").is_dir() and root.name == "tau2":  # pointed one level too deep: accept it
            return root.parent
        raise DataDirError(
            f"TAU2_DATA_DIR={env!r} does not contain tau2/domains/. Point TAU2_DATA_DIR at the folder that holds "
            "tau2/domains/<domain>/ (tau2-bench's data/ folder)."
        )
    tried = []
    for c in _candidates():
        tried.append(str(c / "tau2" / "domains"))
        if (c / "tau2" / "domains").is_dir():
            return c
    raise DataDirError(
        "τ²-bench data not found. Set TAU2_DATA_DIR to the folder that holds tau2/domains/<domain>/ "
        f"(tau2-bench's data/ folder). Looked in: {', '.join(tried)}"
    )


def tau2_domain_dir(domain: str) -> Path:
    path = tau2_data_dir() / "tau2" / "domains" / domain
    if not path.is_dir():
        raise DataDirError(f"τ²-bench domain {domain!r} not found: no folder {path} (TAU2_DATA_DIR)")
    return path


def toolsandbox_data_dir() -> Path:
    """The folder holding ToolSandbox's ``scenarios/base_scenarios.jsonl`` and ``tools.json``."""
    env = os.environ.get("TOOLSANDBOX_DATA_DIR")
    need = Path("scenarios") / "base_scenarios.jsonl"
    if env:
        root = Path(env).expanduser()
        if (root / need).is_file():
            return root
        if (root / "toolsandbox" / need).is_file():
            return root / "toolsandbox"
        raise DataDirError(
            f"TOOLSANDBOX_DATA_DIR={env!r} does not contain {need}. Point it at the folder holding "
            "scenarios/base_scenarios.jsonl and tools.json."
        )
    tried = []
    for c in _candidates():
        tried.append(str(c / "toolsandbox" / need))
        if (c / "toolsandbox" / need).is_file():
            return c / "toolsandbox"
    raise DataDirError(
        "ToolSandbox data not found. Set TOOLSANDBOX_DATA_DIR to the folder holding scenarios/base_scenarios.jsonl "
        f"and tools.json. Looked in: {', '.join(tried)}"
    )
