"""``trace-gym analyze TRAJECTORIES.jsonl``: find the capabilities whose absence explains failures."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="label trajectories and select the capabilities the agent lacks")
    p.add_argument("trajectories", help="a trajectory store (.jsonl) written by `trace-gym rollout`")
    p.add_argument("--labeler", choices=["offline", "llm"], default="offline",
                   help="offline: derive labels from gold actions (τ²-bench); llm: ask a model")
    p.add_argument("--runs", type=int, default=None, help="independent labeling runs N (default: 1 offline, 10 llm)")
    p.add_argument("--out", default="runs/analysis", help="output folder (capabilities.json, labels/, capabilities.png)")
    p.add_argument("--rho", type=float, default=0.10, help="minimum coverage ρ (default 0.10)")
    p.add_argument("--delta", type=float, default=0.20, help="minimum contrastive gap δ (default 0.20)")
    p.add_argument("--k", type=int, default=None, help="runs a capability must pass (default: 80%% of N)")
    p.add_argument("--success", type=float, default=1.0, help="reward at or above which a trajectory passed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--capabilities", default=None,
                   help="'taxonomy' (built-in), 'discover' (one LLM discovery pass), or a JSON file of capabilities")
    p.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL for --labeler llm (e.g. http://127.0.0.1:8000/v1)")
    p.add_argument("--model", default=None, help="model name at the endpoint")
    p.add_argument("--cassette", default=None, help="record/replay LLM answers in this JSONL file")
    p.add_argument("--replay", action="store_true", help="with --cassette: replay only (no endpoint needed)")
    p.set_defaults(func=_run)


def _client(args):
    from trace_gym.llm import CassetteClient, OpenAIChatClient

    inner = None
    if args.endpoint:
        inner = OpenAIChatClient(args.endpoint, args.model or "default")
    if args.cassette:
        return CassetteClient(args.cassette, "replay" if args.replay else "record", inner, model=args.model)
    if inner is None:
        raise SystemExit("--labeler llm needs --endpoint URL --model NAME (or --cassette FILE --replay)")
    return inner


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from trace_gym.analysis.aggregate import Thresholds
    from trace_gym.analysis.labelers import GoldLabeler
    from trace_gym.analysis.labelers.llm import LLMLabeler, discover_capabilities
    from trace_gym.analysis.labels import Capability
    from trace_gym.analysis.pipeline import items_from_trajectories, run_analysis
    from trace_gym.analysis.report import capabilities_table, plot_capabilities
    from trace_gym.analysis.taxonomy import TAXONOMY
    from trace_gym.cli import UsageError, check_count, input_file
    from trace_gym.io import atomic_write_json
    from trace_gym.rollout import TrajectoryStore

    console = Console()
    check_count("--runs", args.runs, high=1000)
    runs = args.runs if args.runs is not None else (1 if args.labeler == "offline" else 10)
    check_count("--k", args.k, high=runs)
    k = args.k if args.k is not None else max(1, round(0.8 * runs))
    thresholds = Thresholds(rho=args.rho, delta=args.delta, k=k, success=args.success)
    input_file(args.trajectories, "trajectory file", " (write one with `trace-gym rollout`)")
    trajs = list(TrajectoryStore(args.trajectories).load())
    if not trajs:
        raise UsageError(f"{args.trajectories}: no trajectories")
    items = items_from_trajectories(trajs)
    out = Path(args.out)
    labeler = GoldLabeler() if args.labeler == "offline" else LLMLabeler(_client(args))
    source = args.capabilities or ("taxonomy" if args.labeler == "offline" else "discover")
    if source == "taxonomy":
        caps = list(TAXONOMY)
    elif source == "discover":
        disc = out / "discovery.json"
        if disc.exists():
            caps = [Capability.from_dict(c) for c in json.loads(disc.read_text())["capabilities"]]
            console.print(f"discovery: reusing {disc}")
        else:
            caps, bad = discover_capabilities(_client(args), items, seed=args.seed)
            atomic_write_json(disc, {"capabilities": [c.to_dict() for c in caps], "malformed": bad})
    else:
        caps = [Capability.from_dict(c) for c in json.loads(Path(source).read_text())]
    with Progress(console=console) as progress:
        task = progress.add_task(f"labeling ({labeler.name})", total=runs)

        def on_run(r: int, resumed: bool) -> None:
            progress.update(task, advance=1, description=f"labeling ({labeler.name}) run {r}{' (stored)' if resumed else ''}")

        result, doc = run_analysis(args.trajectories, out, labeler, caps, runs=runs, thresholds=thresholds,
                                   seed=args.seed, items=items, on_run=on_run)
    console.print(capabilities_table(doc))
    png = plot_capabilities(doc, out / "capabilities.png")
    if sum(doc["malformed"]):
        console.print(f"[yellow]malformed labeler answers per run: {doc['malformed']}; unlabeled pairs: {doc['unlabeled']}[/yellow]")
    console.print(f"selected: {', '.join(result.selected) or '(none)'}")
    console.print(f"wrote {out / 'capabilities.json'}" + (f" and {png}" if png else ""))
    return 0
