"""``trace-gym compare``: TRACE vs GRPO-on-target vs GEPA (and the base model) at an equal rollout budget.

Writes ``compare.json`` (everything needed to redraw), ``compare.md`` and
``compare.png`` under ``--out``; with ``--budgets`` one run per budget under
``<out>/B<budget>/`` plus ``scaling.json``/``scaling.md``/``scaling.png``.  A killed run
continues where it stopped when started again with the same arguments.
``--redraw DIR`` rebuilds the table and plot from the stored JSON only.  ``--pool DIR DIR ...``
reports runs on disjoint held-out tasks (a run and its swapped folds) as one evaluation:
``pooled.md``/``pooled.json`` under ``--out`` (:mod:`trace_gym.compare.pool`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="TRACE vs GRPO and GEPA baselines at an equal rollout budget")
    p.add_argument("--target", default=None,
                   help="target env id (default trace/tau2-retail-v0; e.g. trace/toolsandbox-v0), or 'auto' with --survey")
    p.add_argument("--success", type=float, default=None,
                   help="reward that counts as success on the target (default: the env's own; e.g. 0.7 for ToolSandbox's "
                        "milestone similarity, whose perfect count is reported beside it)")
    p.add_argument("--model", default=None, help="tiny | smollm2 | hf:NAME | a model folder | openai:URL#MODEL (no training)")
    p.add_argument("--budget", type=int, default=None, help="rollout budget B per method (default 64)")
    p.add_argument("--budgets", default=None, help="scaling mode: comma-separated budgets, e.g. 16,32,64")
    p.add_argument("--trials", type=int, default=None, help="trials K per held-out task (default 2)")
    p.add_argument("--methods", default=None, help="comma-separated subset of base,grpo,gepa,trace,single and the reference rows joint,oracle")
    p.add_argument("--out", default=None, help="output folder (default runs/compare)")
    p.add_argument("--n-train-tasks", type=int, default=None, help="use the first N train tasks (seeded order)")
    p.add_argument("--n-test-tasks", type=int, default=None, help="evaluate on the first N held-out tasks")
    p.add_argument("--seed", type=int, default=None,
                   help="the one seed of the whole pipeline: warm start, rollouts, synthesis, calibration, training, "
                        "routing and evaluation sampling (default 0)")
    p.add_argument("--eval-seed", type=int, default=None, help="seed of trial 0 on the held-out tasks (default seed + 1000)")
    p.add_argument("--survey", default=None, metavar="DOMAINS",
                   help="first report base success per τ² domain and split, e.g. retail,airline,telecom")
    p.add_argument("--survey-tasks", type=int, default=None, help="tasks per domain and split in the survey (default 5)")
    p.add_argument("--reflection", default=None, help="GEPA's reflection model as a policy spec (default: the base model)")
    p.add_argument("--max-train-steps", type=int, default=None, help="cap on optimizer steps per trained adapter")
    p.add_argument("--batch-size", type=int, default=None, help="episodes played in lock step during evaluation")
    p.add_argument("--env", action="append", metavar="KEY=VALUE", help="target env kwarg (repeatable), e.g. max_steps=30")
    p.add_argument("--cap-env", action="append", metavar="KEY=VALUE", help="capability env kwarg (repeatable)")
    p.add_argument("--gen", action="append", metavar="KEY=VALUE", help="generation setting (max_new_tokens, temperature, ...)")
    p.add_argument("--train", action="append", metavar="KEY=VALUE", help="trainer setting (num_generations, learning_rate, ...)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="any other compare config field")
    p.add_argument("--config", default=None, help="a JSON or YAML file of compare config fields (flags override it)")
    p.add_argument("--redraw", default=None, metavar="DIR", help="only rebuild the table and plot from DIR's JSON")
    p.add_argument("--pool", nargs="+", default=None, metavar="DIR",
                   help="only pool the finished runs in these folders, or their compare.json files (disjoint "
                        "held-out tasks, e.g. a run and its swapped folds), into one report under --out")
    p.set_defaults(func=_run)


def _kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise ValueError(f"{flag} {key}: cannot parse {raw!r}: {exc}") from None
    return out


# Keys --gen and --train accept (generation settings of the base policy; TrainConfig fields).
GEN_KEYS = ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "batch_size")


def _check_keys(flag: str, given: dict[str, Any]) -> None:
    if flag == "--gen":
        known: tuple[str, ...] = GEN_KEYS
    elif flag == "--train":
        from trace_gym.train.config import TrainConfig

        known = tuple(TrainConfig.field_names())
    else:
        return
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"{flag}: unknown key(s) {unknown}; known: {', '.join(known)}")


def _first_line(exc: Exception) -> str:
    return next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)


def build_config(args: argparse.Namespace):
    """The :class:`~trace_gym.compare.pipeline.CompareConfig` the flags describe (run by :mod:`trace_gym.pipeline`)."""
    import yaml

    from trace_gym.cli import input_file
    from trace_gym.compare.pipeline import CompareConfig

    data: dict[str, Any] = {}
    if args.config:
        try:
            text = input_file(args.config, "config file").read_text(encoding="utf-8")
            data = json.loads(text) if args.config.endswith(".json") else (yaml.safe_load(text) or {})
        except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ValueError(f"--config {args.config}: not valid {'JSON' if args.config.endswith('.json') else 'YAML'}: "
                             f"{_first_line(exc)}") from None
        if not isinstance(data, dict):
            raise ValueError(f"--config {args.config}: expected a mapping of config fields")
    simple = {"target": args.target, "model": args.model, "budget": args.budget, "trials": args.trials, "out": args.out,
              "n_train_tasks": args.n_train_tasks, "n_test_tasks": args.n_test_tasks, "seed": args.seed,
              "eval_seed": args.eval_seed, "survey_tasks": args.survey_tasks, "reflection": args.reflection,
              "max_train_steps": args.max_train_steps, "batch_size": args.batch_size, "success": args.success}
    data.update({k: v for k, v in simple.items() if v is not None})
    if args.methods:
        data["methods"] = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.survey:
        data["survey_domains"] = [d.strip() for d in args.survey.split(",") if d.strip()]
    for flag, attr, name in (("--env", "env", "env_kwargs"), ("--cap-env", "cap_env", "cap_env_kwargs"),
                             ("--gen", "gen", "gen"), ("--train", "train", "train")):
        extra = _kv(getattr(args, attr), flag)
        _check_keys(flag, extra)
        if extra:
            base = dict(data.get(name) or getattr(CompareConfig(), name))
            base.update(extra)
            data[name] = base
    data.update(_kv(args.set, "--set"))
    return CompareConfig.from_dict(data).validate()


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    err = Console(stderr=True, soft_wrap=True)
    if args.redraw:
        from trace_gym.compare.report import redraw

        try:
            paths = redraw(args.redraw)
        except (OSError, ValueError, KeyError) as exc:
            err.print(f"[red]error:[/red] cannot redraw from {args.redraw}: {exc}")
            return 2
        console.print(f"wrote {paths['markdown']}" + (f" and {paths['plot']}" if paths["plot"] else ""))
        return 0
    if args.pool:
        from trace_gym.compare.pool import write_pooled

        out = args.out or "runs/compare-pooled"
        try:
            doc = write_pooled(args.pool, out)
        except (OSError, ValueError, KeyError) as exc:
            err.print(f"[red]error:[/red] cannot pool {', '.join(args.pool)}: {exc}")
            return 2
        print(doc["markdown"])  # markdown tables, unwrapped
        print(f"wrote {Path(out) / 'pooled.md'} and {Path(out) / 'pooled.json'}")
        return 0
    try:
        cfg = build_config(args)
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()] if args.budgets else None
    except (ValueError, TypeError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2

    from trace_gym.cli import removing_empty_output
    from trace_gym.compare.pipeline import run_compare, run_scaling
    from trace_gym.compare.report import rich_paired_table, rich_scores_table, rich_table
    from trace_gym.progress import reporting

    def log(msg: str) -> None:
        err.print(f"[dim]{msg}[/dim]")

    try:
        # every stage that plays episodes or trains shows a progress line on stderr
        with removing_empty_output(cfg.out), reporting(err):
            doc = run_scaling(cfg, budgets, log=log) if budgets else run_compare(cfg, log=log)
        if budgets:
            for run in doc["runs"]:
                console.print(rich_table({"target": doc["target"], "budget": run["budget"], "methods": run["methods"]}))
            console.print(f"wrote {Path(cfg.out) / 'scaling.json'}, scaling.md and scaling.png")
        else:
            console.print(rich_table(doc))
            per_group = rich_scores_table(doc)
            if per_group is not None:
                console.print(per_group)
            paired = rich_paired_table(doc)
            if paired is not None:
                console.print(paired)
            if doc.get("warm_start"):
                from trace_gym.compare.report import warm_start_text

                console.print(f"shared by every method: format warm start, {warm_start_text(doc['warm_start'])}",
                              highlight=False)
            console.print(f"wrote {Path(cfg.out) / 'compare.json'}, compare.md and compare.png")
    except (ValueError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/red] {type(exc).__name__}: {exc}")
        return 1
    return 0
