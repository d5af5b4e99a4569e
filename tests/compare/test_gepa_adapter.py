from __future__ import annotations

import gymnasium as gym
import pytest

from tests.compare.envs import ENV_ID, MAGIC, InstructionFollower
from tests.extras import need
from trace_gym.compare.budget import BudgetExceeded, RolloutBudget

need("gepa")

from trace_gym.baselines.gepa_adapter import (  # noqa: E402
    BudgetStopper,
    SystemPromptPolicy,
    TraceGEPAAdapter,
    optimize_prompt,
)

SEED_TEXT = "You are a notes assistant."


def _factory():
    return gym.make(ENV_ID, disable_env_checker=True)


def test_system_prompt_policy_replaces_the_anchor_or_prepends():
    inner = InstructionFollower()
    msgs = [{"role": "system", "content": "FRAME\n\n<policy>P</policy>"}, {"role": "user", "content": "hi"}]
    p = SystemPromptPolicy(inner, "NEW", anchor="FRAME")
    assert p.rewrite(msgs)[0]["content"] == "NEW\n\n<policy>P</policy>"
    assert msgs[0]["content"].startswith("FRAME")  # the input is not changed
    q = SystemPromptPolicy(inner, "NEW", anchor="ABSENT")
    assert q.rewrite(msgs)[0]["content"] == "NEW\n\nFRAME\n\n<policy>P</policy>"
    assert SystemPromptPolicy(inner, "NEW").rewrite(msgs[1:])[0] == {"role": "system", "content": "NEW"}
    assert p.policy_id != SystemPromptPolicy(inner, "OTHER", anchor="FRAME").policy_id


def test_adapter_scores_with_env_reward_and_builds_reflective_records(tmp_path):
    budget = RolloutBudget(4, tmp_path / "b.json")
    ad = TraceGEPAAdapter(_factory, InstructionFollower(), budget=budget, seed=0)
    bad = ad.evaluate(["0", "1"], {"system_prompt": SEED_TEXT}, capture_traces=True)
    good = ad.evaluate(["0", "1"], {"system_prompt": MAGIC}, capture_traces=False)
    assert bad.scores == [0.0, 0.0] and good.scores == [1.0, 1.0] and good.trajectories is None
    assert budget.by_stage == {"gepa": 4}
    ds = ad.make_reflective_dataset({"system_prompt": SEED_TEXT}, bad, ["system_prompt"])
    rec = ds["system_prompt"][0]
    assert "groceries" in rec["Inputs"] and "failed" in rec["Feedback"] and "db_match" in rec["Feedback"]
    with pytest.raises(BudgetExceeded):
        ad.evaluate(["2"], {"system_prompt": MAGIC})
    ad.close()


def test_gepa_optimize_finds_the_better_instruction_within_budget(tmp_path):
    prompts: list[str] = []

    def reflection(prompt):  # a scripted reflection model: asks for the magic sentence after a failure
        prompts.append(prompt if isinstance(prompt, str) else str(prompt))
        return f"```\n{MAGIC}\n```" if "failed" in prompts[-1] else f"```\n{SEED_TEXT}\n```"

    budget = RolloutBudget(14, tmp_path / "b.json")
    ad = TraceGEPAAdapter(_factory, InstructionFollower(), budget=budget, seed=0)
    run = optimize_prompt(ad, SEED_TEXT, ["0", "1", "2", "3"], ["0", "1"], reflection_lm=reflection, minibatch=2, seed=0)
    assert run.seed_val_score == 0.0
    assert run.best_val_score == 1.0 and run.best_candidate == {"system_prompt": MAGIC}
    assert budget.used == ad.rollouts == run.rollouts <= 14
    # the stopper ended the run: one more iteration (at most 2 * minibatch + n_val rollouts) would not fit
    assert 0 <= budget.remaining < BudgetStopper(budget, 2, 2).worst
    assert any("reward 0.000" in p for p in prompts)  # the feedback reached the reflection model


def test_optimize_refuses_a_budget_below_the_seed_evaluation(tmp_path):
    ad = TraceGEPAAdapter(_factory, InstructionFollower(), budget=RolloutBudget(1), seed=0)
    with pytest.raises(ValueError, match="validation tasks"):
        optimize_prompt(ad, SEED_TEXT, ["0", "1"], ["0", "1"], reflection_lm=lambda p: "x")


def test_a_failing_reflection_model_is_logged_and_the_budget_still_ends_the_search(tmp_path):
    def broken(prompt):
        raise RuntimeError("reflection model unavailable")

    budget = RolloutBudget(9, tmp_path / "b.json")
    ad = TraceGEPAAdapter(_factory, InstructionFollower(), budget=budget, seed=0)
    run = optimize_prompt(ad, SEED_TEXT, ["0", "1", "2"], ["0", "1"], reflection_lm=broken, minibatch=1, seed=0)
    assert run.best_candidate == {"system_prompt": SEED_TEXT} and run.n_candidates == 1
    assert run.iteration_errors and "reflection model unavailable" in "\n".join(run.iteration_errors)
    assert budget.used <= 9 and budget.remaining < 2 * 1 + 2
