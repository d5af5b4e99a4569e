"""The comparison on ToolSandbox with the tiny random-weight model (the ``smoke-toolsandbox`` preset of
``benchmarks/trace_vs_baselines.py``): every method runs at an equal rollout budget on held-out scenarios
of the category-stratified split, each is graded per category (mean similarity with its interval, perfect
count) beside the refusal floor, and the report carries the budget ledger."""

from __future__ import annotations

import pytest

from tests.compare.bench import preset
from tests.extras import need, need_smollm2

need("torch")
need("trl")
need("gepa")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]




def test_tiny_compare_on_toolsandbox(tmp_path):
    from trace_gym.compare.pipeline import CompareConfig, run_compare
    from trace_gym.core.tasks import task_groups, task_source_for

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    fields = preset("smoke-toolsandbox")
    assert fields["target"] == "trace/toolsandbox-v0"
    assert preset("cpu-toolsandbox")["target"] == "trace/toolsandbox-v0"
    cfg = CompareConfig(**{**fields, "out": str(tmp_path / "run")}).validate()
    doc = run_compare(cfg, log=lambda m: None)

    src = task_source_for("trace/toolsandbox-v0")
    assert doc["splits"]["source"].endswith("its own train/test split")
    train, test = doc["splits"]["train"], doc["splits"]["test"]
    assert set(train) <= set(src.task_ids("train")) and set(test) <= set(src.task_ids("test"))
    assert len({src.group(t) for t in test}) == len(test)  # a few held-out scenarios still span the categories
    m = doc["methods"]
    assert set(m) == {"base", "grpo", "gepa", "trace", "single"}
    for name, r in m.items():
        assert r["rollouts"] <= cfg.budget, name
        ev = r["eval"]
        assert set(ev["results"]) == set(test)
        scores = ev["scores"]
        assert set(scores["groups"]) == {g for t in test for g in task_groups(src, t)}  # every category of each
        assert abs(scores["overall"]["mean"]["value"] - ev["mean_reward"]) < 1e-9
        assert scores["overall"]["perfect"] == sum(x >= 1 - 1e-6 for rs in ev["rewards"].values() for x in rs)
        assert "floor" in scores["overall"] and ev["refusal_floor"]["n_tasks"] == len(test)
    trace = doc["details"]["trace"]
    assert trace["adapters"], trace.get("note")  # the loop really ran: an adapter from a ToolSandbox capability env
    routed = trace["held_out_routing"]  # where the router sent the held-out tasks, against the analysis labels
    assert routed["n"] == len(test) and sum(routed["routed"].values()) == len(test)
    assert "TRACE's routing of the" in (tmp_path / "run" / "compare.md").read_text()
    assert trace["synthesis"]["envs"][0]["env_id"].endswith("-toolsandbox-v0")
    ledger = trace["budget"]
    assert ledger["used"] == m["trace"]["rollouts"] <= cfg.budget and ledger["by_stage"]["base_rollouts"] == cfg.base_tasks
    # the capability warm start's reference episode is charged to the adapter's training stage
    adapter = trace["adapters"][0]
    assert adapter["demonstrations"] == cfg.cap_warm_demos == 1
    assert ledger["by_stage"][f"train:{adapter['capability']}"] == adapter["rollouts"] >= 1
    md = (tmp_path / "run" / "compare.md").read_text()
    assert "refusal floor" in md and "Rollout budget ledger" in md and "insufficient_information" in md
    assert "1 of them reference episodes of the capability envs" in md
