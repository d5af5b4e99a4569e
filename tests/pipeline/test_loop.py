"""The TRACE loop's first four stages on τ²-bench retail with the demo's flawed scripted agent (no model needed):
analysis finds the planted flaw, synthesis makes its env, calibration scores it, and a rerun resumes every stage."""

from __future__ import annotations

import pytest

from trace_gym.pipeline import RolloutBudget, RolloutJob, StageStore, Target, TracePlan, run_trace
from trace_gym.pipeline.settings import CalibrationSettings, RoutingSettings, SynthesisSettings, TrainingSettings

ENV_ID = "trace/tau2-retail-v0"


class Noop:
    policy_id = "noop"

    def act(self, messages, tools):
        return "Okay."


def _jobs(n: int) -> list[RolloutJob]:
    from trace_gym.demo.flawed import demo_tasks, flawed_policy, flawed_script, task_database, variants_for, write_tools

    tasks = demo_tasks(ENV_ID, n)
    db, writes = task_database(ENV_ID), write_tools(ENV_ID, tasks[0]["id"])
    return [RolloutJob(f"flawed-scripted:{v}", str(t["id"]), 0, flawed_policy(flawed_script(t, v, writes, db), v))
            for t in tasks for v in variants_for(t, writes, db)]


def test_loop_stops_at_mastered_capabilities_and_resumes(tmp_path):
    jobs = _jobs(3)
    seen = []
    plan = TracePlan(target=Target(ENV_ID, {"unjudged_nl": "ignore"}), root=tmp_path, model="unused", base_policy=Noop,
                     jobs=jobs, synthesis=SynthesisSettings(max_envs=1),
                     calibration=CalibrationSettings(calib_seeds=1, calib_samples=2, cap_env_kwargs={"max_steps": 2},
                                                     reference_seeds=2, mastered=0.0),
                     budget=RolloutBudget(100, tmp_path / "budget.json"))
    run = run_trace(plan, StageStore(tmp_path), on_stage=lambda name, res: seen.append(name))
    assert seen == ["rollouts", "analysis", "synthesis", "calibration", "training"]
    assert run.rollouts.by_policy["flawed-scripted:faithful"] == {"episodes": 3, "passed": 3}
    assert run.rollouts.by_policy["flawed-scripted:wrong-payment"]["passed"] == 0
    assert "refund-policy-compliance" in run.analysis.selected and run.analysis.chosen == run.analysis.selected
    [env] = run.synthesis.envs
    [cal] = run.calibration.envs
    assert cal["env_id"] == env["env_id"] and cal["episodes"] == 2 and cal["reference_mean_reward"] == 1.0
    assert cal["train"] is False and run.adapters == [] and "falls back to the base model" in run.note
    # every learning episode is charged (the reference solution's are not)
    assert plan.budget.by_stage == {"base_rollouts": len(jobs), "calibration": 2}
    assert run.rollouts.rollouts == len(jobs) and run.calibration.rollouts == 2

    again = StageStore(tmp_path)
    plan.budget = RolloutBudget(100, tmp_path / "budget.json")  # a new process reads the ledger
    rerun = run_trace(plan, again)
    assert again.ran == [] and again.skipped == ["rollouts", "analysis", "synthesis", "calibration", "training"]
    assert rerun.calibration == run.calibration and rerun.analysis == run.analysis
    assert plan.budget.used == len(jobs) + 2  # nothing charged twice


class Closing(Noop):
    """A base policy that says whether it was closed; ``log`` is shared by every one made."""

    log: list[str] = []

    def __init__(self):
        Closing.log.append("loaded")

    def close(self):
        Closing.log.append("closed")


def test_the_base_policy_is_loaded_once_and_closed_before_training(tmp_path):
    Closing.log = []
    seen = []
    plan = TracePlan(target=Target(ENV_ID, {"unjudged_nl": "ignore"}), root=tmp_path, model="unused", base_policy=Closing,
                     jobs=_jobs(1) + [RolloutJob("noop", "0", 0, None)], synthesis=SynthesisSettings(max_envs=1),
                     calibration=CalibrationSettings(calib_seeds=1, calib_samples=2, cap_env_kwargs={"max_steps": 2},
                                                     mastered=0.0))
    run_trace(plan, StageStore(tmp_path), on_stage=lambda name, res: seen.append((name, list(Closing.log))))
    # one policy played the rollouts and the calibration; the trainer started after it was closed
    assert dict(seen)["calibration"] == ["loaded"] and dict(seen)["training"] == ["loaded", "closed"]
    assert Closing.log == ["loaded", "closed"]


