"""The shared-prefix loss equals the unshared one; the rollout prefix cache leaves samples unchanged."""

from __future__ import annotations

import json

import pytest

from tests.extras import need

torch = need("torch")
need("trl")
need("peft")

from tests.train.conftest import trained_looking_lora  # noqa: E402
from trace_gym.train.shared_prefix import cache_argument, plan_prefix_clusters, prefix_log_probs, supported  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.skipif(not supported(), reason="needs the layered KV cache API of transformers >= 5")]


def _trainer(tmp_path, *, gradient_checkpointing=False, batch=6, generations=3, temperature=1.0, dtype=None):
    import os

    from datasets import Dataset
    from trl import GRPOConfig

    from trace_gym.train.config import TrainConfig
    from trace_gym.train.models import load_model_and_tokenizer, wrap_lora
    from trace_gym.train.trainer import grpo_trainer_class

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = load_model_and_tokenizer("tiny", seed=0, **({"dtype": dtype} if dtype is not None else {}))
    peft = wrap_lora(model, TrainConfig(lora_r=4, lora_alpha=8, lora_dropout=0.0))
    trained_looking_lora(peft)  # so that LoRA changes the forward
    args = GRPOConfig(output_dir=str(tmp_path / "ckpt"), per_device_train_batch_size=batch, num_generations=generations,
                      max_completion_length=64, beta=0.0, epsilon=0.2, epsilon_high=0.28, loss_type="dapo", report_to="none",
                      use_cpu=True, bf16=False, gradient_checkpointing=gradient_checkpointing, remove_unused_columns=False, max_steps=1,
                      temperature=temperature)
    trainer = grpo_trainer_class()(model=peft, reward_funcs=[lambda completions, **_: [0.0] * len(completions)], args=args,
                                   train_dataset=Dataset.from_dict({"prompt": ["x"] * 8}), processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    peft.train()
    return trainer, peft, tok


def _batch(tok, prompts, completions, env_spans=()):
    pad = tok.pad_token_id
    width_p, width_c = max(map(len, prompts)), max(map(len, completions))
    prompt_ids = torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts])
    prompt_mask = torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in prompts])
    completion_ids = torch.tensor([c + [pad] * (width_c - len(c)) for c in completions])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width_c - len(c)) for c in completions])
    tool_mask = torch.ones_like(completion_mask)
    for row, a, b in env_spans:  # tokens written by the env: no loss
        tool_mask[row, a:b] = 0
    return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids, completion_mask=completion_mask,
                tool_mask=tool_mask, num_items_in_batch=(completion_mask * tool_mask).sum())


