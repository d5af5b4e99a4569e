"""One folder per TRACE run: where each stage's output lives, and what the run is about.

:class:`~trace_gym.pipeline.loop.TracePlan` puts its files where :class:`RunFolder` says by default,
and the stage commands of the command line (``trace-gym rollout|analyze|synthesize|sft|train|route|eval
--run DIR``) each find there what the one before wrote::

    run.json              what the run is: the target (env id, kwargs, success threshold), the model's
                          policy spec, how it generates, the capability envs' kwargs
    rollouts.jsonl        1. the base model's episodes on the target
    analysis/             2. capabilities.json, labels/run_NN.json, capabilities.png
    specs/                3. the synthesized capability specs, _synthesis.json;
                          4. <spec>.calibration.json beside each
    adapters/             5. one folder per adapter, manifest.json; 6. router_index.json and .npy
    eval/                 7. <policy>/episodes.jsonl and report.json, comparison.json and .png
    stages/<stage>.json   each stage's typed result (:class:`~trace_gym.pipeline.store.StageStore`)

A stage's record is fingerprinted with the settings it ran with and with the results of the stages
it read (:meth:`RunFolder.store`), so a stage whose settings or inputs changed runs again, and one
that finished is skipped.  Torch-free.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io import atomic_write_json
from .store import StageStore
from .target import Target

__all__ = ["RunFolder", "RunError", "FORMAT"]

FORMAT = "trace-gym/run@1"


class RunError(ValueError):
    """A folder is not a run, or is a run of something else; the message says which and what to do."""


@dataclass(frozen=True)
class RunFolder:
    """The paths of a run under ``root`` and its ``run.json`` (see the module docstring)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())  # the records name files by absolute path

    @property
    def settings_path(self) -> Path:
        return self.root / "run.json"

    @property
    def rollouts(self) -> Path:
        return self.root / "rollouts.jsonl"

    @property
    def analysis(self) -> Path:
        return self.root / "analysis"

    @property
    def specs(self) -> Path:
        return self.root / "specs"

    @property
    def adapters(self) -> Path:
        return self.root / "adapters"

    @property
    def index(self) -> Path:
        """The router index, without its suffix (``router_index.json`` and ``.npy``)."""
        return self.adapters / "router_index"

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    # -- run.json --------------------------------------------------------------------------
    def settings(self) -> dict[str, Any] | None:
        """``run.json``, or ``None`` when the folder holds no run; :class:`RunError` when it is not one."""
        if not self.settings_path.exists():
            return None
        try:
            doc = json.loads(self.settings_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RunError(f"{self.settings_path} is unreadable ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or "target" not in doc:
            raise RunError(f"{self.settings_path} is not the settings of a trace-gym run")
        return doc

    def check(self, target: Target, policy: str) -> dict[str, Any] | None:
        """``run.json`` when the folder is a run of ``policy`` on ``target`` (``None``: no run yet); else
        :class:`RunError` saying what the folder is a run of."""
        doc = self.settings()
        if doc is not None:
            want = json.loads(json.dumps(_target_doc(target)))
            if (doc["target"], doc.get("policy")) != (want, policy):
                raise RunError(f"{self.root} is a run of {doc.get('policy')} on {_describe(doc['target'])}, not of "
                               f"{policy} on {_describe(want)}; give another run folder")
        return doc

    def start(self, target: Target, policy: str, generation: dict[str, Any]) -> dict[str, Any]:
        """Write ``run.json`` for a run of ``policy`` on ``target`` with ``generation`` (the policy's options: the
        latest given are kept), after :meth:`check`."""
        doc = self.check(target, policy) or {}
        doc = {**doc, "format": FORMAT, "target": _target_doc(target), "policy": policy, "generation": dict(generation)}
        atomic_write_json(self.settings_path, doc)
        return doc

    def update(self, **fields: Any) -> dict[str, Any]:
        """Set ``fields`` in ``run.json`` (which must exist) and return it."""
        doc = self.settings()
        if doc is None:
            raise RunError(f"{self.root} holds no run (no run.json)")
        doc.update(fields)
        atomic_write_json(self.settings_path, doc)
        return doc

    def target(self) -> Target:
        """The run's target, from ``run.json``."""
        doc = self.settings()
        if doc is None:
            raise RunError(f"{self.root} holds no run (no run.json)")
        t = doc["target"]
        return Target(t["env_id"], dict(t.get("env_kwargs") or {}), t.get("success"))

    # -- stage records -----------------------------------------------------------------------
    def stage(self, name: str, result_type: type) -> Any:
        """The stored result of stage ``name`` as a ``result_type`` (whatever settings made it), or ``None``."""
        rec, _ = StageStore(self.root).lookup(name)
        if rec is None:
            return None
        return result_type.from_dict(rec["result"]) if hasattr(result_type, "from_dict") else rec["result"]

    def digest(self, name: str) -> str | None:
        """A short hash of stage ``name``'s stored result (``None`` when it has none)."""
        rec, _ = StageStore(self.root).lookup(name)
        if rec is None:
            return None
        return hashlib.sha256(json.dumps(rec["result"], sort_keys=True).encode()).hexdigest()[:16]

    def store(self, settings: dict[str, Any], after: Sequence[str] = ()) -> StageStore:
        """A stage store whose records are fingerprinted with ``settings`` and the results of the stages ``after``
        (so a stage runs again when either changed, and is skipped when neither did)."""
        return StageStore(self.root, fingerprint={"settings": settings, "after": {n: self.digest(n) for n in after}})


def _target_doc(target: Target) -> dict[str, Any]:
    return {"env_id": target.env_id, "env_kwargs": dict(target.env_kwargs), "success": target.success}


def _describe(target: dict[str, Any]) -> str:
    extra = [f"{k}={v}" for k, v in sorted((target.get("env_kwargs") or {}).items())]
    if target.get("success") is not None:
        extra.append(f"success {target['success']}")
    return target["env_id"] + (f" ({', '.join(extra)})" if extra else "")
