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
    from trace_gym.cli import CommandError, input_file

    for f in args.files:
        input_file(f, "corpus file")
    if args.suite == "tau2":
        from trace_gym.tau2.conformance import CorpusFileError, check_corpus_file, run_conformance

        try:  # a file that is not a corpus is an error, not a disagreement
            for f in args.files:
                check_corpus_file(f)
        except (CorpusFileError, OSError) as exc:
            raise CommandError(str(exc)) from None
    else:
        from trace_gym.toolsandbox.conformance import run_conformance
    return run_conformance(args.files, verbose=args.verbose)
