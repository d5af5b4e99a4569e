"""The demo on ToolSandbox with the tiny random-weight model: the model's own successes and failures drive
the loop (no scripted agent), every stage runs offline, the evaluation is on held-out scenarios with the
graded scores and the refusal floor, and a second run resumes every stage."""

from __future__ import annotations

import json

import pytest

from tests.extras import need, need_smollm2

need("torch")
need("trl")
need("peft")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]




def test_demo_toolsandbox_tiny_end_to_end_and_resume(toolsandbox_data, private_dir, capsys):
    from trace_gym.cli import main
    from trace_gym.core.tasks import task_groups, task_source_for
    from trace_gym.demo import DemoConfig
    from trace_gym.demo.config import TOOLSANDBOX_SUCCESS

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    out = private_dir / "demo"
    assert main(["demo", "--target", "toolsandbox", "--model", "tiny", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    cfg = DemoConfig.for_run(out=out, model="tiny", target="toolsandbox")
    assert summary["config"]["target"] == "trace/toolsandbox-v0" and summary["config"]["success"] == TOOLSANDBOX_SUCCESS
    stages = {s["stage"]: s for s in summary["stages"]}
    assert list(stages) == ["rollouts", "analysis", "synthesis", "training", "routing", "evaluation"]
    assert not any(s["resumed"] for s in stages.values())

    # 1. only the model played, on train-split scenarios; it both succeeded and failed by the documented threshold
    src = task_source_for("trace/toolsandbox-v0")
    train, test = set(src.task_ids("train")), set(src.task_ids("test"))
    agents = stages["rollouts"]["found"]["by_agent"]
    assert list(agents) == ["tiny"] and agents["tiny"]["episodes"] == cfg.base_tasks * cfg.base_samples
    assert set(stages["rollouts"]["found"]["model_tasks"]) <= train
    trajs = [json.loads(line) for line in (out / "rollouts" / "trajectories.jsonl").read_text().splitlines()]
    passed = sum(t["reward"] >= TOOLSANDBOX_SUCCESS for t in trajs)
    assert agents["tiny"]["passed"] == passed and 0 < passed < len(trajs)
    # 2.–3. analysis of those episodes chose a ToolSandbox capability, synthesized from a cap-ts template
    caps = json.loads((out / "analysis" / "capabilities.json").read_text())
    assert caps["inputs"]["n_passed"] == passed
    [env] = stages["synthesis"]["found"]["envs"]
    assert env["capability"] in {"state-dependency", "canonicalization", "insufficient-information",
                                 "multiple-user-turn", "multiple-tool-call"}
    assert env["reference_mean_reward"] == 1.0 and "in_band" in env
    synth = json.loads((out / "envs" / "_synthesis.json").read_text())
    assert synth["domain"] == "toolsandbox" and synth["outcomes"][0]["template"].startswith("cap-ts-")
    # 4.–5. an adapter and a router
    [adapter] = stages["training"]["found"]["adapters"]
    assert (out / "adapters" / adapter["name"] / "adapter_model.safetensors").exists()
    # its SFT also rehearsed the base model's own successful train episodes
    [entry] = json.loads((out / "adapters" / "manifest.json").read_text())["adapters"]
    assert cfg.cap_rehearse_base and entry["rehearsed_base"] == passed
    assert (out / "adapters" / "router_index.json").exists()
    # 6. held-out scenarios only, graded per category with intervals, the refusal floor beside them
    ev = stages["evaluation"]["found"]
    assert set(ev["tasks"]) <= test and len(ev["tasks"]) == cfg.eval_tasks
    assert len({src.group(t) for t in ev["tasks"]}) >= 2  # spread over categories
    for name in ("base", "routed"):
        scores = ev[name]["scores"]
        assert set(scores["groups"]) == {g for t in ev["tasks"] for g in task_groups(src, t)}  # every category of each
        for s in [scores["overall"], *scores["groups"].values()]:
            assert s["mean"]["low"] <= s["mean"]["value"] <= s["mean"]["high"]
            assert 0 <= s["perfect"] <= s["episodes"] and "floor" in s
    assert abs(ev["base"]["scores"]["overall"]["mean"]["value"] - ev["base"]["mean_reward"]) < 1e-9
    text = capsys.readouterr().out
    assert "refusal floor" in text and "perfect" in summary["verdict"]

    # a second run skips every stage
    assert main(["demo", "--target", "toolsandbox", "--model", "tiny", "--out", str(out)]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert all(s["resumed"] for s in again["stages"])
    assert again["verdict"] == summary["verdict"]
