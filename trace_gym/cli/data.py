"""``trace-gym data status|fetch``: where the benchmark data is, whether it verifies, and getting it."""

from __future__ import annotations

import argparse
import json
import sys

from trace_gym.cli import CommandError, UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="benchmark data: where it is, whether it matches the shipped checksums, fetch it")
    verbs = p.add_subparsers(dest="data_command", metavar="VERB")
    s = verbs.add_parser("status", help="where τ²-bench and ToolSandbox data were found, their version and checksums")
    s.add_argument("--json", action="store_true", help="print the status as JSON")
    s.set_defaults(func=_status)
    f = verbs.add_parser("fetch", help="rebuild benchmark data from upstream (or a mirror), verify it against the "
                         "shipped checksums and install it into the per-user cache (the package ships a copy already)",
                         description="The package ships the data the engines read. fetch rebuilds it from upstream "
                         "(or copies it from a mirror), verifies every file against the shipped checksums, installs "
                         "it into the per-user cache (or --dest), where it takes precedence over the packaged copy, "
                         "and says whether it is byte-identical to the packaged copy.")
    f.add_argument("benchmark", choices=["tau2", "toolsandbox"])
    f.add_argument("--from", dest="source", metavar="PATH_OR_URL",
                   help="a local archive (.tar.gz/.zip), a folder, or an http(s) URL of an archive; with {tag} in "
                        "it, a mirror of the upstream archives (default for tau2: tau2-bench's source archives at "
                        "the pinned tags on GitHub). For toolsandbox: a copy of the data folder (or an archive of "
                        "it), or upstream's code (a checkout or archive of apple/ToolSandbox), which is run to "
                        "export the scenarios; default: the pinned commit's archive from GitHub")
    f.add_argument("--dest", default=None, help="install here instead of the per-user cache")
    f.set_defaults(func=_fetch)
    p.set_defaults(func=_no_verb)


def _no_verb(args: argparse.Namespace) -> int:
    raise UsageError("data needs a verb: status or fetch (see `trace-gym data --help`)")


def _status(args: argparse.Namespace) -> int:
    from trace_gym.data import BENCHMARKS, describe, status

    docs = [status(b) for b in BENCHMARKS]
    if args.json:
        print(json.dumps(docs, indent=2, ensure_ascii=False))
        return 0
    for doc in docs:
        print("\n".join(describe(doc)))
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trace_gym.data import DataFetchError, fetch, not_in_source_note, same_as_packaged

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    try:
        result = fetch(args.benchmark, args.source, dest=args.dest, log=log)
    except DataFetchError as exc:
        raise CommandError(str(exc)) from None
    print(f"installed {result['files']} verified files in {result['path']}")
    if result["derived"]:
        how = "by running upstream's code" if args.benchmark == "toolsandbox" else "from the source's Python code"
        print(f"derived {len(result['derived'])} of them {how}: {', '.join(result['derived'])}")
    if result.get("kept"):
        print(f"kept {len(result['kept'])} verified file(s) of the copy already there: {', '.join(result['kept'])}")
    same = same_as_packaged(args.benchmark, Path(result["path"]))
    print(f"byte-identical to the packaged copy: {len(same['identical'])} of "
          f"{sum(len(v) for v in same.values())} packaged files"
          + (f"; differ: {', '.join(same['different'])}" if same["different"] else "")
          + (f"; not installed: {', '.join(same['absent'])}" if same["absent"] else ""))
    note = not_in_source_note(args.benchmark, result["not_in_source"], result["path"])
    if note:
        print(f"note: {note}")
    return 0
