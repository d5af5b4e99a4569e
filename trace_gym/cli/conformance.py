"""``trace-gym conformance tau2|toolsandbox FILE...``: replay recorded corpora and report agreement."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("conformance", help="replay a conformance corpus and report agreement with upstream")
    p.add_argument("suite", choices=["tau2", "toolsandbox"], help="which benchmark's corpus format")
    p.add_argument("files", nargs="+", help="corpus .jsonl files")
    p.add_argument("--verbose", "-v", action="store_true", help="print every disagreement")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trace_gym.cli import UsageError

    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such corpus file(s): {', '.join(missing)}")
    if args.suite == "tau2":
        from trace_gym.tau2.conformance import run_conformance
    else:
        from trace_gym.toolsandbox.conformance import run_conformance
    return run_conformance(args.files, verbose=args.verbose)
