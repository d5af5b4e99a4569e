"""GRPO through TRL's vLLM path on a CPU, with vLLM replaced by the fake of ``tests/helpers_vllm.py``.

TRL's own ``VLLMGeneration`` (engine construction, weight sync, generation, log-prob extraction) and its
importance-sampling correction run for real; only vLLM's engine is the fake.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.extras import need
from tests.helpers_adapters import adapter_weights

torch = need("torch")
need("trl")
need("peft")

from tests.helpers_vllm import FakeLLM, install, live_engines, save_tiny_model  # noqa: E402
from trace_gym.train import TrainConfig, train  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture
def fake_vllm(monkeypatch):
    return install(monkeypatch)


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def _cfg(tmp_path, folder, name="vllm", **kw):
    base = dict(env_id="trace-test/train-multi-v0", model=folder, out=str(tmp_path / "adapters" / name), backend="vllm",
                max_steps=2, num_generations=2, seeds_per_step=2, max_new_tokens_per_turn=6, max_completion_length=64,
                num_train_seeds=8, learning_rate=5e-2, lora_r=4, lora_alpha=8, progress=False, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def _rows(cfg):
    return [json.loads(x) for x in (Path(cfg.out) / "metrics.jsonl").read_text().splitlines()]


def test_grpo_steps_train_through_trls_vllm_path(tmp_path, fake_vllm, model_folder):
    """Two GRPO steps sample every turn in (fake) vLLM and train; the importance-sampling correction gets vLLM's
    log-probs of exactly the agent tokens, which equal the trained model's own (the weights synced are the
    trained ones, LoRA merged), at each step."""
    cfg = _cfg(tmp_path, model_folder)
    res = train(cfg)
    assert res.steps == 2
    weights = adapter_weights(tmp_path / "adapters" / "vllm")
    assert any("lora_B" in k and v.float().abs().sum() > 0 for k, v in weights.items())  # the adapter learned

    [engine] = FakeLLM.created
    assert engine["args"]["model"] == model_folder and engine["args"]["logprobs_mode"] == "processed_logprobs"
    rec = engine["record"]
    assert rec["syncs"] == 2  # once per step, before its rollouts, not once per turn
    assert rec["tensors"] == 2 * len(rec["names"])
    # every weight vLLM holds came from the trainer, under vLLM's (the base model's) names
    assert "model.layers.0.self_attn.q_proj.weight" in rec["names"] and not any("lora" in n for n in rec["names"])
    rows = _rows(cfg)
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:  # vLLM's log-probs are the trained model's (float32 on both sides)
        assert r["sampling/sampling_logp_difference/max"] < 1e-4, r
        assert math.isclose(r["sampling/importance_sampling_ratio/mean"], 1.0, abs_tol=1e-4)
    # each turn asked for the turn's limit, not the episode's, and stops where the transformers sampler does
    limits = {sp.max_tokens for sp in rec["requests"]}
    assert limits and max(limits) <= 6
    tok_eos = engine["record"]["requests"][0].stop_token_ids
    assert tok_eos and all(sp.include_stop_str_in_output and sp.logprobs == 0 for sp in rec["requests"])
    assert all(sp.stop == ["</tool_call>"] for sp in rec["requests"])  # SmolLM2's call format ends an action there
    assert live_engines() == 0 and "destroy_model_parallel" in fake_vllm.calls  # the engine was freed


def test_rollouts_return_vllm_logprobs_aligned_with_the_completion(tmp_path, fake_vllm, model_folder):
    """The rollout function's ``logprobs``: one per completion token, vLLM's on the agent's tokens and 0 on the
    env's, each the log-prob of that token under the synced weights."""
    from trace_gym.train.rollout_func import seed_prompt
    from trace_gym.train.vllm import install_weight_sync, release_vllm

    trainer, rollout = _trainer(tmp_path, model_folder, _cfg(tmp_path, model_folder, max_completion_length=256).validate())
    try:
        assert install_weight_sync(trainer)
        trainer.vllm_generation.sync_weights()
        out = rollout([seed_prompt(1)] * 2, trainer)
        assert out["logprobs"] is not None and any(0 in mask for mask in out["env_mask"])  # env tokens between turns
        for ids, mask, lps, prompt in zip(out["completion_ids"], out["env_mask"], out["logprobs"], out["prompt_ids"], strict=True):
            assert len(lps) == len(ids) == len(mask)
            assert all(lp == 0.0 for lp, m in zip(lps, mask, strict=True) if m == 0)
            with torch.no_grad():  # the trained model's log-probs of the same tokens
                logits = trainer.model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float()
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
            agent = torch.tensor(mask, dtype=torch.bool)
            assert torch.allclose(torch.tensor(lps)[agent], ref[agent], atol=1e-4)
    finally:
        release_vllm(trainer)


