"""``trace-gym play ENV_ID``: play one episode with scripted (or typed) actions and show the transcript."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register", "parse_options", "check_reset_options"]


def parse_options(pairs: list[str] | None, flag: str = "--option") -> dict[str, Any]:
    """``["k=v", ...]`` to a dict; each value is read as JSON when it parses, else kept as text."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects KEY=VALUE, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


def check_reset_options(env_id: str, options: dict[str, Any], env: Any = None) -> None:
    """Refuse ``--option`` keys the env does not read, when it declares the keys it reads
    (``reset_option_keys`` on its class); ``env`` is a made instance, else the registered class is asked."""
    if not options:
        return
    import gymnasium as gym

    from trace_gym.core.env import declared_reset_options

    if env is None:
        spec = gym.spec(env_id.rpartition(":")[2])
        entry = spec.entry_point
        try:
            env = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
        except (ImportError, AttributeError):
            return  # gym.make reports it
    declared = declared_reset_options(env)
    unknown = sorted(set(options) - declared) if declared is not None else []
    if unknown:
        raise ValueError(f"--option: unknown key(s) {unknown} for {env_id}; it reads {', '.join(sorted(declared))}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("play", help="play one episode with scripted actions and print the transcript")
    p.add_argument("env_id", help="environment id (see `trace-gym envs`); MODULE:ID imports MODULE first")
    p.add_argument(
        "--actions",
        metavar="FILE",
        help="actions, one per line or a JSON list of strings; '-' reads standard input. "
        "Without it, actions are typed interactively.",
    )
    p.add_argument("--seed", type=int, default=0, help="reset seed (default 0)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="reset option (repeatable; VALUE as JSON or text)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="keyword argument for gym.make (repeatable)")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the summary, not the transcript")
    p.set_defaults(func=_run)


def _interactive_actions():
    """Actions typed at a prompt; an empty line or EOF stops."""
    while True:
        try:
            line = input("action> " if sys.stdin.isatty() else "")
        except EOFError:
            return
        if not line.strip():
            return
        yield line


def _run(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from rich.console import Console

    import trace_gym  # noqa: F401  (registers the trace/* ids)
    from trace_gym.cli import CommandError, UsageError, check_count, input_file
    from trace_gym.policies.scripted import load_actions
    from trace_gym.render import message_panel

    console = Console()
    err = Console(stderr=True, soft_wrap=True)
    check_count("--seed", args.seed, low=0, high=2**64 - 1)  # NumPy's seed range
    try:
        options = parse_options(args.option)
        env_kwargs = parse_options(args.env_arg, "--env-arg")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.actions and args.actions != "-":
        input_file(args.actions, "action script")
    try:
        actions = iter(load_actions(args.actions)) if args.actions else _interactive_actions()
    except (FileNotFoundError, OSError, UnicodeDecodeError) as exc:
        raise UsageError(str(exc)) from None
    try:
        env = gym.make(args.env_id, **env_kwargs)
    except (gym.error.Error, ModuleNotFoundError, TypeError, ValueError) as exc:
        raise UsageError(f"cannot make {args.env_id!r}: {exc}") from None
    try:
        try:
            check_reset_options(args.env_id, options, env)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        try:
            _, info = env.reset(seed=args.seed, options=options or None)
        except (ValueError, KeyError, TypeError, gym.error.Error) as exc:
            raise UsageError(f"reset failed: {exc}") from None
        shown = 0

        def show(messages: list[dict[str, Any]]) -> None:
            nonlocal shown
            if not args.quiet:
                for m in messages[shown:]:
                    console.print(message_panel(m))
            shown = len(messages)

        show(info["messages"])
        steps = total = 0
        done = False
        reward_info: dict[str, Any] = {}
        reason = None
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            steps += 1
            total += reward
            show(info["messages"])
            if terminated or truncated:
                done = True
                reward_info = info.get("reward_info") or {}
                reason = info.get("termination_reason")
                break
    finally:
        env.close()
    if not done:
        raise CommandError(f"the actions ran out after {steps} steps but the episode has not ended "
                           "(add more actions, or end the conversation)")
    console.print(f"[bold]episode over[/bold] after {steps} steps: {reason}; reward {total:g}")
    if args.actions:
        unused = sum(1 for _ in actions)
        if unused:
            err.print(f"note: {unused} scripted action(s) were not used: the episode ended first")
    if reward_info:
        console.print_json(json.dumps(reward_info, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":  # pragma: no cover
    from trace_gym.cli import main

    sys.exit(main(["play", *sys.argv[1:]]))
