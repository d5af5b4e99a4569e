"""Tables and plots for evaluation reports and policy comparisons.

When a report carries the refusal floor (:mod:`trace_gym.eval.floor`), every table shows
it beside the policy's numbers: a "floor" column per group (mean reward, perfect count)
and a "refusal floor" line in comparisons.  :func:`paired_difference_table` shows every
policy against the first on the same tasks (:func:`trace_gym.eval.scores.paired_scores`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from ..render import compact_table, fit_table

__all__ = ["report_table", "comparison_table", "paired_difference_table", "plot_comparison"]


def _fmt(p: dict[str, Any]) -> str:
    return f"{p['value']:.3f} [{p['low']:.3f}, {p['high']:.3f}]"


def _short(p: dict[str, Any]) -> str:
    return f"{p['value']:.3f} [{p['low']:.2f}, {p['high']:.2f}]"


def _scores(rep: dict[str, Any]) -> dict[str, Any]:
    return rep.get("scores") or {}


def report_table(rep: dict[str, Any]) -> Table:
    """One evaluation: per report group and overall, mean reward [95% CI], perfect episodes, pass^k, the
    share of episodes the agent ended, and the refusal floor when the report carries it."""
    ks = sorted(rep["pass_hat_k"], key=int)
    shown = [ks[0]] + ([ks[-1]] if len(ks) > 1 else [])  # pass^1 and pass^K; the JSON has every k with its interval
    scores = _scores(rep)
    t = compact_table(f"{rep['policy']} on {rep['env_id']} ({rep['n_tasks']} tasks × {rep['trials']} trials)")
    t.add_column("group")
    t.add_column("n", justify="right")
    t.add_column("mean [95% CI]", justify="right")
    t.add_column("perf", justify="right")
    for k in shown:
        t.add_column(f"pass^{k}", justify="right")
    t.add_column("ended", justify="right")
    t.caption = ("n: tasks; mean reward with a bootstrap interval over tasks; perf: perfect episodes (reward 1); "
                 "a task counts in every group it belongs to; ended: episodes the agent ended with a message to the user")
    floor = rep.get("refusal_floor")
    if floor:
        t.add_column("floor", justify="right")
        t.caption += "; floor: the refusal floor, mean reward · perfect count of an agent that refuses everything"

    def floor_cell(summary: dict[str, Any] | None) -> list[str]:
        if not floor:
            return []
        return [f"{summary['mean_reward']:.2f}·{summary['perfect']}" if summary else "-"]

    def cells(summary: dict[str, Any] | None, mean: float, pk: dict[str, Any]) -> list[str]:
        m = _short(summary["mean"]) if summary else f"{mean:.3f}"
        ended = f"{summary['ended']:.0%}" if summary and "ended" in summary else "-"
        return [m, *[f"{pk[k]['value']:.3f}" for k in shown], ended]

    for g, row in rep["groups"].items():
        summary = (scores.get("groups") or {}).get(g)
        t.add_row(g, str(row["n_tasks"]), *cells(summary, row["mean_reward"], row["pass_hat_k"])[:1], str(row["perfect"]),
                  *cells(summary, row["mean_reward"], row["pass_hat_k"])[1:], *floor_cell(floor["groups"].get(g) if floor else None))
    overall = scores.get("overall")
    perfect = overall["perfect"] if overall else sum(r["perfect"] for r in rep["groups"].values())
    all_cells = cells(overall, rep["mean_reward"], rep["pass_hat_k"])
    t.add_row("all", str(rep["n_tasks"]), all_cells[0], str(perfect), *all_cells[1:], *floor_cell(floor), style="bold")
    if rep.get("excluded_groups"):
        t.caption += "; left out: " + ", ".join(f"{g} ({n} tasks)" for g, n in rep["excluded_groups"].items())
    return fit_table(t, "group", "mean [95% CI]")


def comparison_table(reports: list[dict[str, Any]]) -> Table:
    """Several evaluations on the same tasks: mean reward [95% CI], pass^k (intervals in the JSON), ended share,
    rollouts and time."""
    ks = sorted(reports[0]["pass_hat_k"], key=int)
    shown = [ks[0]] + ([ks[-1]] if len(ks) > 1 else [])
    t = compact_table(f"Comparison on {reports[0]['env_id']}")
    t.add_column("policy")
    t.add_column("mean [95% CI]", justify="right")
    for k in shown:
        t.add_column(f"pass^{k}", justify="right")
    t.add_column("ended", justify="right")
    t.add_column("rollouts", justify="right")
    t.add_column("wall s", justify="right")
    for r in reports:
        overall = _scores(r).get("overall")
        mean = _short(overall["mean"]) if overall else f"{r['mean_reward']:.3f}"
        ended = f"{overall['ended']:.0%}" if overall and "ended" in overall else "-"
        t.add_row(r["policy"], mean, *[f"{r['pass_hat_k'][k]['value']:.3f}" for k in shown], ended, str(r["rollouts"]),
                  f"{r['wall_s']:.0f}")
    floor = next((r["refusal_floor"] for r in reports if r.get("refusal_floor")), None)
    if floor:
        t.add_row("refusal floor", f"{floor['mean_reward']:.3f}", *["-" for _ in shown], "-", str(floor["rollouts"]), "-",
                  style="dim")
    return fit_table(t, "policy", "mean [95% CI]")


def paired_difference_table(reports: list[dict[str, Any]], *, seed: int = 0) -> Table | None:
    """Every report minus the first, per group of the first and overall, on the tasks both played: mean
    difference [95% paired bootstrap CI] and tasks better/worse/equal (``None`` for a single report)."""
    from .scores import paired_scores, paired_table

    rows = paired_table(paired_scores(reports, seed=seed), stacked=True)
    if not rows:
        return None
    t = compact_table("Paired differences on the same tasks")
    t.show_lines = True  # a row's cells span several lines
    for i, head in enumerate(rows[0]):
        t.add_column(head, justify="left" if i == 0 else "right")
    for r in rows[1:]:
        t.add_row(*r, style="bold" if r[0] == "overall" else None)
    t.caption = "mean reward difference, its [95% paired bootstrap CI over tasks], tasks better/worse/equal"
    return fit_table(t, rows[0][0])


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
