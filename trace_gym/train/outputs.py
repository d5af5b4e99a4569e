"""What a training run leaves behind besides the adapter: manifest entry, metrics, plot.

* the adapters folder's ``manifest.json`` — one entry per adapter directory, written by
  :func:`trace_gym.adapters.update_manifest` (the manifest's one owner, re-exported here);
* ``metrics.jsonl`` — one JSON object per logged step (TRL's metrics plus
  trace-gym's rollout accounting);
* ``learning_curve.png`` — mean env reward per step (matplotlib, headless).

The progress line on the terminal is :mod:`trace_gym.progress`'s (the trainer's callback feeds it).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..adapters import MANIFEST_NAME, read_manifest, update_manifest
from ..io import atomic_write_text

__all__ = ["MANIFEST_NAME", "update_manifest", "read_manifest", "MetricsLog", "plot_learning_curve",
           "atomic_write_text"]


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
