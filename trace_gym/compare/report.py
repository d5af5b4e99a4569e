"""The comparison's table, plot and scaling plot, drawn from the stored JSON alone.

:func:`render_outputs` and :func:`render_scaling` read nothing but the document that
:mod:`trace_gym.compare.pipeline` wrote, so ``trace-gym compare --redraw DIR`` rebuilds
``compare.md``/``compare.png`` (or ``scaling.md``/``scaling.png``) without rerunning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..io import atomic_write_text

__all__ = ["table_rows", "markdown_table", "rich_table", "plot_methods", "render_outputs", "render_scaling",
           "plot_scaling", "redraw"]

LABELS = {"base": "base", "grpo": "GRPO on target", "gepa": "GEPA", "trace": "TRACE (routed)",
          "single": "single capability adapter"}


def _fmt(p: dict[str, Any]) -> str:
    return f"{p['value']:.3f} [{p['low']:.3f}, {p['high']:.3f}]"


def table_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per method: pass^1 with its interval, pass^k, rollouts, wall times and a note."""
    rows = []
    for method, r in doc["methods"].items():
        ev = r["eval"]
        ks = sorted(ev["pass_hat_k"], key=int)
        rows.append({
            "method": method,
            "label": LABELS.get(method, method),
            "rollouts": r["rollouts"],
            "budget": r["budget"],
            "pass1": ev["pass_hat_k"]["1"],
            "pass_k": {k: ev["pass_hat_k"][k] for k in ks},
            "k": int(ks[-1]),
            "mean_reward": ev["mean_reward"],
            "n_tasks": ev["n_tasks"],
            "trials": ev["trials"],
            "train_wall_s": r.get("train_wall_s", 0.0),
            "eval_wall_s": ev.get("eval_wall_s", ev.get("wall_s", 0.0)),
            "note": r.get("note", "") + (f"; {ev['forfeits']} action(s) forfeited (policy error)" if ev.get("forfeits") else ""),
        })
    return rows


def markdown_table(doc: dict[str, Any]) -> str:
    rows = table_rows(doc)
    if not rows:
        return "(no methods)\n"
    k = rows[0]["k"]
    head = (f"Target `{doc['target']}`, budget B = {doc['budget']} rollouts, "
            f"{rows[0]['n_tasks']} held-out tasks × {rows[0]['trials']} trials\n\n")
    cols = ["method", "rollouts", "pass^1 [95% CI]", f"pass^{k}", "mean reward", "train s", "eval s", "what"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join([
            r["label"], str(r["rollouts"]), _fmt(r["pass1"]), f"{r['pass_k'][str(k)]['value']:.3f}",
            f"{r['mean_reward']:.3f}", f"{r['train_wall_s']:.0f}", f"{r['eval_wall_s']:.0f}", r["note"]]) + " |")
    survey = doc.get("survey")
    tail = ""
    if survey and survey.get("rows"):
        tail = "\n\nBase success before the comparison (model " + str(survey["model"]) + ", user " + str(survey["user"]) + "):\n\n"
        tail += "| domain | split | tasks | pass^1 | mean reward |\n|---|---|---|---|---|\n"
        for s in survey["rows"]:
            tail += f"| {s['domain']} | {s['split']} | {s['n_tasks']} | {_fmt(s['pass1'])} | {s['mean_reward']:.3f} |\n"
        if survey.get("all_zero"):
            tail += "\nThe base model scores 0 on every surveyed domain and split.\n"
    return head + "\n".join(lines) + "\n" + tail


