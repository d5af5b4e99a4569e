"""``trace-gym card --policy P --domain D``: a capability report card (one row per capability env of D).

    trace-gym card --policy smollm2 --domain toolsandbox --episodes 8 --seeds 0-1 \\
        --json-out runs/card.json --plot runs/card.png

Each row: the mean reward with its 95% bootstrap interval, the perfect episodes and the
refusal floor, on the first ``--episodes`` scenario seeds of ``--split`` (``test``), each
played once per trial seed of ``--seeds``.  The logic is :mod:`trace_gym.eval.card`.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.eval.policies import EVAL_SPEC_HELP, add_policy_options

    p = sub.add_parser("card", help="score a policy on every capability env of a domain: a report card")
    p.add_argument("--policy", required=True, help=EVAL_SPEC_HELP)
    p.add_argument("--domain", required=True, help="capability domain (built-in or plug-in, see TRACE_GYM_DOMAINS)")
    p.add_argument("--episodes", type=int, default=8, help="scenario seeds (tasks) per capability env (default 8)")
    p.add_argument("--seeds", default="0", help="trial seeds as A-B (each task is played once per seed; default 0)")
    p.add_argument("--split", default="test", help="the split whose first tasks are played (default test: held out)")
    add_policy_options(p)
    p.add_argument("--batch-size", type=int, default=4, help="episodes played in lock step (default 4)")
    p.add_argument("--no-floor", action="store_true", help="do not play the refusal floor")
    p.add_argument("--store", default=None, metavar="FILE", help="trajectory file to keep episodes in and resume from")
    p.add_argument("--json-out", default=None, metavar="FILE", help="write the card as JSON (atomically)")
    p.add_argument("--plot", default=None, metavar="FILE", help="draw the card as a PNG (needs matplotlib)")
    p.set_defaults(func=_run)


def _trial_seeds(text: str) -> tuple[int, int]:
    """``--seeds`` as (first seed, count): a single seed or a contiguous range."""
    from trace_gym.cli import UsageError

    from .rollout import parse_seeds

    try:
        seeds = parse_seeds(text)
    except ValueError as exc:
        raise UsageError(f"--seeds: {exc}") from None
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise UsageError(f"--seeds must be one seed or a contiguous range A-B (trial j plays seed A+j), got {text!r}")
    if seeds[0] < 0 or seeds[-1] > 2**32 - 1:
        raise UsageError(f"--seeds must lie in [0, {2**32 - 1}], got {text!r}")
    return seeds[0], len(seeds)


def _run(args: argparse.Namespace) -> int:
    import importlib.util
    import sys

    from rich.console import Console

    from trace_gym.cli import MAX_EPISODES, UsageError, check_count, check_policy_file, writable_output
    from trace_gym.eval.card import CardError, capability_envs, card_table, plot_card, report_card
    from trace_gym.eval.policies import MAX_NEW_TOKENS, resolve_policy
    from trace_gym.io import atomic_write_json
    from trace_gym.policies.base import supports
    from trace_gym.progress import reporting

    console = Console()
    check_count("--episodes", args.episodes)
    check_count("--batch-size", args.batch_size)
    first, trials = _trial_seeds(args.seeds)
    check_policy_file(args.policy)
    try:
        envs = capability_envs(args.domain)
    except CardError as exc:
        raise UsageError(str(exc)) from None
    if args.episodes * trials * len(envs) > MAX_EPISODES:
        raise UsageError(f"{args.episodes} tasks x {trials} trials x {len(envs)} envs is more episodes than one command "
                         f"plays (at most {MAX_EPISODES:,})")
    for flag, path in (("--json-out", args.json_out), ("--plot", args.plot)):
        if path:
            writable_output(path, flag)
    plot = args.plot
    if plot and importlib.util.find_spec("matplotlib") is None:
        print(f"--plot {plot}: matplotlib is not installed (pip install matplotlib, or the 'train' extra); "
              "no plot will be drawn", file=sys.stderr)
        plot = None
    try:
        policy = resolve_policy(args.policy, model=args.model, adapters=args.adapters, router=args.router,
                                max_new_tokens=args.max_new_tokens or MAX_NEW_TOKENS, temperature=args.temperature,
                                greedy=args.greedy or None, seed=first, batch_size=args.batch_size)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(f"--policy {args.policy}: {exc}") from None
    try:
        with reporting(Console(stderr=True)):  # evaluate() shows its progress line on stderr
            card = report_card(args.domain, policy, tasks=args.episodes, split=args.split, trials=trials, base_seed=first,
                               store=args.store, envs=envs, floor=not args.no_floor,
                               batch_size=args.batch_size if supports(policy, "batchable") else 1)
    except CardError as exc:
        raise UsageError(str(exc)) from None
    card["spec"] = args.policy
    console.print(card_table(card))
    if args.json_out:
        atomic_write_json(args.json_out, card)
        console.print(f"wrote {args.json_out}")
    if plot:
        png = plot_card(card, plot)
        if png is not None:
            console.print(f"wrote {png}")
    return 0
