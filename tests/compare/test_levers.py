"""The comparison's levers and reference rows on ToolSandbox with the tiny model (the ``smoke-toolsandbox`` preset):
the adapters rehearse the base model's own successful train episodes (``cap_rehearse_base``), ``joint`` trains one
adapter on the union of the adapters' demonstrations, ``oracle`` takes per held-out task the better of the base
model and each adapter forced on it, and pooling carries both rows."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from tests.compare.bench import preset
from tests.extras import need, need_smollm2

need("torch")
need("trl")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]



def test_a_stored_episode_becomes_a_demonstration(tmp_path):
    """Episodes played into a real rollout store (a refusing agent on ToolSandbox train scenarios) come back as
    demonstrations with the messages and tools the agent saw; a rejected action is kept as context only."""
    from trace_gym.core.outcome import is_success
    from trace_gym.eval.floor import RefusalPolicy
    from trace_gym.pipeline import RolloutJob, Target, play_rollouts
    from trace_gym.pipeline.training import base_successes
    from trace_gym.train.demos import episode_demonstration

    target = Target("trace/toolsandbox-v0", {"max_steps": 3}, success=0.7)
    tasks = [t for t in target.task_ids("train") if t.endswith("insufficient_information")][:2] + target.task_ids("train")[:2]
    jobs = [RolloutJob(RefusalPolicy.policy_id, t, 0, RefusalPolicy()) for t in tasks]
    rollouts = play_rollouts(target, jobs, tmp_path / "rollouts.jsonl")
    trajs = rollouts.trajectories()
    assert len(trajs) == 4
    t = trajs[0]
    demo, why = episode_demonstration(t)
    assert why == "" and demo.messages == t.messages[: max(i for i, m in enumerate(t.messages) if m["role"] == "assistant") + 1]
    assert demo.tools == t.tools and demo.reward == t.reward and demo.untrained == ()
    assert demo.messages[0]["role"] == "system" and demo.assistant_turns()[0]["content"] == RefusalPolicy().act([], [])
    # the refusals of insufficient-information scenarios succeed; answerable ones do not
    wins = [x for x in trajs if is_success(x.reward, 0.7)]
    assert 1 <= len(wins) < len(trajs)
    assert [d.messages for d in base_successes(rollouts, 0.7)] == [episode_demonstration(x)[0].messages for x in wins]
    assert base_successes(rollouts, 0.7, {"someone-else"}) == []
    # only episodes that stop are rehearsed: not one cut off at the step limit, nor one that repeats a call it made
    from trace_gym.pipeline.stages import Rollouts
    from trace_gym.rollout import TrajectoryStore
    from trace_gym.train.demos import repeated_call

    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "get_wifi_status", "arguments": "{}"}}]}
    again = {**call, "tool_calls": [{**call["tool_calls"][0], "id": "c1"}]}
    loops = dataclasses.replace(wins[0], messages=[*wins[0].messages[:2], call, {"role": "tool", "content": "True"},
                                                   again, {"role": "tool", "content": "True"}, *wins[0].messages[2:]])
    assert repeated_call(loops.messages) == "get_wifi_status({})" and repeated_call(wins[0].messages) is None
    store = TrajectoryStore(tmp_path / "mixed.jsonl")
    for x in (dataclasses.replace(wins[0], truncated=True, terminated=False), loops, *wins[1:]):
        store.append(x)
    kept = base_successes(Rollouts(str(store.path)), 0.7)
    assert [d.messages for d in kept] == [episode_demonstration(x)[0].messages for x in wins[1:]]
    # a rejected first action: its turn stays as context, untrained
    bad = dataclasses.replace(t, action_errors=[0])
    assert episode_demonstration(bad)[0].untrained == (next(i for i, m in enumerate(t.messages) if m["role"] == "assistant"),)
    assert episode_demonstration(dataclasses.replace(t, action_errors=[0], actions=[]))[0] is None
    assert episode_demonstration(dataclasses.replace(t, messages=t.messages[:1]))[1] == "no assistant turn"


def test_rehearsal_joint_and_oracle_on_toolsandbox(tmp_path):
    from trace_gym.compare.pipeline import CompareConfig, run_compare
    from trace_gym.compare.pool import pool_runs, pooled_markdown
    from trace_gym.core.outcome import is_success
    from trace_gym.rollout import TrajectoryStore
    from trace_gym.train.outputs import read_manifest

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    fields = {**preset("smoke-toolsandbox"), "out": str(tmp_path / "run"), "cap_rehearse_base": True,
              "methods": ["base", "trace", "single", "joint", "oracle"]}
    cfg = CompareConfig(**fields).validate()
    doc = run_compare(cfg, log=lambda m: None)
    run = tmp_path / "run"
    trace = doc["details"]["trace"]
    assert trace["adapters"], trace.get("note")

    # 1. every adapter rehearsed the base model's successful train episodes (by the run's success threshold)
    base_eps = TrajectoryStore(run / "trace" / "base_rollouts.jsonl").load()
    wins = sum(is_success(t.reward, cfg.success) for t in base_eps)
    assert wins >= 1  # the tiny model ends some insufficient-information scenarios with a (scored) message
    manifest = {a["path"]: a for a in read_manifest(run / "trace" / "adapters" / "manifest.json")["adapters"]}
    for a in trace["adapters"]:
        assert a["rehearsed_base"] == wins == manifest[a["path"]]["rehearsed_base"]
        sft = json.loads((Path(a["path"]) / "warm_start.json").read_text())
        assert sft["demonstrations"] == a["demonstrations"] + a["rehearsed"]
    md = (run / "compare.md").read_text()
    assert f"{wins} of them the base model's own successful train episodes" in md
    assert trace["budget"]["used"] == doc["methods"]["trace"]["rollouts"] <= cfg.budget  # nothing charged for them

    # 2. joint: one adapter on the union of what the adapters trained on, steps scaled, extra cost in the ledger
    joint = doc["details"]["joint"]
    union, rehearsed = [], []
    for a in trace["adapters"]:  # each adapter's SFT: its own demonstrations, then the rehearsed ones (the same for all)
        tasks = json.loads((Path(a["path"]) / "warm_start.json").read_text())["tasks"]
        union += tasks[: a["demonstrations"]]
        rehearsed = tasks[a["demonstrations"]:]
    joint_sft = json.loads((Path(joint["adapter"]) / "warm_start.json").read_text())
    assert joint_sft["tasks"] == union + rehearsed and len(rehearsed) >= wins
    assert joint["sft_steps"] == cfg.train["sft_max_steps"] * len(trace["adapters"]) == joint_sft["steps"]
    assert doc["methods"]["joint"]["eval"]["rewards"].keys() == doc["methods"]["base"]["eval"]["rewards"].keys()
    assert "reference episodes of the capability envs replayed" in md and "joint adapter" in md

    # 3. oracle: per task the better of base and each adapter forced on it; single is one of those evaluations
    stages = doc["stages"]["ran"]
    names = [a["adapter"] for a in trace["adapters"]]
    assert all(f"eval_adapter:{n}" in stages for n in names) and "eval_single" not in stages
    forced = {n: json.loads((run / "stages" / f"eval_adapter:{n}.json").read_text())["result"]["eval"] for n in names}
    base = doc["methods"]["base"]["eval"]["rewards"]
    oracle = doc["methods"]["oracle"]["eval"]
    for task, rs in base.items():
        best = max([sum(rs) / len(rs)] + [sum(f["rewards"][task]) / len(f["rewards"][task]) for f in forced.values()])
        assert sum(oracle["rewards"][task]) / len(oracle["rewards"][task]) == pytest.approx(best)
    assert sum(oracle["picks"].values()) == len(base)
    assert oracle["forced"] == {n: f["rewards"] for n, f in forced.items()}  # each adapter forced alone, kept
    assert doc["methods"]["single"]["eval"]["rewards"] == forced[doc["methods"]["single"]["note"].split()[1]]["rewards"]
    assert "upper reference, not a method" in md and "oracle (reference)" in md

    # a rerun changes nothing
    again = run_compare(CompareConfig(**fields).validate(), log=lambda m: None)
    assert again["stages"]["ran"] == [] and again["methods"]["oracle"]["eval"]["rewards"] == oracle["rewards"]

    # pooling carries both rows (the same run on renamed tasks stands in for its swap)
    other = copy.deepcopy(doc)
    for r in other["methods"].values():
        for key in ("rewards", "ended", "task_groups"):
            r["eval"][key] = {f"{t}#b": v for t, v in (r["eval"].get(key) or {}).items()}
        floor = r["eval"].get("refusal_floor") or {}
        floor["rewards"] = {f"{t}#b": v for t, v in (floor.get("rewards") or {}).items()}
    pooled = pool_runs([doc, other])
    assert {"joint", "oracle"} <= set(pooled["methods"])
    text = pooled_markdown(pooled)
    assert "oracle (reference)" in text and "upper reference, not a method" in text
