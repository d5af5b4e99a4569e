"""The whole demo loop with the tiny random-weight model: every stage runs, writes its
artifacts and a summary, and a second run resumes every stage instead of redoing it."""

from __future__ import annotations

import json

import pytest

from tests.extras import need, need_smollm2

need("torch")
need("trl")
need("peft")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


def test_demo_tiny_end_to_end_and_resume(private_dir):
    from rich.console import Console

    from trace_gym.cli import main
    from trace_gym.demo import DemoConfig, run_demo

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    out = private_dir / "demo"
    cfg = DemoConfig.for_run(out=out, model="tiny", target="tau2-retail")
    summary = run_demo(cfg, Console(record=True, width=120))
    stages = {s["stage"]: s for s in summary["stages"]}
    assert list(stages) == ["rollouts", "analysis", "synthesis", "training", "routing", "evaluation"]
    assert not any(s["resumed"] for s in stages.values())

    agents = stages["rollouts"]["found"]["by_agent"]
    assert agents["tiny"]["episodes"] == cfg.base_tasks
    assert agents["flawed-scripted:faithful"]["passed"] == cfg.scripted_tasks
    assert agents["flawed-scripted:wrong-payment"]["passed"] == 0
    assert "refund-policy-compliance" in stages["analysis"]["found"]["selected"]
    assert (out / "analysis" / "capabilities.png").exists()

    [env] = stages["synthesis"]["found"]["envs"]
    assert env["reference_mean_reward"] == 1.0  # the synthesized env is solvable
    [adapter] = stages["training"]["found"]["adapters"]
    assert (out / "adapters" / adapter["name"] / "adapter_model.safetensors").exists()
    manifest = json.loads((out / "adapters" / "manifest.json").read_text())
    assert [a["name"] for a in manifest["adapters"]] == [adapter["name"]]
    assert (out / "adapters" / "router_index.json").exists()
    assert 0 <= stages["routing"]["found"]["accuracy"] <= 1 and stages["routing"]["found"]["n"] == stages["rollouts"]["found"]["episodes"]
    assert 0 <= stages["routing"]["found"]["loo_correct"] <= stages["routing"]["found"]["n"]  # each without its own example
    ev = stages["evaluation"]["found"]
    assert set(ev) >= {"base", "routed"} and (out / "eval" / "comparison.png").exists()
    written = json.loads((out / "summary.json").read_text())
    assert written["verdict"] == summary["verdict"] and written["verdict"]

    # A second run (through the command line) skips every finished stage.
    before = (out / "rollouts" / "trajectories.jsonl").read_bytes()
    assert main(["demo", "--target", "tau2-retail", "--model", "tiny", "--out", str(out)]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert all(s["resumed"] for s in again["stages"])
    assert (out / "rollouts" / "trajectories.jsonl").read_bytes() == before
