"""The GPU configuration on a CPU: the ``gpu`` preset of ``benchmarks/trace_vs_baselines.py`` through to TRL's
arguments and one GRPO step on (fake) vLLM, and the memory estimate of a 7B run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.extras import need

torch = need("torch")
need("trl")
need("peft")

from tests.helpers_vllm import FakeLLM, install, save_tiny_model  # noqa: E402
from trace_gym.train import TrainConfig  # noqa: E402

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3


def _gpu_preset() -> dict:
    spec = importlib.util.spec_from_file_location("trace_vs_baselines", ROOT / "benchmarks" / "trace_vs_baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PRESETS["gpu"]


def _qwen_7b_on_meta(cfg: TrainConfig):
    """Qwen2.5-7B-Instruct's architecture with LoRA, on the meta device (shapes and dtypes, no memory)."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    from trace_gym.train.models import wrap_lora

    conf = Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768, tie_word_embeddings=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16)
        return wrap_lora(model, cfg)


@pytest.mark.slow
def test_memory_estimate_of_the_gpu_preset_picks_a_micro_batch_that_fits():
    """Qwen2.5-7B with the gpu preset's GRPO settings (16 sequences of ~5k prompt + 8k episode tokens): the whole
    batch in one backward does not fit an 80 GiB GPU beside vLLM's share; the plan splits it into micro-batches
    that do, and says what it chose."""
    from trace_gym.train.memory import estimate_memory, plan_memory

    cfg = TrainConfig(**{k: v for k, v in _gpu_preset()["train"].items() if k in TrainConfig.field_names()}).validate()
    model = _qwen_7b_on_meta(cfg)
    common = dict(device="cuda", prompt_tokens=5000, use_vllm=True, sampler_copy=False, device_total=80 * GIB)
    whole = estimate_memory(cfg, model, sequences=16, **common)
    assert whole.fits is False and "does not fit" in whole.line()
    assert 14 * GIB < whole.weights < 14.5 * GIB  # 7.6B bf16 parameters
    assert whole.vllm == int(0.3 * 80 * GIB) and whole.checkpointing
    plan = plan_memory(cfg, model, **common)
    assert plan.fits and plan.sequences < 16 and 16 % plan.sequences == 0
    assert estimate_memory(cfg, model, sequences=plan.sequences * 2, **common).fits is False  # the largest that fits
    assert f"{plan.sequences} sequences" in plan.line() and "checkpointing on" in plan.line()
    # without checkpointing every layer keeps its activations: far more
    off = estimate_memory(TrainConfig(**{**cfg.to_dict(), "gradient_checkpointing": False}), model, sequences=plan.sequences, **common)
    assert off.activations > 10 * plan.activations
    # on a CPU (device memory unknown) the whole batch is one backward, as before
    assert plan_memory(cfg, model, **{**common, "device_total": None}).sequences == 16


@pytest.mark.slow
def test_gpu_preset_goes_through_to_trl_and_vllm(tmp_path, monkeypatch):
    """The gpu preset's training settings, as the comparison builds them, reach TRL's ``GRPOConfig`` and its
    vLLM engine; a group of rollouts then samples each turn in vLLM with the preset's per-turn limit, the call
    format's stop string and the end-of-turn tokens, and hands TRL vLLM's log-prob of every agent token.
    (One GRPO step through the same path is ``tests/train/test_vllm.py``'s.)"""
    from trl import GRPOTrainer

    from trace_gym.pipeline.training import adapter_train_config
    from trace_gym.registration import make_env_factory
    from trace_gym.train.rollout_func import env_reward, seed_dataset, seed_prompt
    from trace_gym.train.trainer import _grpo_args, _model_with_lora, _rollout_function
    from trace_gym.train.vllm import release_vllm

    fake = install(monkeypatch)
    folder = save_tiny_model(tmp_path / "model")
    preset = _gpu_preset()["train"]
    cfg = adapter_train_config(model=folder, seed=0, env_id="trace-test/train-single-v0", out=tmp_path / "adapters" / "gpu",
                               steps=1, train={**preset, "progress": False, "backend": "vllm"},  # auto's choice on a GPU
                               run_name="gpu").validate()
    args = _grpo_args(cfg, tmp_path, "cpu", torch.bfloat16)
    assert args.use_vllm and args.vllm_mode == "colocate" and args.vllm_gpu_memory_utilization == 0.3
    assert args.vllm_enable_sleep_mode is False and args.vllm_max_model_length is None
    assert args.vllm_importance_sampling_correction and args.vllm_importance_sampling_mode == "sequence_mask"
    assert args.max_completion_length == preset["max_completion_length"] == 8192
    assert args.num_generations == 8 and args.per_device_train_batch_size * args.gradient_accumulation_steps == 16
    assert args.bf16 and (getattr(args, "gradient_checkpointing", None) or getattr(args, "activation_checkpointing", None))

    _, tok, peft = _model_with_lora(cfg, None, None, torch.bfloat16)
    rollout = _rollout_function(cfg, make_env_factory(cfg.env_id), None)
    trainer = GRPOTrainer(model=peft, reward_funcs=[env_reward], args=args, train_dataset=seed_dataset(range(4)),
                          processing_class=tok, rollout_func=rollout)
    try:
        [engine] = FakeLLM.created
        assert engine["args"]["gpu_memory_utilization"] == 0.3 and engine["args"]["enable_sleep_mode"] is False
        assert engine["args"]["max_num_seqs"] == 16 and engine["args"]["logprobs_mode"] == "processed_logprobs"
        trainer.vllm_generation.sync_weights()
        out = rollout([seed_prompt(0)] * 8, trainer)  # one group of the preset's 8
    finally:
        release_vllm(trainer)
    requests = engine["record"]["requests"]
    assert len(requests) % 8 == 0 and {sp.max_tokens for sp in requests} == {preset["max_new_tokens_per_turn"]}
    assert all(sp.stop == ["</tool_call>"] and sp.stop_token_ids and sp.include_stop_str_in_output and sp.logprobs == 0
               for sp in requests)
    assert len(out["logprobs"]) == 8
    for ids, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
        assert len(lps) == len(ids) <= preset["max_new_tokens_per_turn"] and all(m == 1 for m in mask)
        assert all(lp <= 0.0 for lp in lps)
    assert "destroy_model_parallel" in fake.calls
