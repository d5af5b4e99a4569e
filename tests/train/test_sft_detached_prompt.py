"""The opt-in detached-prompt SFT loss: same loss value as plain SFT, gradient only through the trained tokens."""

from __future__ import annotations

import pytest

from tests.extras import need

torch = need("torch")
need("trl")
need("peft")

from tests.train.conftest import trained_looking_lora  # noqa: E402
from trace_gym.train.config import ConfigError, TrainConfig  # noqa: E402
from trace_gym.train.shared_prefix import detached_prompt_loss, supported  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.skipif(not supported(), reason="needs the layered KV cache API of transformers >= 5")]

DEMO_ENV = "trace/cap-ts-state-dependency-v0"


@pytest.fixture(scope="module")
def demos():
    from trace_gym.train.demos import build_demonstrations

    return build_demonstrations([DEMO_ENV], 3, start=1).demos


def _lora_model(seed=0):
    from trace_gym.policies.hf import tiny_test_model
    from trace_gym.train.models import wrap_lora

    model, tok = tiny_test_model(seed=seed)
    peft = wrap_lora(model, TrainConfig(lora_r=4, lora_alpha=8, lora_dropout=0.0))
    trained_looking_lora(peft)  # so that LoRA changes the forward
    peft.train()
    return peft, tok


def _batch(tok, demos):
    """Right-padded rows with labels -100 off the assistant tokens, as TRL's SFT collator builds them."""
    from trace_gym.train.chat import ChatRenderer
    from trace_gym.train.demos import tokenize_demonstration

    rows = [tokenize_demonstration(ChatRenderer(tok), d) for d in demos]
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id or 0)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), -100)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        mask[i, :n] = 1
        labels[i, :n] = torch.where(torch.tensor(r["assistant_masks"]) == 1, ids[i, :n], -100)
    return ids, mask, labels


def _grads(peft):
    return {n: p.grad.clone() for n, p in peft.named_parameters() if p.requires_grad}


def test_detached_prompt_loss_equals_the_plain_sft_loss(demos):
    peft, tok = _lora_model()
    ids, mask, labels = _batch(tok, demos)
    assert len({int(r.ne(-100).int().argmax()) for r in labels}) > 1  # the rows' prompts differ in length
    peft.zero_grad()
    plain = peft(input_ids=ids, attention_mask=mask, labels=labels).loss
    plain.backward()
    plain_grads = _grads(peft)
    peft.zero_grad()
    detached = detached_prompt_loss(peft, ids, mask, labels)
    detached.backward()
    grads = _grads(peft)
    assert abs(float(detached) - float(plain)) <= 1e-5
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert sum(float(g.abs().sum()) for g in grads.values()) > 0
    # the approximation: no gradient through the prompt's keys and values, so the gradients differ
    assert max(float((grads[n] - plain_grads[n]).abs().max()) for n in grads) > 1e-6
    # the trainer's item count across gradient accumulation sets the denominator
    count = labels[:, 1:].ne(-100).sum()
    with torch.no_grad():
        assert float(detached_prompt_loss(peft, ids, mask, labels, num_items=2 * count)) == pytest.approx(float(plain) / 2, rel=1e-5)


def test_a_batch_whose_prompt_is_too_short_takes_the_plain_path(demos):
    peft, tok = _lora_model()
    ids, mask, labels = _batch(tok, demos[:1])
    labels[0, 5:] = ids[0, 5:]  # scored from column 5 on: a 4-token prompt is under min_tokens
    with torch.no_grad():
        plain = peft(input_ids=ids, attention_mask=mask, labels=labels).loss
        assert float(detached_prompt_loss(peft, ids, mask, labels)) == pytest.approx(float(plain), abs=1e-5)


def test_a_detached_prompt_warm_start_lowers_the_loss(tmp_path, demos):
    from trace_gym.policies.hf import tiny_test_model
    from trace_gym.train.sft import warm_start

    model, tok = tiny_test_model(seed=3)
    cfg = TrainConfig(env_id="", model="tiny", out=str(tmp_path / "sft"), sft_max_steps=4, sft_batch_size=2,
                      sft_learning_rate=2e-2, lora_r=4, lora_alpha=8, progress=False, seed=3, sft_prefix_grad="detached")
    res = warm_start(cfg, model=model, tokenizer=tok, demos=demos[:2], manifest=False)
    assert res.steps == 4 and res.record["config"]["sft_prefix_grad"] == "detached"
    assert res.record["loss_after"] < res.record["loss_before"] - 0.1


def test_an_unknown_sft_prefix_mode_is_refused():
    with pytest.raises(ConfigError, match="sft_prefix_grad"):
        TrainConfig(sft_prefix_grad="partial").validate()


def test_the_head_projects_only_the_scored_positions(demos):
    """The loss's logits are the scored tokens' only (the memory of an SFT batch), with the full head's value and
    gradient."""
    from trace_gym.train.shared_prefix import scored_nll

    peft, tok = _lora_model()
    ids, mask, labels = _batch(tok, demos)
    targets = labels[:, 1:]
    rows: list[int] = []
    head = peft.get_base_model().get_output_embeddings()
    hook = head.register_forward_hook(lambda _m, _i, out: rows.append(out.reshape(-1, out.size(-1)).size(0)))
    try:
        peft.zero_grad()
        kept = scored_nll(peft, {"input_ids": ids, "attention_mask": mask}, targets)
        kept.backward()
        kept_grads = _grads(peft)
    finally:
        hook.remove()
    assert rows == [int(targets.ne(-100).sum())] and rows[0] < ids.numel() // 2
    peft.zero_grad()
    full = peft(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    whole = torch.nn.functional.cross_entropy(full.reshape(-1, full.size(-1)), targets.reshape(-1), ignore_index=-100,
                                              reduction="sum")
    whole.backward()
    assert float(kept) == pytest.approx(float(whole), rel=1e-5)
    assert all(torch.allclose(kept_grads[n], g, rtol=1e-4, atol=1e-6) for n, g in _grads(peft).items())
