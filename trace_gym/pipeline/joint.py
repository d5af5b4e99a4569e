"""One adapter for every selected capability: the joint adapter (part of TRACE's training stage when asked).

The joint adapter is SFT'd on the union of what the per-capability adapters learned from: each adapter's
reference episodes of its capability env (replayed from the envs' reference solutions with the same draw,
so no model episode and nothing charged again: each adapter's own stage charged them) and what they
rehearsed, for ``sft_max_steps`` × the number of adapters steps, with the same trainer settings.  It is
written beside the per-capability adapters (same manifest), so a routed policy can switch to it by name.
An adapter already in the manifest is kept (resume).

Errors: ``ValueError`` when an adapter's capability env is not among the calibrated ones.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .training import Rehearsal, TrainedAdapter, adapter_train_config, replayed_demonstrations

__all__ = ["JOINT_NAME", "train_joint"]

JOINT_NAME = "joint"


def train_joint(adapters: list[TrainedAdapter], envs: dict[str, dict[str, Any]], adapters_dir: str | Path, *, model: str,
                seed: int, train: dict[str, Any], cap_env_kwargs: dict[str, Any], rehearsal: Rehearsal | None,
                name: str = JOINT_NAME) -> TrainedAdapter | None:
    """The joint adapter of ``adapters`` (those with demonstrations; ``None`` when none has any) under
    ``adapters_dir/name``; ``envs`` maps a capability to its calibrated env row."""
    from ..progress import track
    from ..train.outputs import read_manifest
    from ..train.sft import progress_callback, warm_start

    taught = [a for a in adapters if a.demonstrations > 0]
    if not taught:
        return None
    missing = [a.capability for a in taught if a.capability not in envs]
    if missing:
        raise ValueError(f"the calibration record lacks the capability env(s) {missing} the adapters trained on")
    out = Path(adapters_dir) / name
    per_adapter = int(train.get("sft_max_steps") or 0)
    settings = {**train, **({"sft_max_steps": per_adapter * len(taught)} if per_adapter else {})}
    entry = next((a for a in read_manifest(Path(adapters_dir) / "manifest.json")["adapters"] if a.get("path") == str(out)),
                 None)
    replayed = 0
    if entry is None or not (out / "adapter_model.safetensors").exists():
        started = time.perf_counter()
        demos: list[Any] = []
        tc = None
        for a in taught:
            env = envs[a.capability]
            tc = adapter_train_config(model=model, seed=seed, env_id=env["env_id"], out=out, steps=0, train=settings,
                                      run_name=name)
            report = replayed_demonstrations(env, a.demonstrations, model=model, seed=seed, train=settings,
                                             cap_env_kwargs=cap_env_kwargs)
            demos += report.demos
            replayed += sum(report.played.values())
        rehearsed = rehearsal.demonstrations() if rehearsal is not None else []
        bar = track(f"SFT {name} on {len(demos)} reference episodes" + (f" and {len(rehearsed)} rehearsed" if rehearsed else ""),
                    total=tc.sft_max_steps or None, unit="steps")
        try:
            warm_start(tc, out=out, demos=[*demos, *rehearsed], manifest=True, callbacks=[progress_callback(bar)])
        except BaseException:
            bar.close(aborted=True)
            raise
        bar.close()
        from ..train.outputs import MANIFEST_NAME, update_manifest

        entry = next(a for a in read_manifest(out.parent / MANIFEST_NAME)["adapters"] if a.get("path") == str(out))
        entry.update(demonstrations=len(demos), rehearsed=len(rehearsed), replayed=replayed,
                     rehearsed_base=len(rehearsal.episodes) if rehearsal is not None else 0,
                     capabilities=[a.capability for a in taught], seconds=time.perf_counter() - started)
        update_manifest(out.parent / MANIFEST_NAME, entry)
    return TrainedAdapter(name, "+".join(a.capability for a in taught), "", str(out), 0, 0, None, 0.0, [],
                          entry.get("seconds"), demonstrations=int(entry.get("demonstrations") or 0),
                          rehearsed=int(entry.get("rehearsed") or 0), rehearsed_base=int(entry.get("rehearsed_base") or 0))
