"""Registering capability specs that live outside the starter library in this process.

Other processes (e.g. async vector envs) find them when their folder is listed in
``TRACE_GYM_ENVS_DIR`` (see :mod:`trace_gym.capabilities.entries`).
"""

from __future__ import annotations

from pathlib import Path

from ..capabilities.specfile import read_spec_document
from ..registration import EnvEntry, add_entry

__all__ = ["register_spec_files", "register_spec_files_once"]


def register_spec_files(paths: list[Path]) -> list[str]:
    """Register each spec file as ``trace/<id>-v0``; returns the ids in order.

    A file registered again (e.g. synthesized again into another folder) replaces this
    process's earlier registration of its id; an id that ``import trace_gym`` registered
    (a starter, a benchmark) is never replaced: :class:`~trace_gym.registration.DuplicateEnvError`.
    """
    ids = []
    for p in paths:
        doc = read_spec_document(p)
        env_id = f"trace/{doc['id']}-v0"
        add_entry(EnvEntry(env_id, "trace_gym.capabilities.env:CapabilityEnv",
                           str(doc.get("title") or doc.get("capability") or doc["id"]), {"spec": str(Path(p).resolve())},
                           family="capability", domain=str(doc.get("domain") or "")),
                  replace=True)
        ids.append(env_id)
    return ids



def register_spec_files_once(paths: list[str | Path]) -> list[str]:
    """Register each spec file's env id unless this process already has it from this very file (a spec
    synthesized earlier into another folder, e.g. by an earlier run in the same process, is replaced);
    returns the ids in order."""
    import gymnasium as gym
    import yaml

    ids = []
    for p in paths:
        env_id = f"trace/{yaml.safe_load(Path(p).read_text(encoding='utf-8'))['id']}-v0"
        known = gym.registry.get(env_id)
        if known is None or str((known.kwargs or {}).get("spec")) != str(Path(p).resolve()):
            register_spec_files([Path(p)])
        ids.append(env_id)
    return ids
