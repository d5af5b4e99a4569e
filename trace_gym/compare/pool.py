"""Several comparisons on disjoint held-out tasks, reported as one (cross-fitting).

A comparison learns on one split of the target and evaluates on another.  Run it once, then
again with the splits swapped (``trace_vs_baselines.py --swap``: ToolSandbox's ``fold_a`` and
``fold_b``), and every task of the target is held out exactly once: :func:`pool_runs` joins the
runs' per-task rewards into one evaluation per method, so the scores, the per-group paired
differences against the base model and their bootstrap intervals are over all the held-out
tasks together (each run's methods learned without seeing the tasks it is scored on).

Errors: :class:`ValueError` naming what differs when the runs cannot be joined (another target,
budget, trial count or configuration beyond the splits, a held-out task in two runs, a method
not in every run), or when fewer than two runs, or runs with no evaluated method, are given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..io import atomic_write_json, atomic_write_text
from .report import LABELS, oracle_text

__all__ = ["load_runs", "pool_runs", "pooled_markdown", "versus_table", "write_pooled", "BASELINES"]

BASELINES = ("grpo", "gepa")  # the methods TRACE is measured against (besides the base model)

_JOINED = ("rewards", "ended", "task_groups")
# configuration fields a run and its swap may differ in: where they learn and are scored, and where they write
_FREE = {"out", "train_split", "test_split", "train_tasks", "test_tasks", "methods", "batch_size"}


def load_runs(dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The ``compare.json`` of each folder (or each ``compare.json`` file given itself, e.g. a committed
    result); :class:`ValueError` naming a folder without one."""
    docs = []
    for d in dirs:
        path = Path(d) if Path(d).is_file() else Path(d) / "compare.json"
        if not path.is_file():
            raise ValueError(f"{d} holds no compare.json: run the comparison there first (or pass its --out folder)")
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("methods"), dict):
            raise ValueError(f"{path} is not a comparison's result (no methods)")
        docs.append(doc)
    return docs


def _same(docs: Sequence[dict[str, Any]], key: str) -> Any:
    values = [d.get(key) for d in docs]
    if any(v != values[0] for v in values):
        raise ValueError(f"the runs differ in {key} ({', '.join(map(str, values))}): pooling needs runs of one "
                         "configuration on different held-out tasks")
    return values[0]


