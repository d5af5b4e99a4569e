"""The analysis pipeline: trajectories → labeling runs → selected capabilities.

Outputs in ``out_dir``:

* ``labels/run_NN.json`` — one file per labeling run, written atomically; a rerun
  loads the runs already stored instead of labeling again (resume);
* ``capabilities.json`` — inputs (file, hash, counts), labeler, thresholds, the
  candidate capabilities, per-run figures per capability, and the selection;
* ``capabilities.png`` — coverage vs gap per capability and selection frequency.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..core.outcome import is_success
from ..io import atomic_write_json, sha256_file
from .aggregate import AggregationResult, Thresholds, aggregate
from .gold import GoldLookup
from .labelers.base import Labeler, LabelingItem
from .labels import Capability, LabelRun

__all__ = ["items_from_trajectories", "trajectory_id", "run_analysis", "load_capabilities"]

FORMAT = "trace-gym/capabilities@1"


def trajectory_id(t: Any) -> str:
    opts = json.dumps(t.options or {}, sort_keys=True)
    h = hashlib.sha256(f"{t.env_id}|{t.policy_id}|{t.seed}|{opts}".encode()).hexdigest()[:10]
    return f"{t.env_id.split('/')[-1]}:{t.seed}:{h}"


def items_from_trajectories(trajectories: list[Any], gold: Callable[[str, Mapping[str, Any] | None, Mapping[str, Any] | None], Any] | None = None) -> list[LabelingItem]:
    """One labeling item per trajectory, with the gold reference of the task it played.

    ``gold(env_id, options, reset_info) -> (task id, Gold or None)`` finds them; by default
    a :class:`~trace_gym.analysis.gold.GoldLookup` asks each env's task source.
    """
    lookup = gold if gold is not None else GoldLookup()
    items = []
    for t in trajectories:
        task_id, ref = lookup(t.env_id, t.options, t.reset_info)
        criteria = None if ref is None else {
            "actions": [dict(a) for a in ref.actions], "communicate_info": list(ref.communicate),
            "categories": [str(c) for c in ref.details.get("categories") or ()],
            # dual control (τ² telecom): the calls the user makes on their own device, from the benchmark's criteria
            "user_actions": [{"name": a.get("name"), "arguments": dict(a.get("arguments") or {})}
                             for a in ref.details.get("actions") or () if isinstance(a, Mapping) and a.get("requestor") == "user"]}
        items.append(LabelingItem(trajectory_id(t), t.transcript or t.messages, float(t.reward), task_id, criteria,
                                  ref.write_tools if ref is not None else frozenset()))
    return items


def run_analysis(
    trajectories_path: str | Path,
    out_dir: str | Path,
    labeler: Labeler,
    capabilities: list[Capability],
    *,
    runs: int = 1,
    thresholds: Thresholds | None = None,
    seed: int = 0,
    items: list[LabelingItem] | None = None,
    on_run: Callable[[int, bool], None] | None = None,
) -> tuple[AggregationResult, dict[str, Any]]:
    """Label ``runs`` times (resuming stored runs) and aggregate; returns the result and the JSON written."""
    from ..rollout import TrajectoryStore

    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    thresholds = thresholds or Thresholds(k=max(1, round(0.8 * runs)))
    out = Path(out_dir)
    if items is None:
        trajs = list(TrajectoryStore(trajectories_path).load())
        if not trajs:
            raise ValueError(f"{trajectories_path}: no trajectories to analyse")
        items = items_from_trajectories(trajs)
    rewards = {i.trajectory_id: i.reward for i in items}
    cap_names = [c.name for c in capabilities]
    label_runs: list[LabelRun] = []
    for r in range(runs):
        path = out / "labels" / f"run_{r:02d}.json"
        run_seed = seed * 1000 + r
        stored = None
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("labeler") == labeler.name and data.get("capabilities") == cap_names and data["run"]["seed"] == run_seed:
                stored = LabelRun.from_dict(data["run"])
        if stored is None:
            stored = labeler.label(items, capabilities, run=r, seed=run_seed)
            atomic_write_json(path, {"labeler": labeler.name, "capabilities": cap_names, "run": stored.to_dict()})
            if on_run:
                on_run(r, False)
        elif on_run:
            on_run(r, True)
        label_runs.append(stored)
    result = aggregate(label_runs, rewards, cap_names, thresholds)
    n_failed = sum(1 for v in rewards.values() if not is_success(v, thresholds.success))
    doc = {
        "format": FORMAT,
        "inputs": {
            "trajectories": str(trajectories_path),
            "sha256": sha256_file(trajectories_path) if Path(trajectories_path).is_file() else None,
            "n_trajectories": len(items),
            "n_failed": n_failed,
            "n_passed": len(items) - n_failed,
            "task_ids": sorted({i.task_id for i in items if i.task_id is not None}),
        },
        "labeler": labeler.name,
        "runs": runs,
        "seeds": [seed * 1000 + r for r in range(runs)],
        "thresholds": asdict(thresholds),
        "malformed": [lr.malformed for lr in label_runs],
        "unlabeled": [len(lr.unlabeled) for lr in label_runs],
        "candidates": [c.to_dict() for c in capabilities],
        "selected": result.selected,
        "capabilities": [s.to_dict() for s in result.summaries],
    }
    atomic_write_json(out / "capabilities.json", doc)
    return result, doc


def load_capabilities(path: str | Path) -> dict[str, Any]:
    """Read a ``capabilities.json`` and check its format."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a trace-gym capabilities file (format {data.get('format')!r}, expected {FORMAT!r})")
    return data
