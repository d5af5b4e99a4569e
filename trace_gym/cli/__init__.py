"""``trace-gym`` command line.  Each sub-command lives in its own module with
``register(subparsers)``; add the module name to ``COMMANDS`` to expose it."""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "COMMANDS"]

COMMANDS = [
    "trace_gym.cli.envs",
    "trace_gym.cli.play",
    "trace_gym.cli.rollout",
    "trace_gym.cli.conformance",
    "trace_gym.cli.calibrate",
    "trace_gym.cli.train",
    "trace_gym.cli.analyze",
    "trace_gym.cli.synthesize",
    "trace_gym.cli.eval",
    "trace_gym.cli.demo",
    "trace_gym.cli.compare",
]


def build_parser() -> argparse.ArgumentParser:
    from trace_gym import __version__

    parser = argparse.ArgumentParser(prog="trace-gym", description="Capability-targeted training environments for LLM agents.")
    parser.add_argument("--version", action="version", version=f"trace-gym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # command not present in this build
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
