"""``micro_batch_size``: a step's rollouts split into accumulated micro-batches give the whole batch's update."""

from __future__ import annotations

import pytest

from tests.extras import need

torch = need("torch")
need("trl")
need("peft")

from trace_gym.train import TrainConfig, train  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _gradients(tmp_path, name, micro):
    from transformers import TrainerCallback

    seen: dict = {}

    class Capture(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            seen["accumulation"] = args.gradient_accumulation_steps
            seen["micro"] = args.per_device_train_batch_size
            seen["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    cfg = TrainConfig(env_id="trace-test/train-single-v0", model="tiny", out=str(tmp_path / name), max_steps=1,
                      num_generations=2, seeds_per_step=2, micro_batch_size=micro, max_new_tokens_per_turn=6,
                      max_completion_length=32, num_train_seeds=8, lora_r=4, lora_alpha=8, progress=False, seed=3,
                      max_grad_norm=1e9, resample_constant_groups=False, drop_constant_groups=False)
    train(cfg, callbacks=[Capture()])
    return seen


def test_micro_batches_accumulate_to_the_whole_batch_gradient(tmp_path):
    whole = _gradients(tmp_path, "whole", None)
    split = _gradients(tmp_path, "split", 1)
    assert (whole["micro"], whole["accumulation"]) == (4, 1) and (split["micro"], split["accumulation"]) == (1, 4)
    assert whole["grads"].keys() == split["grads"].keys() and whole["grads"]
    total = sum(float(g.abs().sum()) for g in whole["grads"].values())
    assert total > 0
    for name, g in whole["grads"].items():
        assert torch.allclose(g, split["grads"][name], rtol=1e-4, atol=1e-7), name


def test_micro_batch_must_divide_the_step(tmp_path):
    from trace_gym.train import ConfigError

    with pytest.raises(ConfigError, match="micro_batch_size must divide"):
        TrainConfig(num_generations=4, seeds_per_step=1, micro_batch_size=3).validate()
