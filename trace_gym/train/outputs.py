"""What a training run leaves behind besides the adapter: manifest, metrics, plot, progress.

* ``adapters/manifest.json`` — one entry per adapter directory, replaced in place
  when the same directory is trained again; written to a temporary file and moved
  over the old one under an exclusive lock, so readers and concurrent runs never
  see a half-written manifest.
* ``metrics.jsonl`` — one JSON object per logged step (TRL's metrics plus
  trace-gym's rollout accounting).
* ``learning_curve.png`` — mean env reward per step (matplotlib, headless).
* a rich progress bar on the terminal.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..io import atomic_write_text

__all__ = ["update_manifest", "read_manifest", "MetricsLog", "plot_learning_curve", "ProgressDisplay", "atomic_write_text"]

MANIFEST_NAME = "manifest.json"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a") as fh:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        yield


def read_manifest(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        return {"adapters": []}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict) or not isinstance(data.get("adapters"), list):
        raise ValueError(f"{p}: expected an object with an 'adapters' list")
    return data


def update_manifest(path: str | Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Insert ``entry`` (keyed by its ``path``) into the manifest at ``path``; returns the new manifest."""
    p = Path(path)
    with _locked(p):
        data = read_manifest(p)
        data["adapters"] = [e for e in data["adapters"] if e.get("path") != entry.get("path")] + [entry]
        atomic_write_text(p, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return data


def _clean_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class MetricsLog:
    """Append-only metrics JSONL; on resume, rows past the checkpoint's step are cut first."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line torn by an interruption
                continue
        return out

    def truncate_after(self, step: int) -> None:
        rows = [r for r in self.rows() if int(r.get("step", 0)) <= step]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in rows))

    def reset(self) -> None:
        atomic_write_text(self.path, "")

    def append(self, row: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({k: _clean_number(v) for k, v in row.items()}, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def plot_learning_curve(steps: list[int], rewards: list[float], path: str | Path, title: str = "") -> Path | None:
    """Save a PNG of reward against step; ``None`` when matplotlib is missing or there is nothing to plot."""
    if not steps:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(steps, rewards, marker="o", markersize=3, linewidth=1.2)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("mean env reward")
    ax.set_ylim(min(0.0, min(rewards)) - 0.02, max(1.0, max(rewards)) + 0.02)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


class ProgressDisplay:
    """A rich progress bar with the latest reward and the rollouts consumed (a no-op when disabled)."""

    def __init__(self, total: int, enabled: bool = True, description: str = "training"):
        self.enabled = enabled
        self._progress = None
        self._task = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"), TimeElapsedColumn(), transient=False,
            )
            self._task = self._progress.add_task(description, total=total, status="")

    def start(self, completed: int = 0) -> None:
        if self._progress is not None:
            self._progress.start()
            self._progress.update(self._task, completed=completed)

    def update(self, step: int, reward: float | None, rollouts: int) -> None:
        if self._progress is None:
            return
        status = f"reward {reward:.3f}  rollouts {rollouts}" if reward is not None else f"rollouts {rollouts}"
        self._progress.update(self._task, completed=step, status=status)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
