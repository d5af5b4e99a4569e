"""Each TRACE adapter forced on every held-out scenario, against the base model, per fold and pooled.

A comparison run with the ``oracle`` method evaluates every per-capability adapter forced on the held-out
scenarios and keeps their rewards in its oracle row (``methods.oracle.eval.forced``).  This prints, for each
adapter and for the oracle built with the joint adapter among its sources (per scenario the best of base,
the adapters and the joint adapter), ``row − base`` overall, on the answerable scenarios and on the
insufficient-information ones (mean [95% paired bootstrap CI] better/worse/equal, as
``paired_across_runs.py``), and the refusal scenarios' mean reward beside base's::

    python scripts/forced_adapters.py benchmarks/results/cpu-toolsandbox-needs/compare.json \\
        benchmarks/results/cpu-toolsandbox-needs-swap/compare.json

Exits 2 when a comparison has no oracle row with the forced adapters' rewards.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paired_across_runs import paired, parts_of  # noqa: E402


def rows_of(doc: dict) -> dict[str, dict[str, float]] | None:
    """Row name → scenario → mean reward: ``base``, each forced adapter, ``joint`` and ``oracle+joint``."""
    methods = doc["methods"]
    forced = ((methods.get("oracle") or {}).get("eval") or {}).get("forced")
    if not forced:
        return None

    def means(rewards: dict) -> dict[str, float]:
        return {t: float(np.mean(r)) for t, r in rewards.items()}

    rows = {"base": means(methods["base"]["eval"]["rewards"])}
    rows.update({name: means(r) for name, r in forced.items()})
    joint = (methods.get("joint") or {}).get("eval")
    if joint and not methods["joint"].get("skipped"):
        rows["joint"] = means(joint["rewards"])
    rows["oracle+joint"] = {t: max(row[t] for row in rows.values()) for t in rows["base"]}
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("compare", nargs="+", metavar="COMPARE_JSON", help="one comparison per fold")
    args = ap.parse_args(argv)
    pooled: dict[str, dict[str, list[float]]] = {}
    for path in args.compare:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = rows_of(doc)
        if rows is None:
            print(f"error: {path} has no oracle row with the forced adapters' rewards (run it with the oracle "
                  "method)", file=sys.stderr)
            return 2
        groups = doc["methods"]["base"]["eval"]["task_groups"]
        base = rows.pop("base")
        parts = parts_of(list(base), groups)
        refuse = parts["insufficient information"]
        print(f"{path} ({len(base)} held-out scenarios)")
        for name, row in rows.items():
            into, cells = pooled.setdefault(name, {}), []
            for part, tasks in parts.items():
                d = [row[t] - base[t] for t in tasks]
                into.setdefault(part, []).extend(d)
                cells.append(f"{part} {paired(d)}")
            into.setdefault("refusals", []).extend(row[t] for t in refuse)
            into.setdefault("base refusals", []).extend(base[t] for t in refuse)
            print(f"  {name} − base: " + "; ".join(cells)
                  + f"; refusals {np.mean([row[t] for t in refuse]):.3f} against {np.mean([base[t] for t in refuse]):.3f}")
    if len(args.compare) > 1:
        print("pooled")
        for name, parts in pooled.items():
            cells = [f"{part} {paired(d)}" for part, d in parts.items() if "refusals" not in part]
            print(f"  {name} − base: " + "; ".join(cells)
                  + f"; refusals {np.mean(parts['refusals']):.3f} against {np.mean(parts['base refusals']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
