"""The seed is one setting: every draw of a comparison follows it, and seed 0 keeps the values stored runs were made with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compare.bench import preset
from trace_gym.compare.pipeline import CompareConfig, base_jobs, trace_plan
from trace_gym.compare.resume import check_config


def _draws(cfg: CompareConfig, tmp_path: Path) -> dict:
    """Every seed a comparison hands on: evaluation, base rollouts, the TRACE loop, the warm start, the splits' order."""
    from trace_gym.compare.methods import target_splits
    from trace_gym.compare.pipeline import _warm_settings

    train, test, _ = target_splits(cfg.target, seed=cfg.seed, train_split=cfg.train_split, test_split=cfg.test_split)
    plan = trace_plan(cfg, None, tmp_path, train[:4])
    warm = _warm_settings(cfg)
    return {"eval": cfg.evaluation_seed, "stored_eval": cfg.to_dict()["eval_seed"],
            "grpo": plan.training.train["train_seed_start"],
            "jobs": [j.seed for j in base_jobs(cfg, train[:2])], "plan": plan.seed, "warm": warm.seed if warm else None,
            "train_order": train, "test_order": test}


def test_seed_zero_keeps_the_stored_values_and_another_seed_moves_every_draw(tmp_path):
    kw = {"target": "trace/toolsandbox-v0", "model": "smollm2", "warm_start": True}
    zero, again, one = (_draws(CompareConfig(seed=s, **kw), tmp_path) for s in (0, 0, 1))
    assert zero == again
    assert (zero["eval"], zero["stored_eval"], zero["jobs"], zero["plan"], zero["warm"], zero["grpo"]) == (1000, 1000, [0, 0], 0, 0, 0)
    assert (one["eval"], one["jobs"], one["plan"], one["warm"], one["grpo"]) == (1001, [1, 1], 1, 1, 10_000)
    assert CompareConfig(seed=1, train={"train_seed_start": 5}).train_settings["train_seed_start"] == 5
    assert one["train_order"] != zero["train_order"] and sorted(one["train_order"]) == sorted(zero["train_order"])
    assert CompareConfig(seed=1, eval_seed=7).evaluation_seed == 7  # an explicit evaluation seed still wins
    # a stored run of seed 0 resumes, and one at another seed is refused in the same folder
    root = tmp_path / "run"
    root.mkdir()
    check_config(CompareConfig(**kw), root)
    assert check_config(CompareConfig(eval_seed=1000, **kw), root) == []
    with pytest.raises(ValueError, match="changed: eval_seed, seed"):
        check_config(CompareConfig(seed=1, **kw), root)


def test_the_seed_flag_of_the_benchmark_and_the_cli():
    import argparse

    from trace_gym.cli import compare as cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", "--seed", "3", "--set", "cap_rehearse_base=true", "--set", "cap_warm_demos=2",
                              "--methods", "base,trace,joint,oracle"])
    cfg = cli.build_config(args)
    assert (cfg.seed, cfg.evaluation_seed, cfg.cap_rehearse_base, cfg.methods) == (3, 1003, True, ["base", "trace", "joint", "oracle"])
    cpu = CompareConfig(**preset("cpu-toolsandbox")).validate()
    assert cpu.cap_rehearse_base and {"joint", "oracle"} <= set(cpu.methods)


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_the_same_seed_plays_the_same_episodes_and_another_seed_others(tmp_path):
    """The base model's held-out episodes (tiny model, ToolSandbox) at seeds 0, 0 and 1."""
    from tests.extras import need, need_smollm2

    need("torch")
    need_smollm2()
    from trace_gym.compare.pipeline import run_compare
    from trace_gym.rollout import TrajectoryStore

    fields = {**preset("smoke-toolsandbox"), "methods": ["base"], "n_test_tasks": 2}

    def episodes(seed: int, out: str) -> list:
        doc = run_compare(CompareConfig(**{**fields, "seed": seed, "out": str(tmp_path / out)}).validate(), log=lambda m: None)
        eps = TrajectoryStore(tmp_path / out / "eval" / "base.jsonl").load()
        return sorted([(t.options["scenario"], t.seed, t.actions) for t in eps if t.policy_id != "refusal-floor"]), doc

    (a, doc_a), (b, _), (c, doc_c) = episodes(0, "a"), episodes(0, "b"), episodes(1, "c")
    assert a == b and a != c
    assert doc_a["seeds"]["eval_seed"] == 1000 and doc_c["seeds"]["eval_seed"] == 1001
    assert {s for _, s, _ in c} == {1001}
