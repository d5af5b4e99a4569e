"""``trace-gym envs``: list the registered environment ids with one-line descriptions."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("envs", help="list the registered environments")
    p.add_argument("--json", action="store_true", help="print a JSON list of {id, description} instead of a table")
    p.add_argument("--filter", metavar="TEXT", help="only ids containing TEXT")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from trace_gym import list_envs

    rows = [(i, d) for i, d in list_envs() if not args.filter or args.filter in i]
    if args.json:
        print(json.dumps([{"id": i, "description": d} for i, d in rows], ensure_ascii=False, indent=2))
        return 0
    console = Console()
    if not rows:
        console.print("no environments registered" + (f" matching {args.filter!r}" if args.filter else ""))
        return 0
    table = Table(title=f"trace-gym environments ({len(rows)})")
    table.add_column("id", style="bold cyan", no_wrap=True)
    table.add_column("description")
    for env_id, desc in rows:
        table.add_row(env_id, desc)
    console.print(table)
    return 0
