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

__all__ = ["oracle_text", "warm_start_text", "table_rows", "markdown_table", "rich_table", "rich_scores_table", "scores_markdown", "ledger_markdown",
           "paired_rows", "paired_markdown", "rich_paired_table", "routing_markdown",
           "plot_methods", "render_outputs", "render_scaling", "plot_scaling", "redraw"]

LABELS = {"base": "base", "grpo": "GRPO on target", "gepa": "GEPA", "trace": "TRACE (routed)",
          "classifier": "TRACE, classifier router", "single": "single capability adapter",
          "joint": "joint adapter (no routing)", "oracle": "oracle (reference)", "ideal": "ideal need gate (reference)"}
SHORT = {"GRPO on target": "GRPO", "TRACE (routed)": "TRACE", "single capability adapter": "single adapter",
         "joint adapter (no routing)": "joint", "oracle (reference)": "oracle", "TRACE, classifier router": "classifier",
         "ideal need gate (reference)": "ideal"}  # terminal heads


def oracle_text(methods: Any) -> str:
    """The note under a table with the oracle row (empty without one)."""
    if "oracle" not in methods and LABELS["oracle"] not in methods:
        return ""
    return ("\n\nThe oracle row is an upper reference, not a method: per held-out task it takes the better of the base "
            "model and each TRACE adapter forced on that task, chosen with the held-out rewards themselves; "
            "oracle − base bounds what routing between them could add.\n")


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
            "scores": ev.get("scores"),
        })
    return rows


def _scores(doc: dict[str, Any]) -> dict[str, Any]:
    return {r["method"]: r["scores"] for r in table_rows(doc) if r.get("scores")}


def scores_markdown(doc: dict[str, Any]) -> str:
    """Per report group (a ToolSandbox category): mean reward [95% CI] · perfect/episodes of each method, and
    the refusal floor of the same tasks (empty when the evaluations carry no graded scores)."""
    from ..eval.scores import scores_table

    named = _scores(doc)
    if not named:
        return ""
    rows = scores_table(named, "group")
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return ("\n\nPer group on the held-out tasks: mean reward [95% CI] · perfect (reward 1) episodes / episodes; "
            "refusal floor: mean reward · perfect / tasks of an agent that refuses everything.\n\n" + "\n".join(lines) + "\n")


def paired_rows(doc: dict[str, Any]) -> list[list[str]]:
    """Every method minus the base model (the first method), per report group and overall, on the held-out
    tasks both played: mean reward difference [95% paired bootstrap CI] better/worse/equal (header first)."""
    from ..eval.scores import paired_scores, paired_table

    evals = [{**r["eval"], "spec": LABELS.get(m, m)} for m, r in doc["methods"].items() if r.get("eval", {}).get("rewards")]
    return paired_table(paired_scores(evals, seed=_paired_seed(doc)))


def _paired_seed(doc: dict[str, Any]) -> int:
    """The bootstrap seed of the paired intervals: the comparison's evaluation seed (the same in every output)."""
    return int((doc.get("seeds") or {}).get("eval_seed", 0) or 0)


def paired_markdown(doc: dict[str, Any]) -> str:
    rows = paired_rows(doc)
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return ("\n\nPaired differences against the first method on the same held-out tasks: mean reward difference "
            "[95% paired bootstrap CI] tasks better/worse/equal.\n\n" + "\n".join(lines) + "\n" + oracle_text(doc["methods"]))


def rich_paired_table(doc: dict[str, Any]):
    """The paired differences against the base model for a terminal: per group and overall, each method's mean
    difference with its interval over three lines and tasks better/worse/equal (:func:`paired_rows` stacked);
    ``None`` with fewer than two evaluated methods."""
    from ..eval.scores import paired_scores, paired_table
    from ..render import compact_table, fit_table

    evals = [{**r["eval"], "spec": LABELS.get(m, m)} for m, r in doc["methods"].items() if r.get("eval", {}).get("rewards")]
    rows = paired_table(paired_scores(evals, seed=_paired_seed(doc)), stacked=True)
    if not rows:
        return None
    note = ("mean difference, its [95% paired bootstrap CI], tasks better/worse/equal"
            + ("; oracle: an upper reference, not a method" if "oracle" in doc["methods"] else ""))
    tables = []
    for cols in _column_chunks(len(rows[0]) - 1, PAIRED_COLUMNS):
        t = compact_table("paired differences against the base model on the same tasks", note)
        t.show_lines = True
        t.add_column(rows[0][0])
        for i in cols:
            t.add_column(_short_label(rows[0][1 + i].split(" − ")[0]), justify="right")
        for r in rows[1:]:
            t.add_row(r[0], *(r[1 + i] for i in cols), style="bold" if r[0] == "overall" else None)
        tables.append(fit_table(t, rows[0][0]))
    return _stack(tables)


