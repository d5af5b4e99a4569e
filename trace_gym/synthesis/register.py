"""Registering capability specs that live outside the starter library."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ..registration import EnvEntry, add_entry

__all__ = ["register_spec_files", "ENV_DIRS_VAR"]

ENV_DIRS_VAR = "TRACE_GYM_ENV_DIRS"  # os.pathsep-separated folders of extra specs registered on import


def register_spec_files(paths: list[Path]) -> list[str]:
    """Register each spec file as ``trace/<id>-v0``; returns the ids in order."""
    ids = []
    for p in paths:
        doc = yaml.safe_load(Path(p).read_text(encoding="utf-8"))
        env_id = f"trace/{doc['id']}-v0"
        add_entry(EnvEntry(env_id, "trace_gym.capabilities.env:CapabilityEnv",
                           str(doc.get("title") or doc.get("capability") or doc["id"]), {"spec": str(Path(p).resolve())}))
        ids.append(env_id)
    return ids


def extra_spec_dirs() -> list[Path]:
    return [Path(d) for d in os.environ.get(ENV_DIRS_VAR, "").split(os.pathsep) if d]