def rich_table(doc: dict[str, Any]):
    from rich.table import Table

    rows = table_rows(doc)
    k = rows[0]["k"] if rows else 1
    t = Table(title=f"{doc['target']} at B = {doc['budget']} rollouts")
    for c in ("method", "rollouts", "pass^1 [95% CI]", f"pass^{k}", "mean reward", "train s", "eval s"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for r in rows:
        t.add_row(r["label"], str(r["rollouts"]), _fmt(r["pass1"]), f"{r['pass_k'][str(k)]['value']:.3f}",
                  f"{r['mean_reward']:.3f}", f"{r['train_wall_s']:.0f}", f"{r['eval_wall_s']:.0f}")
    return t


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return path


def plot_methods(doc: dict[str, Any], path: str | Path) -> Path | None:
    """Bars of pass^1 (95% bootstrap CI) per method, labelled with the rollouts each used."""
    plt = _plt()
    rows = table_rows(doc)
    if plt is None or not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = list(range(len(rows)))
    vals = [r["pass1"]["value"] for r in rows]
    err = [[v - r["pass1"]["low"] for v, r in zip(vals, rows, strict=True)], [r["pass1"]["high"] - v for v, r in zip(vals, rows, strict=True)]]
    ax.bar(xs, vals, yerr=err, capsize=4, color="#4c72b0")
    for x, r in zip(xs, rows, strict=True):  # the value is printed, so a score of 0 is visible too
        ax.text(x, min(0.97, r["pass1"]["high"] + 0.02), f"{r['pass1']['value']:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [f"{r['label']}\n({r['rollouts']} rollouts)" for r in rows], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("pass^1 on held-out tasks (95% CI)")
    ax.set_title(f"{doc['target']} — budget {doc['budget']} rollouts", fontsize=10)
    fig.tight_layout()
    out = _save(fig, Path(path))
    plt.close(fig)
    return out


def render_outputs(doc: dict[str, Any], root: str | Path) -> dict[str, str | None]:
    root = Path(root)
    atomic_write_text(root / "compare.md", markdown_table(doc))
    png = plot_methods(doc, root / "compare.png")
    return {"markdown": str(root / "compare.md"), "plot": str(png) if png else None}


def plot_scaling(doc: dict[str, Any], path: str | Path) -> Path | None:
    """pass^1 against rollouts consumed, one line per method (the base model as a flat reference)."""
    plt = _plt()
    if plt is None or not doc["runs"]:
        return None
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for run in doc["runs"]:
        for method, r in run["methods"].items():
            p = r["eval"]["pass_hat_k"]["1"]
            x = r["rollouts"] if method != "base" else run["budget"]
            series.setdefault(method, []).append((x, p["value"], p["low"], p["high"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for method, pts in series.items():
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        style = "--" if method == "base" else "-"
        ax.plot(xs, ys, style, marker="o", label=LABELS.get(method, method))
        ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], alpha=0.12)
    ax.set_xlabel("env rollouts consumed")
    ax.set_ylabel("pass^1 on held-out tasks")
    ax.set_ylim(0, 1)
    ax.set_title(f"{doc['target']} — score vs rollouts", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = _save(fig, Path(path))
    plt.close(fig)
    return out


def render_scaling(doc: dict[str, Any], root: str | Path) -> dict[str, str | None]:
    root = Path(root)
    lines = [f"Target `{doc['target']}`: pass^1 [95% CI] (rollouts used) per budget\n",
             "| budget | " + " | ".join(LABELS.get(m, m) for m in doc["runs"][0]["methods"]) + " |" if doc["runs"] else "",
             "|---|" + "---|" * (len(doc["runs"][0]["methods"]) if doc["runs"] else 0)]
    for run in doc["runs"]:
        cells = [f"{_fmt(r['eval']['pass_hat_k']['1'])} ({r['rollouts']})" for r in run["methods"].values()]
        lines.append(f"| {run['budget']} | " + " | ".join(cells) + " |")
    atomic_write_text(root / "scaling.md", "\n".join(lines) + "\n")
    png = plot_scaling(doc, root / "scaling.png")
    return {"markdown": str(root / "scaling.md"), "plot": str(png) if png else None}


def redraw(path: str | Path) -> dict[str, str | None]:
    """Rebuild the table and plot from a ``compare.json``/``scaling.json`` (or a folder holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "scaling.json" if (p / "scaling.json").exists() else p / "compare.json"
    doc = json.loads(p.read_text(encoding="utf-8"))
    if str(doc.get("format", "")).endswith("/scaling"):
        return render_scaling(doc, p.parent)
    return render_outputs(doc, p.parent)