def test_a_target_without_a_tool_domain_is_skipped_before_any_rollout(tmp_path):
    from tests.compare.envs import ENV_ID as NOTES

    plan = TracePlan(target=Target(NOTES), root=tmp_path, model="unused", base_policy=Noop,
                     jobs=[RolloutJob("noop", "0", 0, None)])
    run = run_trace(plan, StageStore(tmp_path))
    assert run.rollouts is None and "no tool domain" in run.skipped and not (tmp_path / "stages").exists()


@pytest.mark.parametrize("spare", [0, 1, 5])
def test_the_knob_search_leaves_the_training_share_and_resumes_its_charges(tmp_path, spare):
    """A base model far below the band makes calibration search the knobs; the search stops where the next
    setting would eat into what training and routing need, and a rerun charges nothing again."""
    import json

    from trace_gym.pipeline import training_reserve

    jobs = _jobs(3)
    train = {"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0}
    kw = dict(target=Target(ENV_ID, {"unjudged_nl": "ignore"}), root=tmp_path, model="unused", base_policy=Noop,
              jobs=jobs, synthesis=SynthesisSettings(max_envs=1),
              calibration=CalibrationSettings(calib_seeds=1, calib_samples=2, cap_env_kwargs={"max_steps": 2}, mastered=0.0,
                                              band=(0.9, 1.0), tune_rounds=3),
              training=TrainingSettings(train=train, cap_warm_demos=3), routing=RoutingSettings(routing_seeds=2))
    assert training_reserve(TracePlan(**kw), 1) == 0  # no budget, nothing to leave
    reserve = 3 + 2 + 2  # demonstrations, one step of one group of 2, routing
    total = len(jobs) + 2 + reserve + spare
    plan = TracePlan(**kw, budget=RolloutBudget(total, tmp_path / "budget.json"))
    assert training_reserve(plan, 1) == reserve and training_reserve(plan, 2) == 2 * reserve
    run = run_trace(plan, StageStore(tmp_path))
    [cal] = run.calibration.envs
    searched = spare // 2 * 2  # whole settings of 2 episodes each, within what the reserve leaves
    assert plan.budget.by_stage == {"base_rollouts": len(jobs), "calibration": 2 + searched}
    assert plan.budget.remaining >= reserve and cal["episodes"] == 2 + searched
    doc = json.loads(open(cal["calibration"], encoding="utf-8").read())
    assert doc["tune_episodes"] == searched and (doc["tuned"] is None) == (searched == 0)
    if not searched:  # the row says why the search did not start
        assert doc["tune_note"] == cal["tune_stopped"] and f"training and routing keep {reserve}" in cal["tune_stopped"]
    if searched:
        assert doc["tuned"]["max_episodes"] == spare and "stopped" in doc["tuned"]["trace"][-1]
        assert cal["tune_settings"] == 1 + searched // 2 and "max_episodes" in cal["tune_stopped"]

    plan.budget = RolloutBudget(total, tmp_path / "budget.json")  # a new process reads the ledger
    again = StageStore(tmp_path)
    run_trace(plan, again)
    assert "calibration" in again.skipped and plan.budget.used == len(jobs) + 2 + searched


def test_tune_episodes_caps_each_envs_search_without_a_budget(tmp_path):
    import json

    jobs = _jobs(3)
    plan = TracePlan(target=Target(ENV_ID, {"unjudged_nl": "ignore"}), root=tmp_path, model="unused", base_policy=Noop,
                     jobs=jobs, synthesis=SynthesisSettings(max_envs=1),
                     calibration=CalibrationSettings(calib_seeds=1, calib_samples=2, cap_env_kwargs={"max_steps": 2},
                                                     mastered=0.0, band=(0.9, 1.0), tune_rounds=3, tune_episodes=5))
    run = run_trace(plan, StageStore(tmp_path))
    [cal] = run.calibration.envs
    doc = json.loads(open(cal["calibration"], encoding="utf-8").read())
    assert doc["tune"]["max_episodes"] == 5 and doc["tune_episodes"] == 4 == doc["tuned"]["max_episodes"] - 1
    assert cal["episodes"] == 2 + 4 and "stopped" in doc["tuned"]["trace"][-1]