def pool_runs(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"target", "budget", "trials", "runs": [held-out tasks per run], "methods": {method: pooled eval}}``.

    A pooled evaluation holds every run's per-task ``rewards``, ``ended`` and ``task_groups``,
    and the refusal floor's per-task rewards, so :func:`~trace_gym.eval.scores.graded_scores`
    and :func:`~trace_gym.eval.scores.paired_scores` read it as one evaluation.  Methods are
    those every run evaluated, in the first run's order.
    """
    if len(docs) < 2:
        raise ValueError(f"pooling needs at least two runs (got {len(docs)}): one per fold")
    target, budget = _same(docs, "target"), _same(docs, "budget")
    trials = _same([d.get("seeds") or {} for d in docs], "trials")
    configs = [{k: v for k, v in (d.get("config") or {}).items() if k not in _FREE} for d in docs]
    changed = sorted(k for c in configs for k in set(c) | set(configs[0]) if c.get(k) != configs[0].get(k))
    if changed:
        raise ValueError(f"the runs differ in {', '.join(dict.fromkeys(changed))}: pooling needs runs of one "
                         "configuration on different held-out tasks")
    evaluated = [{m for m, r in d["methods"].items() if (r.get("eval") or {}).get("rewards")} for d in docs]
    methods = [m for m in docs[0]["methods"] if all(m in e for e in evaluated)]
    if "base" in methods:  # the paired differences are against the base model
        methods = ["base", *[m for m in methods if m != "base"]]
    missing = sorted(set().union(*evaluated) - set(methods))
    if missing:
        raise ValueError(f"method(s) {', '.join(missing)} were evaluated in some runs only: rerun the others with "
                         "the same methods")
    if not methods:
        raise ValueError("no run holds an evaluated method: nothing to pool")
    held: list[list[str]] = []
    for d in docs:
        sets = {m: list(d["methods"][m]["eval"]["rewards"]) for m in methods}
        tasks = sets[methods[0]]
        odd = [m for m, ts in sets.items() if set(ts) != set(tasks)]
        if odd:
            raise ValueError(f"in one run, {', '.join(odd)} played other held-out tasks than {methods[0]}: each run's "
                             "methods must be scored on the same tasks")
        seen = {t for h in held for t in h}
        twice = sorted(seen.intersection(tasks))
        if twice:
            raise ValueError(f"{len(twice)} held-out task(s) are in two runs (e.g. {twice[0]!r}): pool runs whose "
                             "held-out splits are disjoint (a run and its --swap)")
        held.append(tasks)
    pooled: dict[str, Any] = {}
    for m in methods:
        ev: dict[str, Any] = {k: {} for k in _JOINED}
        floor: dict[str, Any] = {}
        for d in docs:
            src = d["methods"][m]["eval"]
            for k in _JOINED:
                ev[k].update(src.get(k) or {})
            floor.update((src.get("refusal_floor") or {}).get("rewards") or {})
        ev["refusal_floor"] = {"rewards": floor} if floor else None
        ev["spec"] = LABELS.get(m, m)
        pooled[m] = ev
    return {"target": target, "budget": budget, "trials": trials, "runs": held, "methods": pooled}


def pooled_markdown(pooled: dict[str, Any], *, seed: int = 0, sources: Sequence[str] = ()) -> str:
    """The pooled per-group scores and paired differences against the first method, as markdown."""
    from ..eval.scores import graded_scores, paired_scores, paired_table, scores_table

    named = {LABELS.get(m, m): graded_scores(ev, seed=seed) for m, ev in pooled["methods"].items()}
    n = sum(len(h) for h in pooled["runs"])
    where = f" ({', '.join(map(str, sources))})" if sources else ""
    trials = f", {pooled['trials']} trial(s) each" if pooled.get("trials") else ""
    out = [f"Target `{pooled['target']}`, budget B = {pooled['budget']} rollouts, {len(pooled['runs'])} runs{where} "
           f"on disjoint held-out tasks ({' + '.join(str(len(h)) for h in pooled['runs'])} = {n}){trials}, pooled.", ""]

    def table(rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])] + ["| " + " | ".join(r) + " |" for r in rows[1:]]

    if named:
        out += ["Per group: mean reward [95% CI] · perfect episodes / episodes, refusal floor beside them.", ""]
        out += table(scores_table(named, "group")) + [""]
    paired = paired_table(paired_scores(list(pooled["methods"].values()), seed=seed))
    if paired:
        out += ["Paired differences against the first method on the same tasks: mean reward difference "
                "[95% paired bootstrap CI] tasks better/worse/equal.", ""]
        out += table(paired) + [""]
    versus = versus_table(pooled["methods"], seed=seed)
    if versus:
        out += ["TRACE against each baseline on the same tasks: mean reward difference [95% paired bootstrap CI] "
                "tasks better/worse/equal.", ""]
        out += table(versus) + [""]
    return "\n".join(out) + oracle_text(pooled["methods"])


def versus_table(methods: dict[str, Any], *, method: str = "trace", against: Sequence[str] = BASELINES,
                 seed: int = 0) -> list[list[str]]:
    """Rows (header first) of ``method`` minus each method of ``against`` that was evaluated beside it, per group
    and overall (:func:`~trace_gym.eval.scores.paired_table`'s cells); empty when there is none to compare."""
    from ..eval.scores import paired_scores, paired_table

    if method not in methods:
        return []
    cols = {}
    for other in against:
        if other in methods:
            [diff] = paired_scores([methods[other], methods[method]], seed=seed).values()
            cols[LABELS.get(other, other)] = diff
    if not cols:
        return []
    rows = paired_table(cols)
    rows[0] = [rows[0][0], *[f"{LABELS.get(method, method)} − {name}" for name in cols]]
    return rows


def write_pooled(dirs: Sequence[str | Path], out: str | Path, *, seed: int | None = None) -> dict[str, Any]:
    """Pool the runs in ``dirs`` and write ``pooled.json`` and ``pooled.md`` in ``out`` (atomically); the
    bootstrap seed is the first run's evaluation seed unless given.  Returns the pooled document with its
    markdown under ``"markdown"``."""
    docs = load_runs(dirs)
    pooled = pool_runs(docs)
    if seed is None:
        seed = int((docs[0].get("seeds") or {}).get("eval_seed", 0) or 0)
    text = pooled_markdown(pooled, seed=seed, sources=[str(d) for d in dirs])
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(root / "pooled.json", {**pooled, "sources": [str(d) for d in dirs], "seed": seed})
    atomic_write_text(root / "pooled.md", text)
    return {**pooled, "markdown": text}