# at most this many value columns per terminal table (more are split over several tables, so each fits 80 columns)
SCORE_COLUMNS = 5
PAIRED_COLUMNS = 4


def _column_chunks(n: int, size: int) -> list[list[int]]:
    """``range(n)`` in balanced consecutive chunks of at most ``size``."""
    parts = max(1, -(-n // size))
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(parts)]


def _stack(tables: list[Any]) -> Any:
    """One table as itself, several one under the other."""
    if len(tables) == 1:
        return tables[0]
    from rich.console import Group

    return Group(*tables)


def routing_markdown(doc: dict[str, Any]) -> str:
    """Where TRACE's router sent the held-out tasks (columns) against the analysis labels of the base model's
    episodes on them (rows); empty when the comparison has none."""
    rep = (doc.get("details", {}).get("trace") or {}).get("held_out_routing")
    if not rep or not rep.get("n"):
        return ""
    cols = sorted({c for row in rep["confusion"].values() for c in row} | set(rep["confusion"]))
    lines = ["| analysis label | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for truth in sorted(rep["confusion"]):
        lines.append(f"| {truth} | " + " | ".join(str(rep["confusion"][truth].get(c, 0)) for c in cols) + " |")
    train = (doc.get("details", {}).get("trace") or {}).get("routing") or {}
    loo = (f" On its {train['n']} train episodes, each routed with its own example left out of the index, "
           f"{train['loo_correct']}/{train['n']} agree (with the index whole: {train.get('correct')}/{train['n']})."
           if train.get("loo_correct") is not None and train.get("n") else "")
    rule = f" (rule `{train['rule']}`)" if train.get("rule") and train["rule"] != "vote" else ""
    return (f"\n\nTRACE's routing{rule} of the {rep['n']} held-out tasks: the analysis label of the base model's episode "
            f"(rows) against the adapter the router chose (columns); {rep['correct']}/{rep['n']} agree.{loo}\n\n"
            + "\n".join(lines) + "\n" + gate_markdown(doc) + outcomes_markdown(train))


def gate_markdown(doc: dict[str, Any]) -> str:
    """The needs rule's gate: how it was calibrated on the learning tasks, what it chose between per-capability
    adapters and the joint one, and (a diagnostic, after the fact) how it judged the held-out tasks."""
    trace = doc.get("details", {}).get("trace") or {}
    routing = trace.get("routing") or {}
    cal = (routing.get("gate") or {}).get("calibration")
    if not cal:
        return ""
    out = [f"\nThe need gate, calibrated on the {cal['n']} learning tasks (each left out in turn): {cal['correct']}/{cal['n']} "
           f"right, {cal['missed_refusals']} refusal(s) missed, {cal['false_refusals']} answerable task(s) kept for the "
           f"base model (need threshold {cal['need_threshold']}, refusal threshold {cal['refusal_threshold']}, examples "
           f"{'+'.join(cal['origins'])})."]
    sel = routing.get("selection") or {}
    if sel.get("n"):
        means = ", ".join(f"{k} {v:.3f}" for k, v in sel["mean"].items())
        out.append(f"Adapters: {sel['choice']} (on {sel['n']} learning tasks the gate passes, mean reward {means}; "
                   f"{sel['rollouts']} rollouts in the routing row of the ledger).")
    elif routing.get("adapters_choice"):
        out.append(f"Adapters: {routing['adapters_choice']}.")
    held = trace.get("held_out_gate")
    if held and held.get("n"):
        out.append(f"On the {held['n']} held-out tasks (a diagnostic, after the fact): {held['correct']}/{held['n']} right; "
                   f"{held['caught']}/{held['refusals']} insufficient-information tasks kept for the base model, "
                   f"{held['false_refusals']}/{held['answerable']} answerable ones kept too.")
    return " ".join(out) + "\n"


def outcomes_markdown(routing: dict[str, Any]) -> str:
    """Routing learned from outcomes: per train scenario the reward of each source and the label it gave the
    router; empty without such scenarios."""
    rows = routing.get("outcomes") or []
    if not rows:
        return ""
    sources = list(rows[0]["rewards"])
    lines = ["| train scenario | " + " | ".join(sources) + " | label |", "|" + "---|" * (len(sources) + 2)]
    for r in rows:
        lines.append(f"| {r['task']} | " + " | ".join(f"{r['rewards'][s]:.2f}" for s in sources) + f" | {r['label']} |")
    won = sum(r["label"] != sources[0] for r in rows)
    return (f"\nRouting learned from outcomes: each adapter played {len(rows)} of the base model's train scenarios "
            f"({routing.get('outcome_rollouts', 0)} rollouts, in the routing row of the ledger); an adapter scored "
            f"higher than the base model on {won} (ties go to the base model). A held-out conversation near one of "
            "them goes to its label, any other one by the rule.\n\n" + "\n".join(lines) + "\n")


def ledger_markdown(doc: dict[str, Any]) -> str:
    """The rollout budget ledger: what each method spent, by stage."""
    lines = []
    for method, r in doc["methods"].items():
        details = doc.get("details", {}).get(method) or {}
        ledger = details.get("budget") or {}
        stages = ", ".join(f"{k} {v}" for k, v in (ledger.get("by_stage") or {}).items()) or "–"
        demos = sum(int(a.get("demonstrations") or 0) for a in details.get("adapters") or [])
        if demos:
            stages += f" ({demos} of them reference episodes of the capability envs, for the adapters' SFT warm start)"
        rehearsed = sum(int(a.get("rehearsed") or 0) for a in details.get("adapters") or [])
        own = sum(int(a.get("rehearsed_base") or 0) for a in details.get("adapters") or [])
        peers = sum(int(a.get("rehearsed_peers") or 0) for a in details.get("adapters") or [])
        if rehearsed:
            kinds = [f"{own} of them the base model's own successful train episodes"] if own else []
            kinds += [f"{peers} the other adapters' demonstrations (charged in their stages)"] if peers else []
            kinds += [f"{rehearsed - own - peers} of the shared warm start"] if rehearsed - own - peers else []
            stages += f"; the adapters also rehearsed {rehearsed} episodes (not charged again): {', '.join(kinds)}"
        if method == "joint" and details.get("replayed") is not None:
            from .reference import joint_ledger_text

            stages = joint_ledger_text(details)
        elif method == "oracle":
            stages = "TRACE's adapters, each evaluated forced on every held-out task (evaluation, not counted)"
        lines.append(f"| {LABELS.get(method, method)} | {r['rollouts']} | {r['budget']} | {stages} |")
    if not lines:
        return ""
    ws = doc.get("warm_start")
    if ws:
        lines.append(f"| shared: format warm start | 0 | – | {warm_start_text(ws)} |")
    return ("\n\nRollout budget ledger (episodes played while learning; evaluation not counted):\n\n"
            "| method | rollouts | budget | by stage |\n|---|---|---|---|\n" + "\n".join(lines) + "\n")


def warm_start_text(ws: dict[str, Any]) -> str:
    """One line on the shared warm start: what it trained on and what it cost (given to every method alike)."""
    return (f"{ws['demonstrations']} reference episodes of {len(ws['envs'])} capability env(s) (train split, not the "
            f"evaluation scenarios), {ws['steps']} SFT steps, {ws['seconds']:.0f} s, merged into the weights every "
            "method starts from; no target episode")


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
    return (head + "\n".join(lines) + "\n" + scores_markdown(doc) + paired_markdown(doc) + routing_markdown(doc)
            + ledger_markdown(doc) + tail)


def rich_table(doc: dict[str, Any]):
    """One row per method for a terminal: rollouts, pass^1 and (with graded scores) the mean reward, each with
    its interval over three lines (:func:`trace_gym.render.ci_cell`), pass^k, train and eval seconds."""
    from ..render import ci_cell, compact_table, fit_table

    rows = table_rows(doc)
    k = rows[0]["k"] if rows else 1
    graded = any(r.get("scores") for r in rows)
    t = compact_table(f"{doc['target']} at B = {doc['budget']} rollouts")
    t.show_lines = True
    cols = ("method", "rollouts", "pass^1 [95% CI]", *((f"pass^{k}",) if k > 1 else ()),
            "mean [95% CI]" if graded else "mean", "train s", "eval s")
    for c in cols:
        t.add_column(c, justify="left" if c == "method" else "right")
    for r in rows:
        p1 = r["pass1"]
        overall = (r.get("scores") or {}).get("overall")
        mean = ci_cell(overall["mean"]["value"], overall["mean"]["low"], overall["mean"]["high"]) if overall \
            else f"{r['mean_reward']:.3f}"
        t.add_row(r["label"], str(r["rollouts"]), ci_cell(p1["value"], p1["low"], p1["high"]),
                  *((f"{r['pass_k'][str(k)]['value']:.3f}",) if k > 1 else ()),
                  mean, f"{r['train_wall_s']:.0f}", f"{r['eval_wall_s']:.0f}")
    return fit_table(t, "method", "rollouts", "train s", "eval s")


def _short_label(name: str) -> str:
    """A method's column head in a terminal table: a method key or its label, shortened."""
    label = LABELS.get(name, name)
    return SHORT.get(label, label)


def rich_scores_table(doc: dict[str, Any]):
    """The per-group scores of :func:`scores_markdown` as a terminal table: the mean reward of each method with
    its interval over three lines, and the refusal floor (perfect counts and ended shares are in
    ``compare.md``); ``None`` without graded scores."""
    from ..render import ci_cell, compact_table, fit_table

    named = _scores(doc)
    if not named:
        return None
    names = list(named)
    groups = sorted({g for sc in named.values() for g in sc["groups"]})
    floors: dict[str, str] = {}
    for g in [*groups, "overall"]:
        for n in names:
            sc = named[n]["overall"] if g == "overall" else named[n]["groups"].get(g)
            if sc and "floor" in sc:
                floors[g] = f"{sc['floor']['mean']:.3f}"
    chunks = _column_chunks(len(names), SCORE_COLUMNS)
    tables = []
    for k, cols in enumerate(chunks):
        last = k == len(chunks) - 1
        t = compact_table("per group: mean reward [95% CI] (perfect counts, ended shares in compare.md)",
                          "floor: the mean reward of an agent that refuses everything" if last else None)
        t.show_lines = True
        t.add_column("group")
        for i in cols:
            t.add_column(_short_label(names[i]), justify="right")
        if last:
            t.add_column("floor", justify="right")
        for g in [*groups, "overall"]:
            cells = []
            for i in cols:
                sc = named[names[i]]["overall"] if g == "overall" else named[names[i]]["groups"].get(g)
                cells.append(ci_cell(sc["mean"]["value"], sc["mean"]["low"], sc["mean"]["high"]) if sc else "–")
            t.add_row(g, *cells, *([floors.get(g, "–")] if last else []), style="bold" if g == "overall" else None)
        tables.append(fit_table(t, "group"))
    return _stack(tables)


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
    import textwrap

    fig, ax = plt.subplots(figsize=(max(7.0, 1.05 * len(rows)), 4))  # room for every method's label
    xs = list(range(len(rows)))
    vals = [r["pass1"]["value"] for r in rows]
    err = [[v - r["pass1"]["low"] for v, r in zip(vals, rows, strict=True)], [r["pass1"]["high"] - v for v, r in zip(vals, rows, strict=True)]]
    ax.bar(xs, vals, yerr=err, capsize=4, color="#4c72b0")
    for x, r in zip(xs, rows, strict=True):  # the value is printed, so a score of 0 is visible too
        ax.text(x, min(0.97, r["pass1"]["high"] + 0.02), f"{r['pass1']['value']:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, ["\n".join(textwrap.wrap(r["label"], 14)) + f"\n({r['rollouts']} rollouts)" for r in rows], fontsize=8)
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
