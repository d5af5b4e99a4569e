"""``trace-gym rollout ENV_ID --policy SPEC --seeds 0-9 --out FILE``: collect trajectories, resumably.

With ``--run DIR`` it is the first stage of a run (:mod:`trace_gym.cli.runs`): the model plays the tasks
of a split and the run folder records the target and the model for every later verb.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trace_gym.cli import MAX_EPISODES
from trace_gym.cli.runs import RUN_HELP

__all__ = ["register", "parse_seeds"]

DESCRIPTION = """Play a policy on an environment and store every episode.

reads:  nothing but the env (and the policy's model or script)
writes: --out FILE  one trajectory per line (appended; seeds already stored are skipped: a rerun resumes)
        --run DIR   the first stage of a run: the policy plays the tasks of --split (default train;
                    --per-group N: the first N of each report group), each with every --seeds seed.
                    DIR/run.json     the target (env id, --env-arg kwargs, --success) and the policy with
                                     its generation options, which every later verb of the run uses
                    DIR/rollouts.jsonl        the episodes (a rerun plays only the missing ones)
                    DIR/stages/rollouts.json  the stage's result
next:   trace-gym analyze --run DIR
"""


def parse_seeds(text: str, limit: int = MAX_EPISODES) -> list[int]:
    """``"0-9"``, ``"3"``, ``"0,2,5-7"`` to a list of seeds (in order, without repeats); more than
    ``limit`` seeds is refused before any list is built."""
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
            else:
                a = b = int(part)
        except ValueError:
            raise ValueError(f"bad seed range {part!r}: use N, A-B (A <= B) or a comma-separated mix") from None
        if len(seeds) + (b - a + 1) > limit:
            raise ValueError(f"--seeds {text} holds more than {limit:,} seeds, more than one command plays; split the run")
        seeds.extend(range(a, b + 1))
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return list(dict.fromkeys(seeds))


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.policies import SPEC_HELP

    p = sub.add_parser("rollout", help="1. play a policy on an env: episodes into a JSONL file, or the first stage of a run",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env_id", help="environment id (see `trace-gym envs`); MODULE:ID imports MODULE first")
    p.add_argument("--policy", required=True, metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--seeds", default="0", help="seeds: N, A-B or a comma-separated mix (default 0); with --run, the "
                   "seeds each task is played with")
    p.add_argument("--out", metavar="FILE", help="trajectory JSONL file (appended to; stored seeds are skipped)")
    p.add_argument("--run", metavar="DIR", help=RUN_HELP)
    p.add_argument("--split", default=None, help="with --run: the split whose tasks are played (default train)")
    p.add_argument("--per-group", type=int, default=None, metavar="N",
                   help="with --run: the first N tasks of each report group of the split (a sample with every kind)")
    p.add_argument("--limit", type=int, default=None, help="with --run: only the first N tasks")
    p.add_argument("--tasks", default=None, help="with --run: comma-separated task ids instead of the split")
    p.add_argument("--success", type=float, default=None,
                   help="with --run: the reward that counts as success in this run, for the analysis, the router and "
                        "pass^k (default: the env's own; e.g. 0.7 for ToolSandbox's graded milestone similarity)")
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

    import trace_gym  # noqa: F401  (registers the trace/* ids)
    from trace_gym.cli import CommandError, UsageError, check_count, check_policy_file, writable_output
    from trace_gym.cli.play import check_reset_options, parse_options
    from trace_gym.policies import PolicyError, policy_from_spec
    from trace_gym.progress import reporting, track
    from trace_gym.rollout import RolloutError, TrajectoryStore, TrajectoryStoreError, collect, mode_note

    err = Console(stderr=True, soft_wrap=True)
    if args.run:
        return _run_in_folder(args, err)
    for flag in ("split", "limit", "per_group", "tasks", "success"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} plays the tasks of a run: give --run DIR")
    if not args.out:
        raise UsageError("give --out FILE (a trajectory store) or --run DIR (a run folder)")
    try:
        seeds = parse_seeds(args.seeds)
        options = parse_options(args.option) or None
        env_kwargs = parse_options(args.env_arg, "--env-arg")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_count("--batch-size", args.batch_size)
    check_policy_file(args.policy)
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
        raise UsageError(str(exc)) from None
    import gymnasium as gym

    module, sep, bare_id = args.env_id.rpartition(":")
    try:
        if sep:
            import importlib

            importlib.import_module(module)
        gym.spec(bare_id if sep else args.env_id)
    except (gym.error.Error, ImportError) as exc:
        raise UsageError(f"unknown env {args.env_id!r}: {exc}") from None
    try:
        check_reset_options(args.env_id, options or {})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    writable_output(args.out, "--out")  # an unwritable --out fails now, not after the first episode
    store = TrajectoryStore(args.out)
    try:
        stored = len(store) if store.path.exists() else 0
    except TrajectoryStoreError as exc:
        raise UsageError(str(exc)) from None
    rewards: list[float] = []
    skipped: list[int] = []
    slots = min(args.batch_size, len(seeds))
    with reporting(err), track(f"rollouts on {args.env_id}{mode_note(policy, slots)}", total=len(seeds)) as bar:

        def on_episode(t: Any) -> None:
            rewards.append(t.reward)
            bar.tick(t)

        def on_skip(seed: int) -> None:
            skipped.append(seed)
            bar.skip()

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
        except BaseException as exc:
            if isinstance(exc, RolloutError):
                raise CommandError(f"{exc}; {len(rewards)} new episodes were saved to {args.out}; "
                                   "run the same command again to resume") from None
            if isinstance(exc, PolicyError):
                raise CommandError(str(exc)) from None
            raise
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


def _run_in_folder(args: argparse.Namespace, err: Any) -> int:
    """``rollout --run DIR``: the model plays the split's tasks into the run folder (stage ``rollouts``)."""
    import gymnasium as gym

    from trace_gym.cli import UsageError, check_count, check_policy_file
    from trace_gym.cli.play import parse_options
    from trace_gym.cli.runs import loading_model, refuse_with_run, run_stage
    from trace_gym.core.tasks import tasks_per_group
    from trace_gym.data import DataDirError
    from trace_gym.pipeline import RolloutJob, Rollouts, Target, play_rollouts
    from trace_gym.pipeline.folder import RunError, RunFolder
    from trace_gym.policies import policy_from_spec
    from trace_gym.progress import reporting

    refuse_with_run(args, out=args.out, option=args.option, no_resume=args.no_resume)
    check_count("--limit", args.limit)
    check_count("--per-group", args.per_group)
    check_count("--batch-size", args.batch_size)
    check_policy_file(args.policy)
    try:
        seeds = parse_seeds(args.seeds)
        env_kwargs = parse_options(args.env_arg, "--env-arg")
        gym.spec(args.env_id)
        target = Target(args.env_id, env_kwargs, args.success)
        tasks = args.tasks.split(",") if args.tasks else target.task_ids(args.split or "train")
        if args.per_group is not None:
            tasks = tasks_per_group(target.source, tasks, args.per_group)
        tasks = tasks[: args.limit] if args.limit is not None else tasks
        for t in tasks:
            target.reset_options(t)  # an unknown task id fails now
    except (ValueError, gym.error.Error, DataDirError) as exc:  # an unknown env, split or task (TaskError), bad --seeds
        raise UsageError(str(exc)) from None
    if not tasks:
        raise UsageError(f"no task to play in {args.split or 'train'} of {args.env_id}")
    check_count("tasks x --seeds", len(tasks) * len(seeds))
    run = RunFolder(args.run)
    try:
        run.check(target, args.policy)
    except RunError as exc:
        raise UsageError(str(exc)) from None
    gen = {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "greedy": args.greedy or None,
           "seed": args.policy_seed, "batch_size": args.batch_size, "device": args.device}
    gen = {k: v for k, v in gen.items() if v is not None}

    def play() -> Rollouts:
        opts = {**gen, "batch_size": args.batch_size if args.batch_size > 1 else None}
        policy = loading_model(args.policy, lambda: policy_from_spec(args.policy, **opts))
        run.start(target, args.policy, gen)
        jobs = [RolloutJob(policy.policy_id, t, s, policy) for t in tasks for s in seeds]
        with reporting(err):
            return play_rollouts(target, jobs, run.rollouts, batch_size=args.batch_size)

    res, _ = run_stage(run, "rollouts", play, Rollouts, settings={"tasks": tasks, "seeds": seeds, "generation": gen})
    rule = f"reward ≥ {target.threshold:g}"
    for pid, row in sorted(res.by_policy.items()):
        print(f"{pid}: {row['episodes']} episodes on {args.env_id}, {row['passed']} passed ({rule})")
    if res.policy_failures:
        print(f"{res.policy_failures} episodes ended early because the policy failed (kept as played)")
    print(f"wrote {res.path}; next: trace-gym analyze --run {args.run}")
    return 0
