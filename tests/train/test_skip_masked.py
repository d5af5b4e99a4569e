"""The trainer skips the model on batches whose completion tokens are all masked (dropped constant groups)."""

from __future__ import annotations

from tests.extras import need

torch = need("torch")

from trace_gym.train.trainer import _skipping_trainer_class  # noqa: E402


class _Base:
    def __init__(self):
        self.calls = 0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self.calls += 1
        return model(inputs["x"]).sum()


def test_all_masked_batch_gives_a_zero_loss_without_running_the_model():
    trainer = _skipping_trainer_class(_Base)()
    model = torch.nn.Linear(3, 1)
    model.bias.requires_grad_(False)
    x = torch.ones(2, 3)
    loss = trainer.compute_loss(model, {"x": x, "completion_mask": torch.zeros(2, 4)})
    assert trainer.calls == 0 and trainer.skipped_batches == 1
    assert float(loss) == 0.0 and loss.requires_grad
    loss.backward()  # gradients exist and are zero: the optimizer step is the one a masked loss gives
    assert torch.equal(model.weight.grad, torch.zeros_like(model.weight))
    assert model.bias.grad is None


def test_a_batch_with_any_loss_token_runs_the_model():
    trainer = _skipping_trainer_class(_Base)()
    model = torch.nn.Linear(3, 1)
    mask = torch.zeros(2, 4)
    mask[1, 2] = 1
    trainer.compute_loss(model, {"x": torch.ones(2, 3), "completion_mask": mask})
    assert trainer.calls == 1