def _two_groups(tok):
    """Two GRPO groups of 3: prompts of different lengths (so different left padding) sharing 25 tokens."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(5, 2000, (60,), generator=gen).tolist()
    b = a[:25] + torch.randint(5, 2000, (20,), generator=gen).tolist()
    completions = [torch.randint(5, 2000, (n,), generator=gen).tolist() for n in (5, 9, 14, 3, 14, 7)]
    batch = _batch(tok, [a] * 3 + [b] * 3, completions, env_spans=[(1, 3, 6), (4, 2, 5)])
    batch["advantages"] = torch.tensor([1.0, -0.5, -0.5, 0.3, 0.7, -1.0])
    return batch


def _loss_and_grads(trainer, peft, inputs, shared, prefix_grad="exact"):
    trainer.shared_prefix, trainer.prefix_grad = shared, prefix_grad
    peft.zero_grad()
    loss = trainer.compute_loss(trainer.model_wrapped, dict(inputs))
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in peft.named_parameters() if p.requires_grad}


def _logps(trainer, inputs, shared):
    trainer.shared_prefix = shared
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
    with torch.no_grad():
        logps, ent, _ = trainer._get_per_token_logps_and_entropies(trainer.model_wrapped, ids, mask, inputs["completion_ids"].size(1),
                                                                    compute_entropy=True)
    return logps, ent


@pytest.mark.parametrize("gradient_checkpointing", [False, True])
def test_shared_prefix_loss_and_lora_gradients_equal_the_unshared_computation(tmp_path, gradient_checkpointing):
    trainer, peft, tok = _trainer(tmp_path, gradient_checkpointing=gradient_checkpointing)
    inputs = _two_groups(tok)
    logps, ent = _logps(trainer, inputs, shared=False)
    # Rollouts sampled by slightly older weights: importance ratios away from 1, some clipped.
    inputs["old_per_token_logps"] = logps + 0.3 * torch.randn(logps.shape, generator=torch.Generator().manual_seed(2))

    shared_logps, shared_ent = _logps(trainer, inputs, shared=True)
    mask = inputs["completion_mask"].bool()
    assert (shared_logps - logps)[mask].abs().max() <= 1e-5
    assert (shared_ent - ent)[mask].abs().max() <= 1e-5

    loss_plain, grads_plain = _loss_and_grads(trainer, peft, inputs, shared=False)
    loss_shared, grads_shared = _loss_and_grads(trainer, peft, inputs, shared=True)
    assert abs(float(loss_plain)) > 1e-3  # a loss that depends on the log-probs
    assert abs(float(loss_plain - loss_shared)) <= 1e-5
    assert len(grads_plain) == 2 * 7 * 2  # A and B of 7 target modules in 2 layers
    for name, g in grads_plain.items():
        assert g.abs().max() > 0 or "lora_A" in name
        assert (g - grads_shared[name]).abs().max() <= 1e-5, name
    assert trainer._metrics["train"]["trace/prefix_shared_fraction"][-1] > 0.3


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_full_lm_head_gives_the_fused_heads_log_probs_loss_and_gradients(tmp_path, dtype):
    """``lm_head="full"`` projects every scored token at once (in float32 when the weights are bfloat16), at the
    trainer's temperature; TRL's fused head projects them in chunks: the same computation."""
    trainer, peft, tok = _trainer(tmp_path, temperature=0.7, dtype=getattr(torch, dtype))
    inputs = _two_groups(tok)
    trainer.lm_head = "fused"
    fused_logps, fused_ent = _logps(trainer, inputs, shared=True)
    inputs["old_per_token_logps"] = fused_logps + 0.3 * torch.randn(fused_logps.shape, generator=torch.Generator().manual_seed(2))
    loss_fused, grads_fused = _loss_and_grads(trainer, peft, inputs, shared=True)
    trainer.lm_head = "full"
    full_logps, full_ent = _logps(trainer, inputs, shared=True)
    loss_full, grads_full = _loss_and_grads(trainer, peft, inputs, shared=True)
    mask = inputs["completion_mask"].bool()
    tol = 1e-5 if dtype == "float32" else 2e-2  # bfloat16 hidden states: both heads round them the same way
    assert (full_logps - fused_logps)[mask].abs().max() <= tol and (full_ent - fused_ent)[mask].abs().max() <= tol
    assert abs(float(loss_fused)) > 1e-3 and abs(float(loss_full - loss_fused)) <= tol
    for name, g in grads_fused.items():
        scale = max(float(g.abs().max()), 1e-6)
        assert float((g - grads_full[name]).abs().max()) <= (1e-4 if dtype == "float32" else 5e-2) * scale, name


def test_detached_prefix_keeps_the_loss_and_changes_only_the_gradient(tmp_path):
    trainer, peft, tok = _trainer(tmp_path)
    inputs = _two_groups(tok)
    loss_exact, grads_exact = _loss_and_grads(trainer, peft, inputs, shared=True)
    loss_det, grads_det = _loss_and_grads(trainer, peft, inputs, shared=True, prefix_grad="detached")
    assert abs(float(loss_exact - loss_det)) <= 1e-5
    diff = max(float((grads_exact[n] - grads_det[n]).abs().max()) for n in grads_exact)
    assert diff > 1e-4  # the prompt's keys and values no longer learn
    assert all(torch.isfinite(g).all() for g in grads_det.values())


def test_detached_prefix_matches_a_plain_model_run_on_a_no_grad_cache(tmp_path):
    """Reusable outside GRPO (an SFT step): one row, its own prompt detached, any causal LM without TRL's fused head."""
    from transformers import DynamicCache

    from trace_gym.policies.hf_models import tiny_test_model

    model, tok = tiny_test_model(4)
    model.train()
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(5, 2000, (1, 30), generator=gen)
    answer = torch.randint(5, 2000, (1, 8), generator=gen)
    ids = torch.cat([prompt, answer], 1)
    mask = torch.ones_like(ids)
    clusters = plan_prefix_clusters(ids, mask, 8, min_tokens=4, allow_single=True)
    assert [(c.rows, c.start, c.length) for c in clusters] == [((0,), 0, 29)]
    logps, _ = prefix_log_probs(model, ids, mask, 8, clusters=clusters, prefix_grad="detached", fused=False)
    logps.sum().backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    # The reference: transformers' own cache, filled without gradient, then the answer with gradient.
    with torch.no_grad():
        out = model(input_ids=prompt[:, :29], use_cache=True)
    cache = out.get(cache_argument(model))
    cache = DynamicCache(ddp_cache_data=[(layer.keys, layer.values) for layer in cache.layers], config=model.config)
    out = model(input_ids=ids[:, 29:], position_ids=torch.arange(29, 38)[None], **{cache_argument(model): cache})
    ref = torch.log_softmax(out.logits[:, :-1].float(), -1).gather(-1, answer[..., None]).squeeze(-1)
    ref.sum().backward()
    assert (logps - ref).abs().max() <= 1e-5
    for n, p in model.named_parameters():
        if p.grad is not None:
            assert (p.grad - got[n]).abs().max() <= 1e-5, n


