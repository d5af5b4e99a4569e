"""Human-facing output of the analysis: a rich table and a PNG chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from ..render import fit_table

__all__ = ["capabilities_table", "plot_capabilities"]


def _labelled(run: dict[str, Any]) -> int:
    """Trajectories of one labeling run on which the capability applied (labelled lacking or present)."""
    return sum(int(run.get(k, 0)) for k in ("lacking_failed", "present_failed", "lacking_passed", "present_passed"))


def capabilities_table(doc: dict[str, Any]) -> Table:
    t = doc["thresholds"]
    table = Table(title=f"Capabilities ({doc['inputs']['n_failed']} failed / {doc['inputs']['n_passed']} passed; "
                        f"ρ={t['rho']}, δ={t['delta']}, K={t['k']} of N={doc['runs']})")
    # short headers so the table fits 80 columns with whole capability names (the caption spells them out)
    for col in ("capability", "selected", "runs", "Cov", "ER−", "ER+", "Δ"):
        table.add_column(col, justify="left" if col == "capability" else "right", no_wrap=True)
    table.caption = "runs: labeling runs passing the thresholds; Cov, ER−, ER+, Δ: means over the runs"
    no_passed = not doc["inputs"]["n_passed"]
    shown = [s for s in doc["capabilities"] if s["selected"] or any(_labelled(p) for p in s["per_run"])]
    if len(shown) < len(doc["capabilities"]):  # e.g. τ²-policy capabilities on a ToolSandbox target: NA everywhere
        table.caption += (f"; {len(doc['capabilities']) - len(shown)} capabilities that apply to none of these "
                          "trajectories are left out")
    for s in shown:
        per = s["per_run"]
        n = max(1, len(per))
        table.add_row(
            s["capability"], "yes" if s["selected"] else "", f"{s['runs_passed']}/{s['n_runs']}",
            f"{s['mean_coverage']:.2f}", f"{sum(p['er_minus'] for p in per) / n:.2f}",
            "n/a" if no_passed else f"{sum(p['er_plus'] for p in per) / n:.2f}", f"{s['mean_gap']:+.2f}",
        )
    if no_passed:
        table.caption += ("; no passed trajectories: ER+ is taken as 0, so Δ = ER− and the selection rests on "
                          "the failures alone (add successful trajectories, e.g. from a scripted or stronger agent)")
    return fit_table(table, "capability")


def plot_capabilities(doc: dict[str, Any], path: str | Path) -> Path | None:
    """Coverage vs gap (one point per capability and run) and selection frequency; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = doc["thresholds"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for s in doc["capabilities"]:
        xs = [p["coverage"] for p in s["per_run"]]
        ys = [p["gap"] for p in s["per_run"]]
        ax1.scatter(xs, ys, label=s["capability"], alpha=0.7, marker="o" if s["selected"] else "x")
    ax1.axvline(t["rho"], color="grey", ls="--", lw=1)
    ax1.axhline(t["delta"], color="grey", ls="--", lw=1)
    ax1.set_xlabel("coverage (lacking on failed / failed)")
    ax1.set_ylabel("contrastive gap Δ = ER− − ER+")
    ax1.set_xlim(-0.02, 1.02)
    ax1.set_ylim(-1.02, 1.02)
    ax1.legend(fontsize=7, loc="lower right")
    ax1.set_title("per run and capability")
    names = [s["capability"] for s in doc["capabilities"]]
    freq = [s["runs_passed"] / max(1, s["n_runs"]) for s in doc["capabilities"]]
    colors = ["tab:green" if s["selected"] else "tab:grey" for s in doc["capabilities"]]
    ax2.barh(names[::-1], freq[::-1], color=colors[::-1])
    ax2.axvline(t["k"] / max(1, doc["runs"]), color="grey", ls="--", lw=1)
    ax2.set_xlim(0, 1)
    ax2.set_xlabel("selection frequency (runs passed / N)")
    ax2.set_title("selection")
    fig.tight_layout()
    from ..io import save_figure

    return save_figure(fig, path)