def _trainer(tmp_path, folder, cfg, dtype=None):
    from trl import GRPOTrainer

    from trace_gym.registration import make_env_factory
    from trace_gym.train.models import load_model_and_tokenizer, wrap_lora
    from trace_gym.train.rollout_func import EnvRolloutFunc, env_reward, seed_dataset
    from trace_gym.train.trainer import _grpo_args

    model, tok = load_model_and_tokenizer(folder, dtype=dtype)
    tok.padding_side = "left"
    rollout = EnvRolloutFunc(make_env_factory(cfg.env_id), TrainConfig(
        num_generations=cfg.num_generations, max_new_tokens_per_turn=cfg.max_new_tokens_per_turn,
        max_completion_length=cfg.max_completion_length, seed=3))
    args = _grpo_args(cfg, tmp_path, "cpu", dtype or torch.float32)
    trainer = GRPOTrainer(model=wrap_lora(model, cfg), reward_funcs=[env_reward], args=args,
                          train_dataset=seed_dataset(range(4)), processing_class=tok, rollout_func=rollout)
    return trainer, rollout


def test_weight_sync_sends_merged_weights_and_leaves_the_trained_ones_exact(tmp_path, fake_vllm, model_folder):
    """Twenty syncs of a bfloat16 model with a non-zero LoRA: vLLM holds W + scale·BA each time, and the
    trained model's base weights are bit for bit what they were (TRL's own sync merges and unmerges in place)."""
    from tests.train.conftest import trained_looking_lora
    from trace_gym.policies.lora_merge import lora_layers, merged_weights
    from trace_gym.train.vllm import install_weight_sync, release_vllm

    cfg = _cfg(tmp_path, model_folder, dtype="bfloat16").validate()
    trainer, _ = _trainer(tmp_path, model_folder, cfg, dtype=torch.bfloat16)
    try:
        peft = trainer.model
        trained_looking_lora(peft, scale=0.05)
        before = {path: layer.get_base_layer().weight.detach().clone() for path, layer in lora_layers(peft)}
        assert install_weight_sync(trainer)
        for _ in range(20):
            trainer.vllm_generation.sync_weights()
        for path, layer in lora_layers(peft):
            assert torch.equal(layer.get_base_layer().weight, before[path]), path
        held = trainer.vllm_generation.llm.sampler.model.state_dict()
        for path, merged in merged_weights(peft, "default").items():
            assert not torch.equal(merged, before[path])  # the adapter changes the weight ...
            assert torch.equal(held[path + ".weight"], merged.float())  # ... and vLLM holds the merged weight
    finally:
        release_vllm(trainer)


def test_sleep_mode_wakes_the_engine_once_per_batch_of_rollouts(tmp_path, fake_vllm, model_folder):
    """With vLLM's sleep mode, a batch of multi-turn rollouts wakes the engine (and sends the weights) once and
    puts it back to sleep at the end; TRL's generate alone would do both at every turn."""
    cfg = _cfg(tmp_path, model_folder, name="sleep", vllm_enable_sleep_mode=True, max_steps=1, max_completion_length=256)
    assert train(cfg).steps == 1
    [engine] = FakeLLM.created
    assert engine["args"]["enable_sleep_mode"] is True
    rec = engine["record"]
    assert rec["calls"] >= 2  # turns: the multi-turn env's episodes take several
    assert rec["syncs"] == 1 and rec["sleeps"] == 2  # asleep after the engine starts, and after the rollouts
