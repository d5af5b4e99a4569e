"""Draw the plots the docs show from stored results (nothing is played again), with the commands' own plotting.

    python scripts/docs_plots.py --eval runs/loop/eval/comparison.json
        docs/img/eval-loop.png: what `trace-gym eval` drew for the README's loop (docs/pipeline.md)
    python scripts/docs_plots.py --compare benchmarks/results/cpu-toolsandbox/compare.json
        docs/img/compare-cpu-toolsandbox.png: what `trace-gym compare` drew for fold B (docs/comparisons.md)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eval", type=Path, help="an eval's comparison.json")
    p.add_argument("--compare", type=Path, help="a comparison's compare.json")
    args = p.parse_args()
    if args.eval:
        from trace_gym.eval.report import plot_comparison

        doc = json.loads(args.eval.read_text(encoding="utf-8"))
        print(plot_comparison(doc["reports"], OUT / "eval-loop.png"))
    if args.compare:
        from trace_gym.compare.report import plot_methods

        print(plot_methods(json.loads(args.compare.read_text(encoding="utf-8")), OUT / "compare-cpu-toolsandbox.png"))
    if not (args.eval or args.compare):
        p.error("give --eval FILE and/or --compare FILE")


if __name__ == "__main__":
    main()
