"""The GRPO sampler's merged copy of the model: the trained adapter's outputs at the base model's speed."""

from __future__ import annotations

from types import SimpleNamespace

from tests.extras import need

torch = need("torch")
peft = need("peft")
need("trl")

from trace_gym.policies.hf_models import tiny_test_model  # noqa: E402
from trace_gym.train.generation import fast_sampling, sampler_model  # noqa: E402


def _trainer(model, **extra):
    from accelerate import Accelerator

    return SimpleNamespace(accelerator=Accelerator(cpu=True), model=model, args=SimpleNamespace(), **extra)


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits[0, -1]


def test_the_sampler_is_a_plain_merged_copy_that_follows_the_trained_adapter():
    model, tok = tiny_test_model(seed=0)
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    torch.manual_seed(1)
    pm = peft.get_peft_model(model, cfg)
    ids = tok("hello there", return_tensors="pt")["input_ids"]
    trainer = _trainer(pm)
    before = {n: p.detach().clone() for n, p in pm.named_parameters() if "lora_" not in n}
    sampler = sampler_model(trainer)
    assert not isinstance(sampler, peft.PeftModel) and not any(p.requires_grad for p in sampler.parameters())
    assert torch.allclose(_logits(sampler, ids), _logits(pm, ids), atol=1e-5)
    with torch.no_grad():  # a training step moves the adapter
        for n, p in pm.named_parameters():
            if "lora_B" in n:
                p.add_(0.05 * torch.randn_like(p))
    assert not torch.allclose(_logits(sampler, ids), _logits(pm, ids), atol=1e-4)
    again = sampler_model(trainer)
    assert again is sampler  # refreshed in place, not copied again
    assert torch.allclose(_logits(sampler, ids), _logits(pm, ids), atol=1e-5)
    # the trained model's own base weights are never touched
    assert all(torch.equal(p, before[n]) for n, p in pm.named_parameters() if "lora_" not in n)


def test_sampling_settings_that_need_generate_take_it():
    model, _ = tiny_test_model(seed=0)
    assert fast_sampling(_trainer(model, repetition_penalty=1.0))
    assert not fast_sampling(_trainer(model, repetition_penalty=1.2))
    plain = _trainer(model)
    plain.args = SimpleNamespace(generation_kwargs={"no_repeat_ngram_size": 3})
    assert not fast_sampling(plain)
    assert sampler_model(_trainer(model)) is model  # a model without LoRA samples as it is
