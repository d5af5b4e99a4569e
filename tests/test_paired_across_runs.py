"""scripts/paired_across_runs.py pairs rows of two comparisons only when their base evaluations agree."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("paired_across_runs", ROOT / "scripts" / "paired_across_runs.py")
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

GROUPS = {"a": ["answerable"], "b": ["answerable"], "r": ["insufficient_information"]}


def _doc(tmp_path: Path, name: str, **methods: dict[str, float]) -> str:
    doc = {"methods": {m: {"eval": {"rewards": {t: [v] for t, v in r.items()}, "task_groups": GROUPS}}
                       for m, r in methods.items()}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_row_of_each_run_is_paired_scenario_by_scenario(tmp_path, capsys):
    base = {"a": 0.1, "b": 0.2, "r": 1.0}
    new = _doc(tmp_path, "new", base=base, trace={"a": 0.5, "b": 0.2, "r": 1.0})
    old = _doc(tmp_path, "old", base=base, grpo={"a": 0.1, "b": 0.4, "r": 0.0})
    assert script.main(["--new", new, "--old", old, "--against", "grpo"]) == 0
    out = capsys.readouterr().out
    assert "trace − grpo, overall: +0.400" in out and "1/1/0" not in out.split("answerable")[0]
    assert "trace − grpo, answerable: +0.100" in out and "1/1/0" in out
    assert "trace − grpo, insufficient information: +1.000 [+1.000, +1.000] 1/0/0" in out


def test_runs_whose_base_differs_are_refused(tmp_path, capsys):
    new = _doc(tmp_path, "new", base={"a": 0.1, "b": 0.2, "r": 1.0}, trace={"a": 0.5, "b": 0.2, "r": 1.0})
    old = _doc(tmp_path, "old", base={"a": 0.1, "b": 0.3, "r": 1.0}, grpo={"a": 0.1, "b": 0.4, "r": 0.0})
    assert script.main(["--new", new, "--old", old, "--against", "grpo"]) == 2
    assert "the base model's rewards differ" in capsys.readouterr().err