def test_plan_groups_rows_by_padding_and_common_prefix():
    pad = 0
    a, b = list(range(1, 41)), list(range(1, 21)) + list(range(100, 125))
    rows = [[pad] * 5 + a, [pad] * 5 + a, b, b, [pad] * 5 + list(range(200, 240))]
    ids = torch.tensor([r + [7, 7, 7] for r in rows])
    mask = (ids != pad).long()
    clusters = plan_prefix_clusters(ids, mask, 3, min_tokens=8)
    # a and b share 20 tokens but sit at different columns (padding 5 vs 0): never one cluster.  The last
    # prompt token stays with each row: its hidden state scores the first completion token.
    assert sorted((c.rows, c.start, c.length) for c in clusters) == [((0, 1), 5, 39), ((2, 3), 0, 44)]
    assert plan_prefix_clusters(ids, mask, 3, min_tokens=64) == []  # too short to pay: the plain forward


def test_groups_without_a_common_prefix_take_the_plain_path(tmp_path):
    trainer, peft, tok = _trainer(tmp_path, batch=4, generations=2)
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(5, 2000, (30,), generator=gen).tolist() for _ in range(4)]
    inputs = _batch(tok, prompts, [[11, 12, 13]] * 4)
    inputs["advantages"] = torch.tensor([1.0, -1.0, 0.5, -0.5])
    loss_plain, grads_plain = _loss_and_grads(trainer, peft, inputs, shared=False)
    loss_shared, grads_shared = _loss_and_grads(trainer, peft, inputs, shared=True)
    assert float(loss_plain) == float(loss_shared)
    assert all(torch.equal(grads_plain[n], grads_shared[n]) for n in grads_plain)
    assert "trace/prefix_shared_fraction" not in trainer._metrics["train"]


def test_rollout_prefix_cache_leaves_samples_unchanged(tmp_path):
    import tests.train.envs  # noqa: F401
    from trace_gym.registration import make_env_factory
    from trace_gym.train.config import TrainConfig
    from trace_gym.train.episodes import EpisodeRequest, run_token_episodes
    from trace_gym.train.generation import stop_token_ids, transformers_generate_fn
    from trace_gym.train.rollout_func import EnvRolloutFunc

    trainer, peft, tok = _trainer(tmp_path, batch=4, generations=4)
    peft.eval()
    rollout = EnvRolloutFunc(make_env_factory("trace-test/train-multi-v0"), TrainConfig(num_generations=4))
    stops = [tok.decode([i]) for i in stop_token_ids(trainer)]

    def play(cache):
        torch.manual_seed(123)
        generate = transformers_generate_fn(trainer, prefix_cache=cache)
        requests = [EpisodeRequest(5)] * 3 + [EpisodeRequest(6)] * 3
        episodes = run_token_episodes(rollout.env_factory, requests, rollout.renderer(tok), generate, stop_texts=stops,
                                      max_new_tokens_per_turn=8, max_completion_length=80)
        return [(e.completion_ids, e.env_mask, e.reward) for e in episodes], generate.prefix_state["store"]

    plain, none = play(False)
    cached, store = play(True)
    assert none is None and cached == plain
    assert all(len(ids) > 20 for ids, _, _ in plain)  # several turns each
    assert store.stats["reused_tokens"] > store.stats["prefilled_tokens"] > 0


def test_training_with_shared_prefix_gives_the_adapter_of_training_without(tmp_path):
    LR = 1e-3
    from safetensors.torch import load_file

    import tests.train.envs  # noqa: F401
    from trace_gym.train import TrainConfig, train

    def run(name, shared):
        cfg = TrainConfig(env_id="trace-test/train-multi-v0", model="tiny", out=str(tmp_path / name), max_steps=2, num_generations=3,
                          seeds_per_step=2, max_new_tokens_per_turn=6, max_completion_length=48, num_train_seeds=8,
                          learning_rate=LR, lora_r=4, lora_alpha=8, progress=False, plot=False, manifest=False, seed=3,
                          shared_prefix=shared, cpu_threads=1)
        res = train(cfg)
        return load_file(str(res.out / "adapter_model.safetensors")), res

    plain, res_plain = run("plain", False)
    shared, res_shared = run("shared", True)
    assert res_plain.reward_curve == res_shared.reward_curve and res_plain.rollouts == res_shared.rollouts
    # Loss and gradients agree to 1e-5 (the exactness tests above).  Adam divides each gradient entry by its own
    # running scale, so a float-order difference in a near-zero entry can flip that entry's step (a difference
    # of up to 2 × LR in one entry): per tensor, the adapters agree to a small share of their norm, not entry by
    # entry to float precision.
    rel = {k: float((plain[k] - shared[k]).norm() / plain[k].norm().clamp_min(1e-12)) for k in plain}
    assert max(rel.values()) <= 1e-2, sorted(rel.items(), key=lambda kv: -kv[1])[:3]
    assert max(float((plain[k] - shared[k]).abs().max()) for k in plain) <= 2.5 * LR
    assert max(float(v.abs().max()) for k, v in plain.items() if "lora_B" in k) > LR  # it trained
    rows = [json.loads(x) for x in (res_shared.out / "metrics.jsonl").read_text().splitlines()]
    assert all(r["trace/prefix_shared_fraction"] > 0.2 for r in rows)
