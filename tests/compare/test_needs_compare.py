"""TRACE with the needs rule in the comparison, on ToolSandbox with the tiny model (the ``smoke-toolsandbox`` preset
with two adapters): the gate learns from the learning fold and the capability envs, TRACE trains its joint adapter
itself and the learning tasks choose between it and the per-capability adapters (charged to routing), the
``joint`` row is that adapter forced, ``ideal`` takes the base model's episode exactly where the gold says to
refuse, ``classifier`` routes the same adapters with the paper's classifier router, and the held-out gate
diagnostic adds up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.compare.bench import preset
from tests.extras import need, need_smollm2

need("torch")
need("trl")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

METHODS = ["base", "trace", "classifier", "single", "joint", "oracle", "ideal"]


def test_needs_routing_selection_and_the_reference_rows(tmp_path):
    from trace_gym.compare.pipeline import CompareConfig, run_compare
    from trace_gym.core.tasks import task_source_for
    from trace_gym.route.index import RouterIndex

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    fields = {**preset("smoke-toolsandbox"), "out": str(tmp_path / "run"), "n_train_tasks": None, "budget": 40,
              "min_capabilities": 2, "max_capabilities": 2, "router_rule": "needs", "adapter_choice": "select",
              "select_tasks": 2, "need_examples": 4, "methods": METHODS}
    cfg = CompareConfig(**fields).validate()
    doc = run_compare(cfg, log=lambda m: None)
    run = tmp_path / "run"
    trace = doc["details"]["trace"]
    assert len(trace["adapters"]) == 2, trace.get("note")

    # the gate learned from the whole learning fold, calibrated on it alone
    routing = trace["routing"]
    learning = doc["splits"]["train"]
    assert routing["rule"] == "needs" and routing["gate"]["examples"]["target"] == len(learning) > 32
    assert routing["gate"]["calibration"]["n"] == len(learning)
    index = RouterIndex.load(routing["index"])
    assert index.gate is not None and index.settings["joint"] == "joint"
    # the selection played both candidates on learning tasks only, charged to routing, and its choice is stored
    sel = routing["selection"]
    assert 0 < sel["n"] <= 2 and {r["task"] for r in sel["rows"]} <= set(learning)
    assert not {r["task"] for r in sel["rows"]} & set(doc["splits"]["test"])
    assert trace["budget"]["by_stage"]["routing"] == sel["rollouts"] == 2 * sel["n"]
    assert index.settings["adapters"] == sel["choice"] == routing["adapters_choice"]
    assert trace["budget"]["used"] <= cfg.budget

    # TRACE's evaluated policy acts with whichever adapter the router names, the joint one included
    from trace_gym.compare.pipeline import _policy_for

    policy, _ = _policy_for("trace", cfg, trace, run)
    assert {a["adapter"] for a in trace["adapters"]} | {"joint"} <= set(policy.label_to_adapter)
    assert all(policy.label_to_adapter[n] == n for n in policy.router.labels)
    # the joint row is TRACE's own joint adapter, forced; nothing trained twice
    joint = doc["details"]["joint"]
    assert joint["in_trace"] and Path(joint["adapter"]) == run / "trace" / "adapters" / "joint"
    assert not (run / "joint").exists()
    assert trace["joint"]["demonstrations"] == sum(a["demonstrations"] for a in trace["adapters"])

    # ideal: the base model's episode where the gold says to refuse, the joint adapter's everywhere else
    src = task_source_for(cfg.target)
    base, joint_ev = doc["methods"]["base"]["eval"]["rewards"], doc["methods"]["joint"]["eval"]["rewards"]
    ideal = doc["methods"]["ideal"]["eval"]
    for t in base:
        assert ideal["rewards"][t] == (base[t] if src.gold(t).refuse else joint_ev[t])
    assert sum(ideal["picks"].values()) == len(base)

    # the classifier row plays the same held-out tasks; the diagnostic counts every one of them
    assert doc["methods"]["classifier"]["eval"]["rewards"].keys() == base.keys()
    held = trace["held_out_gate"]
    assert held["n"] == len(base) and held["refusals"] + held["answerable"] == held["n"]
    assert held["refusals"] == sum(src.gold(t).refuse for t in base)
    md = (run / "compare.md").read_text()
    assert "need gate" in md and "ideal need gate (reference)" in md and "TRACE, classifier router" in md

    # a rerun changes nothing
    again = run_compare(CompareConfig(**fields).validate(), log=lambda m: None)
    assert again["stages"]["ran"] == [] and again["methods"]["trace"]["eval"] == doc["methods"]["trace"]["eval"]
    assert json.loads((run / "compare.json").read_text())["methods"].keys() == doc["methods"].keys()
