"""Routing learned from outcomes in the comparison (the ``smoke-toolsandbox`` preset with ``router_outcomes`` 1):
each adapter plays one base-rollout scenario, charged to TRACE's routing stage, its outcome is stored with the
routing stage and reported, and changing the setting reruns routing (and TRACE's evaluation) only."""

from __future__ import annotations

import json

import pytest

from tests.compare.bench import preset
from tests.extras import need, need_smollm2

need("torch")
need("trl")
need("sentence_transformers")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]



def test_router_outcomes_end_to_end_and_a_changed_n_reruns_routing_only(tmp_path):
    from trace_gym.compare.pipeline import CompareConfig, run_compare
    from trace_gym.pipeline import Target
    from trace_gym.rollout import TrajectoryStore
    from trace_gym.route.base import NO_ADAPTER
    from trace_gym.route.index import RouterIndex

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    smoke = preset("smoke-toolsandbox")
    assert "router_outcomes" not in smoke and "router_outcomes" not in preset("cpu-toolsandbox")  # off until measured
    fields = {**smoke, "out": str(tmp_path / "run"), "methods": ["base", "trace"], "router_outcomes": 1}
    cfg = CompareConfig(**fields).validate()
    doc = run_compare(cfg, log=lambda m: None)
    run = tmp_path / "run"
    trace = doc["details"]["trace"]
    adapters = [a["adapter"] for a in trace["adapters"]]
    assert adapters, trace.get("note")
    routing = trace["routing"]
    [row] = routing["outcomes"]  # the first base task, with the base model's and each adapter's reward
    assert row["task"] == doc["splits"]["train"][0] and set(row["rewards"]) == {NO_ADAPTER, *adapters}
    opts = Target(cfg.target, cfg.env_kwargs).reset_options(row["task"])
    base = next(t for t in TrajectoryStore(run / "trace" / "base_rollouts.jsonl").load()
                if t.seed == row["seed"] and t.options == opts)
    assert row["rewards"][NO_ADAPTER] == pytest.approx(base.reward)
    best = max(row["rewards"].values())
    assert row["label"] == (NO_ADAPTER if row["rewards"][NO_ADAPTER] == best else
                            next(a for a in adapters if row["rewards"][a] == best))
    played = TrajectoryStore(run / "trace" / "adapters" / "routing_outcomes.jsonl").load()
    assert sorted(t.policy_id for t in played) == sorted(f"adapter:{a}" for a in adapters)
    assert {a: row["rewards"][a] for a in adapters} == pytest.approx({t.policy_id[8:]: t.reward for t in played})
    # charged: each adapter's reference episodes and its one outcome episode, within the budget
    ledger = trace["budget"]
    assert routing["outcome_rollouts"] == len(adapters) * cfg.router_outcomes
    assert ledger["by_stage"]["routing"] == routing["rollouts"] == len(adapters) * (cfg.routing_seeds + cfg.router_outcomes)
    assert ledger["used"] <= cfg.budget
    index = RouterIndex.load(routing["index"])
    assert sum(index.outcome) == 1 and index.labels[index.outcome.index(True)] == row["label"]
    md = (run / "compare.md").read_text()
    assert "Routing learned from outcomes" in md and row["task"] in md

    # a changed N reruns TRACE's routing and evaluation; nothing else
    again = run_compare(CompareConfig(**{**fields, "router_outcomes": 0}).validate(), log=lambda m: None)
    assert sorted(again["stages"]["ran"]) == ["eval_trace", "trace_routing"]
    routing0 = again["details"]["trace"]["routing"]
    assert routing0["outcomes"] == [] and routing0["outcome_rollouts"] == 0
    assert again["details"]["trace"]["budget"]["by_stage"]["routing"] == len(adapters) * cfg.routing_seeds
    assert not any(RouterIndex.load(routing0["index"]).outcome)
    assert json.loads((run / "config.json").read_text())["router_outcomes"] == 0
