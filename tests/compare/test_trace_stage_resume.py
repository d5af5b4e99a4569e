"""A TRACE stage killed mid-way resumes without re-spending the rollouts it kept."""

from __future__ import annotations

import dataclasses

import pytest

from trace_gym.compare.budget import RolloutBudget
from trace_gym.compare.pipeline import CompareConfig, base_jobs
from trace_gym.pipeline import Target, play_rollouts


class _Killed(Exception):
    pass


def _trace_base_rollouts(cfg, budget, root, tasks):
    """TRACE's first stage as compare runs it: the base model on ``tasks``, charged to ``budget``."""
    def load():
        pol = cfg.base_policy()
        pol.policy_id = f"base:{cfg.model}"
        return pol

    jobs = [dataclasses.replace(j, policy=load) for j in base_jobs(cfg, tasks)]
    return play_rollouts(Target(cfg.target, cfg.env_kwargs), jobs, root / "trace" / "base_rollouts.jsonl", budget=budget).to_dict()


class _Agent:
    policy_id = "agent"

    def __init__(self, die_after: int | None = None):
        self.die_after, self.episodes = die_after, 0

    def reset(self, seed=None):
        if self.die_after is not None and self.episodes >= self.die_after:
            raise _Killed("killed")
        self.episodes += 1

    def act(self, messages, tools):
        return "I cannot help with that. ###STOP###"


def test_base_rollouts_resume_counts_kept_episodes_once(tmp_path):
    from trace_gym.compare.methods import target_splits

    train, _, _ = target_splits("trace/tau2-mock-v0", seed=0)
    tasks = train[:3]
    dying = _Agent(die_after=1)
    cfg = CompareConfig(target="trace/tau2-mock-v0", out=str(tmp_path), env_kwargs={"max_steps": 4},
                        policy_factory=lambda seed: dying)
    budget = RolloutBudget(10, tmp_path / "trace" / "budget.json")
    with pytest.raises(_Killed):
        _trace_base_rollouts(cfg, budget, tmp_path, tasks)
    assert budget.by_stage == {"base_rollouts": 1}

    cfg.policy_factory = lambda seed: _Agent()
    budget = RolloutBudget(10, tmp_path / "trace" / "budget.json")  # a new process reads the ledger
    res = _trace_base_rollouts(cfg, budget, tmp_path, tasks)
    assert res["n"] == 3 and res["rollouts"] == 3 and budget.by_stage == {"base_rollouts": 3}
    assert res["policy_failures"] == 0

    again = _trace_base_rollouts(cfg, RolloutBudget(10, tmp_path / "trace" / "budget.json"), tmp_path, tasks)
    assert again["rollouts"] == 3  # nothing left to play, nothing charged twice


def test_survey_reports_each_domain_and_split_and_auto_picks_a_target(tmp_path):
    from trace_gym.compare.pipeline import run_compare

    cfg = CompareConfig(target="auto", out=str(tmp_path), methods=["base"], trials=1, n_test_tasks=1,
                        survey_domains=["mock"], survey_tasks=1, env_kwargs={"max_steps": 3},
                        policy_factory=lambda seed: _Agent())
    doc = run_compare(cfg, log=lambda m: None)
    rows = doc["survey"]["rows"]
    assert [(r["domain"], r["split"], r["n_tasks"]) for r in rows] == [("mock", "train", 1), ("mock", "test", 1)]
    assert doc["survey"]["all_zero"] and doc["target"] == "trace/tau2-mock-v0"
    assert "scores 0 on every surveyed domain" in (tmp_path / "compare.md").read_text()
