"""A training stage killed mid-run (the GRPO baseline of a comparison, a TRACE adapter) continues from its
newest checkpoint when the stage runs again: the ledger keeps what the checkpoint had played, the steps after
it are played once, and the adapter is the one an uninterrupted run makes."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from tests.extras import need
from tests.helpers_adapters import STATE_DEPENDENCY_ENV, adapter_weights

torch = need("torch")
need("trl")
need("peft")

from trace_gym.pipeline import training  # noqa: E402
from trace_gym.pipeline.budget import RolloutBudget  # noqa: E402
from trace_gym.pipeline.training import STAGE_SAVE_STEPS, adapter_train_config, kept_rollouts, train_capability  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("one_torch_thread")]

ENV = STATE_DEPENDENCY_ENV
STAGE = "train:ts-state-dependency"
TRAIN = {"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 4,
         "max_completion_length": 16, "lora_r": 4, "lora_alpha": 8, "learning_rate": 0.05, "save_steps": 2,
         "temperature": 1.0, "progress": False}


class Killed(Exception):
    """Stands for the process being killed."""


def _train(adapters: Path, budget: RolloutBudget, steps: int = 3):
    return train_capability(ENV, "cap-a", adapters, model="tiny", seed=0, train=TRAIN, steps=steps,
                            env_kwargs={"max_steps": 4}, budget=budget)


def test_stages_checkpoint_by_default():
    cfg = adapter_train_config(model="tiny", seed=0, env_id=ENV["env_id"], out=Path("x"), steps=3, train={}, run_name="a")
    assert cfg.save_steps == STAGE_SAVE_STEPS
    cfg = adapter_train_config(model="tiny", seed=0, env_id=ENV["env_id"], out=Path("x"), steps=3,
                               train={"num_iterations": 2}, run_name="a")
    assert cfg.save_steps == 2 * STAGE_SAVE_STEPS
    cfg.validate()
    assert kept_rollouts(Path("no-such-folder")) == 0


def test_a_killed_adapter_training_resumes_from_its_checkpoint(toolsandbox_data, tmp_path, monkeypatch):
    full = _train(tmp_path / "full", RolloutBudget(50, tmp_path / "full.json"))
    assert full.steps == 3 and full.rollouts == 6

    # the same training, killed while it plays step 3 (after the checkpoint of step 2)
    real = training.capability_factory
    episodes = {"n": 0}

    class DiesOnThirdStep(gym.Wrapper):
        def reset(self, **kw):
            episodes["n"] += 1
            if episodes["n"] > 1 + 2 * 2:  # the trainer's probe, then two episodes per step
                raise Killed
            return super().reset(**kw)

    def dying(spec, env_kwargs, budget, stage):
        inner = real(spec, env_kwargs, budget, stage)
        return lambda: DiesOnThirdStep(inner())

    monkeypatch.setattr(training, "capability_factory", dying)
    budget = RolloutBudget(50, tmp_path / "cut.json")
    with pytest.raises(Killed):
        _train(tmp_path / "cut", budget)
    monkeypatch.setattr(training, "capability_factory", real)
    out = tmp_path / "cut" / "cap-a"
    assert (out / "checkpoints" / "checkpoint-2").is_dir() and not (out / "adapter_model.safetensors").exists()
    assert kept_rollouts(out) == 4

    # run again: the ledger keeps the checkpoint's 4 episodes, step 3 is played once more
    again = RolloutBudget(50, tmp_path / "cut.json")
    resumed = _train(tmp_path / "cut", again)
    assert resumed.steps == 3 and resumed.rollouts == 6 == again.stage_used(STAGE)
    assert resumed.trainer_rollouts == full.trainer_rollouts == 6
    assert [r for _, r in resumed.reward_curve] == pytest.approx([r for _, r in full.reward_curve])
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    wa, wb = adapter_weights(Path(full.path)), adapter_weights(out)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-6)
