"""Registering capability specs that live outside the starter library in this process.

Other processes (e.g. async vector envs) find them when their folder is listed in
``TRACE_GYM_ENVS_DIR`` (see :mod:`trace_gym.capabilities.entries`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..registration import EnvEntry, add_entry

__all__ = ["register_spec_files"]


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

