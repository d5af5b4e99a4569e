"""scripts/forced_adapters.py reports each adapter forced alone (kept in the oracle row) against the base model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
spec = importlib.util.spec_from_file_location("forced_adapters", ROOT / "scripts" / "forced_adapters.py")
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

GROUPS = {"a": ["answerable"], "b": ["answerable"], "r": ["insufficient_information"]}


def _doc(tmp_path: Path, name: str, base: dict, forced: dict | None, joint: dict | None = None) -> str:
    def ev(r: dict) -> dict:
        return {"rewards": {t: [v] for t, v in r.items()}, "task_groups": GROUPS}

    methods = {"base": {"eval": ev(base)}}
    if forced is not None:
        methods["oracle"] = {"eval": {**ev(base), "forced": {n: {t: [v] for t, v in r.items()} for n, r in forced.items()}}}
    if joint is not None:
        methods["joint"] = {"eval": ev(joint)}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"methods": methods}))
    return str(path)


def test_each_forced_adapter_and_the_oracle_with_the_joint_adapter_against_base(tmp_path, capsys):
    base = {"a": 0.1, "b": 0.2, "r": 1.0}
    one = _doc(tmp_path, "one", base, {"cap-0": {"a": 0.5, "b": 0.2, "r": 0.0}}, joint={"a": 0.1, "b": 0.6, "r": 1.0})
    two = _doc(tmp_path, "two", base, {"cap-0": {"a": 0.1, "b": 0.2, "r": 1.0}}, joint={"a": 0.1, "b": 0.2, "r": 1.0})
    assert script.main([one, two]) == 0
    out = capsys.readouterr().out
    first, pooled = out.split("pooled\n")
    assert "cap-0 − base: overall -0.200" in first and "answerable +0.200" in first
    assert "insufficient information -1.000 [-1.000, -1.000] 0/1/0; refusals 0.000 against 1.000" in first
    # per scenario the best of base, the adapter and the joint adapter: a 0.5, b 0.6, r 1.0
    assert "oracle+joint − base: overall +0.267" in first
    assert "cap-0 − base: overall -0.100" in pooled and "refusals 0.500 against 1.000" in pooled


def test_a_comparison_without_the_forced_rewards_is_refused(tmp_path, capsys):
    assert script.main([_doc(tmp_path, "plain", {"a": 0.1, "b": 0.2, "r": 1.0}, None)]) == 2
    assert "no oracle row with the forced adapters' rewards" in capsys.readouterr().err


def test_the_kept_runs_report_every_adapter():
    kept = [ROOT / "benchmarks" / "results" / d / "compare.json" for d in ("cpu-toolsandbox-needs", "cpu-toolsandbox-needs-swap")]
    for path in kept:
        rows = script.rows_of(json.loads(path.read_text(encoding="utf-8")))
        assert rows is not None and len(rows) == 1 + 3 + 2  # base, three adapters, joint, oracle+joint
