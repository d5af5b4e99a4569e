"""``trace-gym rollout ENV_ID --policy SPEC --seeds 0-9 --out FILE``: collect trajectories, resumably."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "parse_seeds"]


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"3"``, ``"0,2,5-7"`` to a list of seeds (in order, without repeats)."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"bad seed range {part!r}: use N, A-B (A <= B) or a comma-separated mix") from None
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return list(dict.fromkeys(seeds))


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.policies import SPEC_HELP

    p = sub.add_parser("rollout", help="run a policy over many seeds and append trajectories to a JSONL file")
    p.add_argument("env_id", help="environment id (see `trace-gym envs`); MODULE:ID imports MODULE first")
    p.add_argument("--policy", required=True, metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--seeds", default="0", help="seeds: N, A-B or a comma-separated mix (default 0)")
    p.add_argument("--out", required=True, metavar="FILE", help="trajectory JSONL file (appended to; stored seeds are skipped)")
    p.add_argument("--no-resume", action="store_true", help="play every seed even if it is already in --out")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="reset option (repeatable)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="keyword argument for gym.make (repeatable)")
    p.add_argument("--batch-size", type=int, default=1, help="episodes played in lock step (batched generation)")
    p.add_argument("--max-new-tokens", type=int, help="generation limit per action (model policies)")
    p.add_argument("--temperature", type=float, help="sampling temperature (model policies)")
    p.add_argument("--greedy", action="store_true", help="greedy decoding (model policies)")
    p.add_argument("--policy-seed", type=int, help="sampling seed (model policies)")
    p.add_argument("--device", help="torch device for hf:/smollm2 policies (default: cuda if available, else cpu)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    import trace_gym  # noqa: F401  (registers the trace/* ids)
    from trace_gym.cli.play import parse_options
    from trace_gym.policies import PolicyError, policy_from_spec
    from trace_gym.rollout import RolloutError, TrajectoryStore, TrajectoryStoreError, collect

    err = Console(stderr=True, soft_wrap=True)
    try:
        seeds = parse_seeds(args.seeds)
        options = parse_options(args.option) or None
        env_kwargs = parse_options(args.env_arg, "--env-arg")
        if args.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    policy_opts: dict[str, Any] = {
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "greedy": args.greedy or None,
        "seed": args.policy_seed,
        "device": args.device,
        # Let a model policy answer a whole lock-step batch in one forward pass.
        "batch_size": args.batch_size if args.batch_size > 1 else None,
    }
    try:
        policy = policy_from_spec(args.policy, **policy_opts)
    except (ValueError, FileNotFoundError, PolicyError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    store = TrajectoryStore(args.out)
    try:
        stored = len(store) if store.path.exists() else 0
    except TrajectoryStoreError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    rewards: list[float] = []
    skipped: list[int] = []
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("mean reward {task.fields[mean]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task(args.env_id, total=len(seeds), mean="-")

        def on_episode(t: Any) -> None:
            rewards.append(t.reward)
            progress.update(task, advance=1, mean=f"{sum(rewards) / len(rewards):.3f}")

        def on_skip(seed: int) -> None:
            skipped.append(seed)
            progress.update(task, advance=1)

        try:
            collect(
                args.env_id,
                policy,
                seeds,
                store=store,
                options=options,
                env_kwargs=env_kwargs,
                batch_size=args.batch_size,
                resume=not args.no_resume,
                on_episode=on_episode,
                on_skip=on_skip,
            )
        except RolloutError as exc:
            progress.stop()
            err.print(f"[red]error:[/red] {exc}")
            err.print(f"{len(rewards)} new episodes were saved to {args.out}; run the same command again to resume")
            return 1
        except PolicyError as exc:
            progress.stop()
            err.print(f"[red]error:[/red] {exc}")
            return 1
    summary = {
        "env_id": args.env_id,
        "policy_id": policy.policy_id,
        "out": args.out,
        "new_episodes": len(rewards),
        "skipped_already_stored": len(skipped),
        "stored_before": stored,
        "mean_reward_new": (sum(rewards) / len(rewards)) if rewards else None,
    }
    print(json.dumps(summary))
    return 0
