"""Draw the plots the docs show from stored results (nothing is played again), with the commands' own plotting.

    python scripts/docs_plots.py --eval benchmarks/results/cpu-toolsandbox/compare.json
        docs/img/eval-toolsandbox.png: what `trace-gym eval --policy base --policy routed` draws (docs/pipeline.md),
        here for the base model and TRACE's routed adapters of that comparison on its held-out scenarios
        (an eval's own comparison.json, e.g. runs/loop/eval/comparison.json, works too)
    python scripts/docs_plots.py --compare benchmarks/results/cpu-toolsandbox/compare.json
        docs/img/compare-cpu-toolsandbox.png: what `trace-gym compare` draws (docs/comparisons.md)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"


def eval_reports(doc: dict) -> list[dict]:
    """The evaluation reports of an eval's ``comparison.json``, or of a comparison's ``compare.json`` its base model's
    and TRACE's (routed), each an evaluation of the same held-out tasks."""
    if "reports" in doc:
        return doc["reports"]
    return [doc["methods"][m]["eval"] for m in ("base", "trace")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eval", type=Path, help="an eval's comparison.json, or a comparison's compare.json")
    p.add_argument("--compare", type=Path, help="a comparison's compare.json")
    args = p.parse_args()
    if not (args.eval or args.compare):
        p.error("give --eval FILE and/or --compare FILE")
    if args.eval:
        from trace_gym.eval.report import plot_comparison

        print(plot_comparison(eval_reports(json.loads(args.eval.read_text(encoding="utf-8"))), OUT / "eval-toolsandbox.png"))
    if args.compare:
        from trace_gym.compare.report import plot_methods

        print(plot_methods(json.loads(args.compare.read_text(encoding="utf-8")), OUT / "compare-cpu-toolsandbox.png"))


if __name__ == "__main__":
    main()
