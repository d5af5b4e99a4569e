"""Resuming a comparison: its stored configuration, and what a changed setting makes stale.

A run folder keeps the configuration its stages were made with (``config.json``).  Resuming
with another configuration is refused, naming what changed, except where the change only
touches TRACE's later stages: a setting in :data:`RERUN_FROM` names the first TRACE stage it
affects, and resuming moves that stage's stored record, every TRACE stage after it and the
evaluations that depend on them (records and episode stores) into ``replaced/<time>/``
(TRACE's adapters folder, each adapter's forced evaluation and the joint adapter too when training
is redone), so they run again while every other
stored stage is kept.  A setting
that a stored configuration lacks (added by a later version) counts as its default; one this
version does not know is ignored.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..io import atomic_write_json
from ..pipeline.loop import STAGES
from .reference import JOINT, adapter_stage, adapter_store

__all__ = ["FREE_KEYS", "RERUN_FROM", "check_config"]

FREE_KEYS = {"out", "methods", "survey_domains", "survey_tasks", "batch_size"}  # may change between resumes
RERUN_FROM = {"cap_knobs": "calibration", "cap_rehearsal": "training", "cap_rehearse_base": "training",
              "cap_rehearse_peers": "training",
              "router_rule": "routing", "router_outcomes": "routing", "embedder": "routing",
              "adapter_choice": "training", "select_tasks": "routing", "need_examples": "routing"}


def _stale(first: str, root: Path) -> list[str]:
    """Stage records under a run folder that a change from TRACE stage ``first`` on makes stale: TRACE's, its
    evaluation and, from training on, everything made of its adapters (each forced evaluation, the joint adapter)."""
    names = [f"trace_{s}" for s in STAGES[STAGES.index(first):]] + ["eval_trace"]
    if STAGES.index(first) > STAGES.index("training"):
        return names
    forced = sorted(p.stem for p in (root / "stages").glob(f"{adapter_stage('*')}.json"))
    return names + ["eval_single", *forced, JOINT, f"eval_{JOINT}"]


def check_config(cfg: Any, root: Path, log: Callable[[str], None] = print) -> list[str]:
    """Compare ``cfg`` with the configuration stored under ``root`` (storing it when there is none).

    Returns the stage records moved aside (empty when nothing changed); raises ``ValueError`` when a
    setting changed that stored stages other than TRACE's later ones depend on.
    """
    path = root / "config.json"
    now = {k: v for k, v in cfg.to_dict().items() if k not in FREE_KEYS}
    if not path.exists():
        atomic_write_json(path, now)
        return []
    before = json.loads(path.read_text(encoding="utf-8"))
    defaults = type(cfg)().to_dict()
    changed = sorted(k for k in now if before.get(k, defaults.get(k)) != now[k])  # keys this version knows
    if not changed:
        return []
    fixed = [k for k in changed if k not in RERUN_FROM]
    if fixed:
        raise ValueError(f"{root} holds a run with a different configuration (changed: {', '.join(fixed)}); "
                         "use another --out or delete the folder")
    first = min((RERUN_FROM[k] for k in changed), key=STAGES.index)
    aside = root / "replaced" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    moved = []
    for name in _stale(first, root):
        rec = root / "stages" / f"{name}.json"
        if rec.exists():
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(str(rec), str(aside / rec.name))
            moved.append(name)
        # an evaluation's episode store would hand the old policy's episodes back (same policy id, same seeds)
        episodes = adapter_store(root, name)
        if name.startswith("eval_") and episodes.exists():
            (aside / "eval").mkdir(parents=True, exist_ok=True)
            shutil.move(str(episodes), str(aside / "eval" / episodes.name))
    for adapters, where in ((root / "trace" / "adapters", "adapters"), (root / JOINT, JOINT)):
        if STAGES.index(first) <= STAGES.index("training") and adapters.exists():
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(str(adapters), str(aside / where))
    atomic_write_json(aside / "config.json" if aside.exists() else root / "config.before.json", before)
    atomic_write_json(path, now)
    log(f"settings changed since the stored run ({', '.join(changed)}): TRACE's stages from {first} on run again"
        + (f"; moved {', '.join(moved)} to {aside}" if moved else ""))
    return moved
