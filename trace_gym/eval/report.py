"""Tables and plots for evaluation reports and policy comparisons.

When a report carries the refusal floor (:mod:`trace_gym.eval.floor`), every table shows
it beside the policy's numbers: a "refusal floor" column per group (mean reward, perfect
count) and a "refusal floor" line in comparisons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from ..render import fit_table

__all__ = ["report_table", "comparison_table", "plot_comparison"]


def _fmt(p: dict[str, Any]) -> str:
    return f"{p['value']:.3f} [{p['low']:.3f}, {p['high']:.3f}]"


def report_table(rep: dict[str, Any]) -> Table:
    ks = sorted(rep["pass_hat_k"], key=int)
    t = Table(title=f"{rep['policy']} on {rep['env_id']} ({rep['n_tasks']} tasks × {rep['trials']} trials)")
    t.add_column("group")
    t.add_column("tasks", justify="right")
    t.add_column("mean reward", justify="right")
    t.add_column("perfect", justify="right")
    for k in ks:
        t.add_column(f"pass^{k}", justify="right")
    t.caption = "pass^k: value [95% bootstrap interval]"
    floor = rep.get("refusal_floor")
    if floor:
        t.add_column("refusal floor", justify="right")
        t.caption += "; refusal floor: mean reward, perfect count of an agent that refuses everything"

    def floor_cell(summary: dict[str, Any] | None) -> list[str]:
        if not floor:
            return []
        return [f"{summary['mean_reward']:.3f}, {summary['perfect']}" if summary else "-"]

    for g, row in rep["groups"].items():
        t.add_row(g, str(row["n_tasks"]), f"{row['mean_reward']:.3f}", str(row["perfect"]), *[_fmt(row["pass_hat_k"][k]) for k in ks],
                  *floor_cell(floor["groups"].get(g) if floor else None))
    perfect = sum(r["perfect"] for r in rep["groups"].values())
    t.add_row("all", str(rep["n_tasks"]), f"{rep['mean_reward']:.3f}", str(perfect), *[_fmt(rep["pass_hat_k"][k]) for k in ks],
              *floor_cell(floor), style="bold")
    if rep.get("excluded_groups"):
        t.caption += "; left out: " + ", ".join(f"{g} ({n} tasks)" for g, n in rep["excluded_groups"].items())
    return fit_table(t, "group")


def comparison_table(reports: list[dict[str, Any]]) -> Table:
    ks = sorted(reports[0]["pass_hat_k"], key=int)
    t = Table(title=f"Comparison on {reports[0]['env_id']}")
    t.add_column("policy")
    t.add_column("mean reward", justify="right")
    for k in ks:
        t.add_column(f"pass^{k}", justify="right")
    t.caption = "pass^k: value [95% bootstrap interval]"
    t.add_column("rollouts", justify="right")
    t.add_column("wall s", justify="right")
    for r in reports:
        t.add_row(r["policy"], f"{r['mean_reward']:.3f}", *[_fmt(r["pass_hat_k"][k]) for k in ks], str(r["rollouts"]), f"{r['wall_s']:.0f}")
    floor = next((r["refusal_floor"] for r in reports if r.get("refusal_floor")), None)
    if floor:
        t.add_row("refusal floor", f"{floor['mean_reward']:.3f}", *["-" for _ in ks], str(floor["rollouts"]), "-",
                  style="dim")
    return fit_table(t, "policy")


def plot_comparison(reports: list[dict[str, Any]], path: str | Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ks = sorted(reports[0]["pass_hat_k"], key=int)
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(reports))
    for i, r in enumerate(reports):
        xs = [int(k) + (i - (len(reports) - 1) / 2) * width for k in ks]
        vals = [r["pass_hat_k"][k]["value"] for k in ks]
        err = [[v - r["pass_hat_k"][k]["low"] for v, k in zip(vals, ks, strict=True)], [r["pass_hat_k"][k]["high"] - v for v, k in zip(vals, ks, strict=True)]]
        ax.bar(xs, vals, width, yerr=err, capsize=3, label=r["policy"])
    ax.set_xticks([int(k) for k in ks], [f"pass^{k}" for k in ks])
    ax.set_ylim(0, 1)
    ax.set_ylabel("score (95% bootstrap CI)")
    ax.set_title(reports[0]["env_id"])
    ax.legend(fontsize=8)
    fig.tight_layout()
    from ..io import save_figure

    return save_figure(fig, path)
