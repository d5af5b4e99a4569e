"""Running the demo's stages in order, skipping finished ones, and the closing summary."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..io import atomic_write_json
from .config import DemoConfig
from .stages import STAGES, Context, StageResult

__all__ = ["run_demo", "verdict"]


def _record_path(cfg: DemoConfig, name: str) -> Path:
    return cfg.out / "stages" / f"{name}.json"


def _load_record(cfg: DemoConfig, name: str) -> tuple[dict[str, Any] | None, str]:
    """A finished stage's record when its sizes match and its artifacts are all still there;
    else ``None`` and why the stage has to run."""
    path = _record_path(cfg, name)
    if not path.exists():
        return None, "not run yet"
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return None, f"unreadable record {path} ({exc})"
    if rec.get("config") != cfg.to_dict():
        changed = sorted(k for k, v in cfg.to_dict().items() if (rec.get("config") or {}).get(k) != v)
        return None, f"settings changed since the last run: {', '.join(changed)}"
    missing = [a for a in rec.get("artifacts", []) if not (Path(a).exists() or (cfg.out.parent / a).exists())]
    if missing:
        return None, f"artifacts missing: {', '.join(missing[:3])}"
    return rec, ""


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (on a busy shared machine, a better
    yardstick than wall time for what the stage costs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def verdict(found: dict[str, Any]) -> str:
    """One honest sentence comparing routed with base on the held-out tasks."""
    base, routed = found.get("base"), found.get("routed")
    if base is None:
        return "no evaluation was run"
    if routed is None:
        return f"only the base model was evaluated (mean reward {base['mean_reward']:.3f}): no adapter to route to"
    d = routed["mean_reward"] - base["mean_reward"]
    nums = (f"base {base['mean_reward']:.3f} → routed {routed['mean_reward']:.3f} mean reward, "
            f"pass^1 {base['pass^1']:.3f} → {routed['pass^1']:.3f}")
    if d > 1e-9:
        return f"routed adapters improved on the held-out tasks ({nums}); with so few tasks this is not significant"
    if d < -1e-9:
        return f"routed adapters did worse on the held-out tasks ({nums}): the tiny training budget did not help this model"
    return f"no improvement on the held-out tasks ({nums}): the tiny training budget did not change the outcome"


def run_demo(cfg: DemoConfig, console: Console | None = None) -> dict[str, Any]:
    """Run (or resume) every stage; print and write ``<out>/summary.json``; return the summary."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import trace_gym  # noqa: F401  (registers the env ids)

    console = console or Console()
    cfg.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(cfg, console)
    console.rule(f"[bold]trace-gym demo[/bold]: {cfg.model} on trace/tau2-{cfg.domain}-v0 → {cfg.out}")
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for name, title, fn in STAGES:
        rec, why = _load_record(cfg, name)
        if rec is not None:
            console.rule(f"{title} [dim](done in an earlier run; skipped)[/dim]")
            console.print(rec["headline"])
            ctx.results[name] = StageResult(rec["found"], rec["artifacts"], rec["headline"])
            rows.append({**rec, "resumed": True})
            continue
        console.rule(title)
        if why != "not run yet":
            console.print(f"[yellow]running again: {why}[/yellow]")
        t0, c0 = time.perf_counter(), _cpu_seconds()
        res = fn(ctx)
        secs, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        ctx.results[name] = res
        rec = {"stage": name, "title": title, "seconds": round(secs, 1), "cpu_seconds": round(cpu, 1), "found": res.found, "artifacts": res.artifacts,
               "headline": res.headline, "config": cfg.to_dict()}
        atomic_write_json(_record_path(cfg, name), rec)
        console.print(f"[green]{title} done in {secs:.0f} s[/green] ({cpu:.0f} CPU s): {res.headline}")
        rows.append({**rec, "resumed": False})
    summary = {
        "config": cfg.to_dict(),
        "stages": [{k: r[k] for k in ("stage", "title", "seconds", "cpu_seconds", "headline", "found", "artifacts", "resumed")}
                   for r in rows],
        "total_seconds_this_run": round(time.perf_counter() - started, 1),
        "verdict": verdict(ctx.results["evaluation"].found),
    }
    atomic_write_json(cfg.out / "summary.json", summary)
    table = Table(title=f"TRACE demo summary ({cfg.model}, {cfg.domain})", show_lines=True)
    table.add_column("stage")
    table.add_column("what it found")
    table.add_column("wall s (CPU s)", justify="right")
    table.add_column("artifacts")
    for r in rows:
        secs = f"{r['seconds']:.0f} ({r.get('cpu_seconds', 0):.0f})" + ("\nearlier run" if r["resumed"] else "")
        table.add_row(r["title"], r["headline"], secs, "\n".join(r["artifacts"][:4]) + ("\n…" if len(r["artifacts"]) > 4 else ""))
    total = f"{sum(r['seconds'] for r in rows):.0f} ({sum(r.get('cpu_seconds', 0) for r in rows):.0f})"
    table.add_row("total", summary["verdict"], total, str(cfg.out / "summary.json"), style="bold")
    console.print(table)
    return summary
