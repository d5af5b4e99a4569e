"""The stage store: every stage of a run writes its typed result once, atomically, and is skipped after.

``StageStore(root).run(name, fn, Result)`` runs ``fn`` only when ``root/stages/<name>.json``
holds no usable record; otherwise it loads the stored result as a ``Result`` (a
:class:`StageOutput` dataclass, or ``dict`` for a free-form result).  A record is usable
when it is readable, was made with the same ``fingerprint`` (the settings the stages
depend on; a store without one accepts any) and the artifacts it names still exist.
Records are written with :func:`trace_gym.io.atomic_write_json`, so a killed run leaves
either no record or a whole one, and rerunning continues with the first unfinished stage.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..io import atomic_write_json
from .settings import recorded_names

__all__ = ["StageOutput", "StageRecord", "StageStore", "FORMAT"]

FORMAT = "trace-gym/stage@1"
T = TypeVar("T")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@dataclass
class StageOutput:
    """Base of the typed stage results: JSON round trip and the files a result points at."""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def artifacts(self) -> list[str]:
        """Files the result refers to; a stored result whose artifacts are gone is run again."""
        return []


@dataclass
class StageRecord:
    """What the store keeps per stage: the result and what it cost."""

    stage: str
    result: Any
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    artifacts: list[str] = field(default_factory=list)
    resumed: bool = False


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (on a shared machine, a better yardstick than wall time)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class StageStore:
    """Resumable stages under ``root/stages`` (see the module docstring)."""

    def __init__(self, root: str | Path, *, fingerprint: dict[str, Any] | None = None,
                 log: Callable[[str], None] | None = None):
        self.root = Path(root)
        self.fingerprint = _jsonable(fingerprint) if fingerprint is not None else None
        self.log = log
        self.ran: list[str] = []
        self.skipped: list[str] = []
        self.records: dict[str, StageRecord] = {}

    def path(self, name: str) -> Path:
        return self.root / "stages" / f"{name}.json"

    def done(self, name: str) -> bool:
        return self.lookup(name)[0] is not None

    def _exists(self, artifact: str) -> bool:
        return Path(artifact).exists() or (self.root.parent / artifact).exists() or (self.root / artifact).exists()

    def lookup(self, name: str) -> tuple[dict[str, Any] | None, str]:
        """The stored record of ``name`` when usable, else ``None`` and why the stage has to run."""
        path = self.path(name)
        if not path.exists():
            return None, "not run yet"
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            return None, f"unreadable record {path} ({exc})"
        if not isinstance(rec, dict) or rec.get("format") != FORMAT or "result" not in rec:
            return None, f"{path} is not a stage record"
        if self.fingerprint is not None and recorded_names(rec.get("fingerprint")) != self.fingerprint:
            before = recorded_names(rec.get("fingerprint")) or {}
            changed = sorted(k for k in set(before) | set(self.fingerprint) if before.get(k) != self.fingerprint.get(k))
            return None, f"settings changed since the last run: {', '.join(changed)}"
        missing = [a for a in rec.get("artifacts", []) if not self._exists(a)]
        if missing:
            return None, f"artifacts missing: {', '.join(missing[:3])}"
        return rec, ""

    def run(self, name: str, fn: Callable[[], T], result_type: type | None = None) -> T:
        """``fn()``'s result, computed now or loaded from an earlier run's record."""
        rec, why = self.lookup(name)
        loads = result_type.from_dict if result_type is not None and hasattr(result_type, "from_dict") else (lambda d: d)
        if rec is not None:
            result = loads(rec["result"])
            self.skipped.append(name)
            self.records[name] = StageRecord(name, result, rec.get("seconds", 0.0), rec.get("cpu_seconds", 0.0),
                                             list(rec.get("artifacts", [])), resumed=True)
            return result
        if self.log is not None:
            self.log(f"stage {name} ..." if why == "not run yet" else f"stage {name} (running again: {why}) ...")
        t0, c0 = time.perf_counter(), _cpu_seconds()
        result = fn()
        secs, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        data = result.to_dict() if isinstance(result, StageOutput) else _jsonable(result)
        arts = [str(a) for a in result.artifacts()] if isinstance(result, StageOutput) else []
        atomic_write_json(self.path(name), {"format": FORMAT, "stage": name, "result": data, "seconds": round(secs, 3),
                                            "cpu_seconds": round(cpu, 3), "artifacts": arts,
                                            "fingerprint": self.fingerprint})
        self.ran.append(name)
        self.records[name] = StageRecord(name, result, secs, cpu, arts)
        return result if isinstance(result, StageOutput) else loads(data)
