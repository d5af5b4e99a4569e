"""TRACE's capability warm start (``TracePlan.warm_demos``, ``compare --set cap_warm_demos=N``) with the tiny
model: each capability adapter is first SFT'd on reference episodes of its own env's train split, those episodes
are charged to the rollout budget, a finished adapter is kept on resume and its demonstrations are charged again,
and with no GRPO step left the warm start alone is the adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.extras import need
from tests.helpers_adapters import ROOT, STATE_DEPENDENCY_ENV, adapter_weights

torch = need("torch")
need("trl")
need("peft")

from trace_gym.pipeline.budget import RolloutBudget  # noqa: E402
from trace_gym.pipeline.training import train_capability  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_torch_thread")]

ENV = STATE_DEPENDENCY_ENV
TRAIN = {"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 4,
         "max_completion_length": 16, "lora_r": 4, "lora_alpha": 8, "learning_rate": 0.0, "sft_max_steps": 2,
         "sft_batch_size": 1, "sft_prefix_grad": "detached", "progress": False}


def test_an_adapter_warm_starts_on_its_own_env_then_trains_and_the_demonstrations_are_charged(toolsandbox_data, tmp_path):
    adapters = tmp_path / "adapters"
    budget = RolloutBudget(20, tmp_path / "budget.json")
    a = train_capability(ENV, "cap-a", adapters, model="tiny", seed=0, train=TRAIN, steps=1,
                         env_kwargs={"max_steps": 4}, budget=budget, warm_demos=3)
    assert a.skipped is None and a.demonstrations == 3 and a.steps == 1
    assert a.trainer_rollouts == 2 and a.rollouts == 3 + 2 == budget.stage_used("train:ts-state-dependency")
    out = Path(a.path)
    ws = out / "warm_start"
    record = json.loads((ws / "warm_start.json").read_text())
    assert record["envs"] == [ENV["env_id"]] and record["steps"] == 2 and record["demonstrations"] == 3
    assert record["config"]["sft_prefix_grad"] == "detached"
    # GRPO (lr 0) started from the warm start, which really trained
    before, after = adapter_weights(ws), adapter_weights(out)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert any(float(v.abs().sum()) > 0 for k, v in before.items() if "lora_B" in k)
    entry = json.loads((adapters / "manifest.json").read_text())["adapters"][0]
    assert entry["demonstrations"] == 3 and entry["warm_start"]["per_env"] == {ENV["env_id"]: 3}

    # resume with a fresh ledger: the adapter is kept, and its demonstrations are charged again with its rollouts
    again = RolloutBudget(20, tmp_path / "budget2.json")
    b = train_capability(ENV, "cap-a", adapters, model="tiny", seed=0, train=TRAIN, steps=1,
                         env_kwargs={"max_steps": 4}, budget=again, warm_demos=3)
    assert b.path == a.path and again.stage_used("train:ts-state-dependency") == 5
    assert json.loads((ws / "warm_start.json").read_text())["created"] == record["created"]


def test_with_no_grpo_step_left_the_warm_start_is_the_adapter(toolsandbox_data, tmp_path):
    adapters = tmp_path / "adapters"
    budget = RolloutBudget(4, tmp_path / "budget.json")
    a = train_capability(ENV, "cap-sft", adapters, model="tiny", seed=0, train=TRAIN, steps=0,
                         env_kwargs={"max_steps": 4}, budget=budget, warm_demos=2)
    assert a.skipped is None and a.steps == 0 and a.demonstrations == 2 and a.rollouts == 2 == budget.used
    assert (Path(a.path) / "adapter_model.safetensors").exists() and not (Path(a.path) / "warm_start").exists()
    entry = json.loads((adapters / "manifest.json").read_text())["adapters"][0]
    assert entry["kind"] == "sft" and entry["path"] == a.path and entry["demonstrations"] == 2
    # without demonstrations, no step is no adapter
    skipped = train_capability(ENV, "cap-none", adapters, model="tiny", seed=0, train=TRAIN, steps=0,
                               env_kwargs={"max_steps": 4}, budget=budget)
    assert skipped.skipped and not (adapters / "cap-none").exists()


def test_demonstrations_beyond_the_budget_are_refused_before_training(toolsandbox_data, tmp_path):
    from trace_gym.pipeline.budget import BudgetExceeded

    budget = RolloutBudget(1, tmp_path / "budget.json")
    with pytest.raises(BudgetExceeded):
        train_capability(ENV, "cap-x", tmp_path / "adapters", model="tiny", seed=0, train=TRAIN, steps=0,
                         env_kwargs={"max_steps": 4}, budget=budget, warm_demos=2)
    assert not (tmp_path / "adapters" / "cap-x" / "adapter_model.safetensors").exists()


def test_rehearsal_adds_the_shared_warm_starts_episodes_without_charging_them(toolsandbox_data, tmp_path):
    """``Rehearsal``: an adapter's SFT also trains on the episodes the shared warm start was made from (the same
    envs, tasks and seed), so it keeps what that start taught; they were played once already and are not charged."""
    from trace_gym.pipeline.training import Rehearsal
    from trace_gym.train.demos import build_demonstrations

    other = "trace/cap-ts-insufficient-information-v0"
    rehearsal = Rehearsal((other,), 2, seed=0)
    demos = rehearsal.demonstrations()
    assert [d.env_id for d in demos] == [other, other]
    same = build_demonstrations([other], 2, seed=0).demos  # what a warm start on that env with that seed plays
    assert [d.messages for d in demos] == [d.messages for d in same]
    budget = RolloutBudget(4, tmp_path / "budget.json")
    a = train_capability(ENV, "cap-r", tmp_path / "adapters", model="tiny", seed=0, train=TRAIN, steps=0,
                         env_kwargs={"max_steps": 4}, budget=budget, warm_demos=2, rehearsal=rehearsal)
    assert a.skipped is None and a.demonstrations == 2 and a.rehearsed == 2 and a.rollouts == 2 == budget.used
    entry = json.loads((tmp_path / "adapters" / "manifest.json").read_text())["adapters"][0]
    assert entry["rehearsed"] == 2 and entry["demonstrations"] == 2
    record = json.loads((Path(a.path) / "warm_start.json").read_text())
    assert record["demonstrations"] == 4 and set(record["per_env"]) == {ENV["env_id"], other}


def test_the_warm_start_rehearsal_and_the_base_models_episodes_compose(toolsandbox_data, tmp_path):
    """A rehearsal of the shared warm start's episodes plus the base model's own successful target episodes (here
    a refusing agent's, played into a real rollout store): the adapter trains on both, records both counts and
    is charged for neither."""
    import dataclasses

    from trace_gym.eval.floor import RefusalPolicy
    from trace_gym.pipeline import RolloutJob, Target, play_rollouts
    from trace_gym.pipeline.training import Rehearsal, base_successes

    target = Target("trace/toolsandbox-v0", {"max_steps": 3}, success=0.7)
    tasks = [t for t in target.task_ids("train") if t.endswith("insufficient_information")][:1]
    rollouts = play_rollouts(target, [RolloutJob(RefusalPolicy.policy_id, t, 0, RefusalPolicy()) for t in tasks],
                             tmp_path / "rollouts.jsonl")
    episodes = tuple(base_successes(rollouts, target.threshold))
    assert len(episodes) == 1
    other = "trace/cap-ts-insufficient-information-v0"
    rehearsal = dataclasses.replace(Rehearsal((other,), 1, seed=0), episodes=episodes)
    assert [d.env_id for d in rehearsal.demonstrations()] == [other, "trace/toolsandbox-v0"]
    budget = RolloutBudget(4, tmp_path / "budget.json")
    a = train_capability(ENV, "cap-r", tmp_path / "adapters", model="tiny", seed=0, train=TRAIN, steps=0,
                         env_kwargs={"max_steps": 4}, budget=budget, warm_demos=2, rehearsal=rehearsal)
    assert (a.demonstrations, a.rehearsed, a.rehearsed_base, a.rollouts, budget.used) == (2, 2, 1, 2, 2)
    record = json.loads((Path(a.path) / "warm_start.json").read_text())
    assert record["demonstrations"] == 4 and set(record["per_env"]) == {ENV["env_id"], other, "trace/toolsandbox-v0"}


def test_each_adapter_rehearses_the_other_adapters_demonstrations_charged_once(toolsandbox_data, tmp_path):
    """``TracePlan.rehearse_peers``: each adapter's SFT also trains on the demonstrations the other adapter learns
    from (the same reference episodes of its env), for as many passes as over its own (sft_max_steps × 2 envs);
    each env's demonstrations are charged once, to its own adapter's stage."""
    from trace_gym.pipeline import Target, TracePlan
    from trace_gym.pipeline.loop import _train_all
    from trace_gym.pipeline.settings import CalibrationSettings, RoutingSettings, TrainingSettings
    from trace_gym.pipeline.stages import Calibration, capability_factory
    from trace_gym.pipeline.training import adapter_demonstrations, adapter_train_config

    other = {"capability": "ts-multiple-tool-call", "env_id": "trace/cap-ts-multiple-tool-call-v0",
             "spec": str(ROOT / "envs" / "cap-ts-multiple-tool-call.yaml")}
    envs = [{**ENV, "train": True}, {**other, "train": True}]
    budget = RolloutBudget(40, tmp_path / "budget.json")
    plan = TracePlan(target=Target("trace/toolsandbox-v0", {"max_steps": 4}), root=tmp_path, model="tiny",
                     base_policy=lambda: None, jobs=[],
                     training=TrainingSettings(train={**TRAIN, "sft_max_steps": 1}, train_steps=0, cap_warm_demos=2,
                                               cap_rehearse_peers=True),
                     calibration=CalibrationSettings(cap_env_kwargs={"max_steps": 4}),
                     routing=RoutingSettings(routing_seeds=0), budget=budget, name_adapter=lambda i, cap: f"cap-{i}")
    training = _train_all(plan, Calibration(envs), None)
    assert [a.rehearsed_peers for a in training.adapters] == [2, 2] and not training.skipped
    for a, e, peer in zip(training.adapters, envs, reversed(envs), strict=True):
        assert a.demonstrations == 2 and a.rehearsed == 2 and budget.stage_used(f"train:{e['capability']}") == 2
        record = json.loads((Path(a.path) / "warm_start.json").read_text())
        assert record["steps"] == 2 and record["demonstrations"] == 4
        assert record["per_env"] == {e["env_id"]: 2, peer["env_id"]: 2}
        # what it rehearsed of its peer is what the peer's own SFT drew
        cfg = adapter_train_config(model="tiny", seed=0, env_id=peer["env_id"], out=tmp_path / "x", steps=0,
                                   train=plan.training.train, run_name="x")
        drawn = adapter_demonstrations(cfg, capability_factory(peer["spec"], {"max_steps": 4}, None, "x"), 2).demos
        assert [f"{d.env_id}#{d.task_id}" for d in drawn] == [t for t in record["tasks"] if t.startswith(peer["env_id"])]
    assert budget.used == 4
    entry = json.loads((tmp_path / "adapters" / "manifest.json").read_text())["adapters"][0]
    assert entry["rehearsed_peers"] == 2
