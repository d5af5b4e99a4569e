"""Paired differences between the methods of two comparisons that evaluated the same held-out scenarios.

A comparison (``compare.json``) of one fold and an earlier one of the same fold hold the same held-out
scenarios; when both evaluated the base model alike (the same reward on every scenario, checked here), a row of
one can be paired with a row of the other, scenario by scenario: TRACE of a new preset against the GRPO and
GEPA of a kept run, say.  Several folds are pooled by listing one pair per fold::

    python scripts/paired_across_runs.py \\
        --new runs/fold-b/compare.json runs/fold-a/compare.json \\
        --old benchmarks/results/cpu-toolsandbox/compare.json benchmarks/results/cpu-toolsandbox-swap/compare.json \\
        --method trace --against grpo,gepa

Prints, per fold and pooled, ``method − against`` overall, on the answerable scenarios and on the
insufficient-information ones: mean [95% paired bootstrap CI] better/worse/equal (2,000 resamples, seed 1000,
as the comparisons' own reports use).  Exits 2 when the base model's rewards differ between the runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REFUSAL_GROUP = "insufficient_information"


def _rewards(doc: dict, method: str) -> dict[str, float]:
    entry = doc["methods"].get(method)
    if not entry or entry.get("skipped") or not entry.get("eval"):
        raise SystemExit(f"error: the comparison has no evaluated {method!r} (it has {sorted(doc['methods'])})")
    return {t: float(np.mean(r)) for t, r in entry["eval"]["rewards"].items()}


def _groups(doc: dict) -> dict[str, list[str]]:
    return doc["methods"]["base"]["eval"]["task_groups"]


def parts_of(tasks: list[str], groups: dict[str, list[str]]) -> dict[str, list[str]]:
    """The scenarios reported apart: all of them, the answerable ones and the insufficient-information ones."""
    return {"overall": list(tasks), "answerable": [t for t in tasks if REFUSAL_GROUP not in groups[t]],
            "insufficient information": [t for t in tasks if REFUSAL_GROUP in groups[t]]}


def paired(diffs: list[float], seed: int = 1000, n: int = 2000) -> str:
    x = np.asarray(diffs, dtype=float)
    rng = np.random.default_rng(seed)
    boot = x[rng.integers(0, len(x), (n, len(x)))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    better, worse = int((x > 1e-9).sum()), int((x < -1e-9).sum())
    return f"{x.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] {better}/{worse}/{len(x) - better - worse}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new", nargs="+", required=True, metavar="COMPARE_JSON", help="one comparison per fold")
    ap.add_argument("--old", nargs="+", required=True, metavar="COMPARE_JSON", help="the earlier one of each fold, "
                    "in the same order")
    ap.add_argument("--method", default="trace", help="the new comparison's method (default trace)")
    ap.add_argument("--against", default="grpo,gepa", help="the earlier comparison's methods (default grpo,gepa)")
    args = ap.parse_args(argv)
    if len(args.new) != len(args.old):
        ap.error("--new and --old list one comparison per fold each")
    pooled: dict[str, dict[str, list[float]]] = {}
    for new_path, old_path in zip(args.new, args.old, strict=True):
        new, old = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (new_path, old_path))
        base_new, base_old = _rewards(new, "base"), _rewards(old, "base")
        if base_new != base_old:
            differ = sorted(t for t in set(base_new) | set(base_old) if base_new.get(t) != base_old.get(t))
            print(f"error: the base model's rewards differ between {new_path} and {old_path} on {len(differ)} "
                  f"scenario(s) ({', '.join(differ[:3])}...): not the same evaluation", file=sys.stderr)
            return 2
        groups = _groups(new)
        mine = _rewards(new, args.method)
        print(f"{new_path} against {old_path} ({len(base_new)} held-out scenarios; base identical)")
        for other in args.against.split(","):
            theirs = _rewards(old, other)
            for part, tasks in parts_of(list(base_new), groups).items():
                d = [mine[t] - theirs[t] for t in tasks]
                pooled.setdefault(f"{args.method} − {other}, {part}", {}).setdefault("d", []).extend(d)
                print(f"  {args.method} − {other}, {part}: {paired(d)}")
    if len(args.new) > 1:
        print("pooled")
        for name, v in pooled.items():
            print(f"  {name}: {paired(v['d'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
