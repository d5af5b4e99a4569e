"""End to end with TRL's GRPOTrainer and a tiny random-weight Llama (SmolLM2's tokenizer).

Kept small: a few GRPO steps of a few short rollouts each.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.extras import need
from tests.helpers_adapters import adapter_weights

torch = need("torch")
need("trl")
need("peft")

from tests.train.envs import HINT  # noqa: E402
from trace_gym.train import TrainConfig, train  # noqa: E402

pytestmark = pytest.mark.model


def _cfg(tmp_path, name, **kw):
    base = dict(env_id="trace-test/train-single-v0", model="tiny", out=str(tmp_path / "adapters" / name), max_steps=2,
                num_generations=2, seeds_per_step=2, max_new_tokens_per_turn=6, max_completion_length=32,
                num_train_seeds=8, learning_rate=5e-2, lora_r=4, lora_alpha=8, progress=False, save_steps=1, seed=3)
    base.update(kw)
    return TrainConfig(**base)


class _Interrupt(Exception):
    pass


def test_train_outputs_and_exact_resume(tmp_path, capsys):
    from transformers import TrainerCallback

    # One uninterrupted run, through the command line.
    from trace_gym.cli import main

    cfg_full = _cfg(tmp_path, "full")
    (tmp_path / "train.json").write_text(json.dumps({k: v for k, v in cfg_full.to_dict().items() if k not in ("env_id", "model", "out", "max_steps")}))
    rc = main(["train", "--env", "trace-test/train-single-v0", "--model", "tiny", "--out", cfg_full.out, "--config", str(tmp_path / "train.json"),
               "--steps", "2", "--import", "tests.train.envs", "--json"])
    assert rc == 0
    out = tmp_path / "adapters" / "full"
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    full = SimpleNamespace(out=out, steps=2, rollouts=rows[-1]["rollouts"], reward_curve=[(r["step"], r["reward"]) for r in rows])
    assert (out / "adapter_config.json").exists() and (out / "adapter_model.safetensors").exists()
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 4
    assert full.steps == 2 and full.rollouts >= 2 * 4  # 2 steps x 2 groups x 2 rollouts, plus any resamples
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and rows[-1]["rollouts"] == full.rollouts
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((tmp_path / "adapters" / "manifest.json").read_text())
    [entry] = manifest["adapters"]
    assert entry["env_id"] == "trace-test/train-single-v0" and entry["base_model"] == "tiny"
    assert entry["steps"] == 2 and entry["rollouts_used"] == full.rollouts and len(entry["reward_curve"]) == 2
    assert entry["config"]["beta"] == 0.0
    weights = adapter_weights(out)
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in weights.items())  # LoRA B starts at zero: it learned

    # The same run interrupted right after the step-1 checkpoint, then resumed.
    class StopAfterFirstSave(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 1:
                raise _Interrupt

    cfg = _cfg(tmp_path, "resumed")
    capsys.readouterr()
    with pytest.raises(_Interrupt):
        train(cfg, callbacks=[StopAfterFirstSave()])
    resumed = train(cfg, resume=True)
    assert "'loss'" not in capsys.readouterr().out  # no progress line, and no printed log dicts either
    assert resumed.steps == 2
    assert resumed.rollouts == full.rollouts
    assert [s for s, _ in resumed.reward_curve] == [s for s, _ in full.reward_curve] == [1, 2]
    assert [r for _, r in resumed.reward_curve] == pytest.approx([r for _, r in full.reward_curve])
    a, b = adapter_weights(out), adapter_weights(resumed.out)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-6)
    manifest = json.loads((tmp_path / "adapters" / "manifest.json").read_text())
    assert sorted(e["name"] for e in manifest["adapters"]) == ["full", "resumed"]


def test_multi_turn_hints_are_replaced_before_the_loss(tmp_path, tokenizer):
    """Through the real trainer: the loss sees hint-free prompts and masks env tokens."""
    from trl import GRPOConfig, GRPOTrainer

    from trace_gym.integrations.trl import grpo_trainer_kwargs
    from trace_gym.train.chat import ChatRenderer
    from trace_gym.train.models import load_model_and_tokenizer, wrap_lora

    model, tok = load_model_and_tokenizer("tiny", seed=0)
    cfg = TrainConfig(lora_r=4, lora_alpha=8)
    seen = []

    class Recording(GRPOTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            seen.append({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)})
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    kwargs = grpo_trainer_kwargs("trace-test/train-multi-v0", seeds=range(4), num_generations=4, hint_fraction=0.5,
                                 max_new_tokens_per_turn=5, max_completion_length=96, max_resamples=0, drop_constant_groups=False)
    args = GRPOConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, num_generations=4, max_steps=1,
                      max_completion_length=96, beta=0.0, epsilon_high=0.28, loss_type="dapo", report_to="none",
                      use_cpu=True, disable_tqdm=True, save_strategy="no", logging_steps=1, seed=0)
    trainer = Recording(model=wrap_lora(model, cfg), args=args, processing_class=tok, **kwargs)
    trainer.train()
    rollout = kwargs["rollout_func"]
    episodes = rollout.last_episodes
    assert sum(e.hint_shown for e in episodes) == 2
    [batch] = seen
    renderer = ChatRenderer(tok)
    import gymnasium as gym

    env = gym.make("trace-test/train-multi-v0", disable_env_checker=True)
    _, info = env.reset(seed=episodes[0].seed, options={"hint": False})
    hint_free = renderer.prompt_ids(info["messages"], info["tools"])
    for row in range(4):
        ids = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        assert ids == hint_free  # hinted or not, the loss conditions on the hint-free prompt
        assert HINT not in tok.decode(ids)
    hinted = [e for e in episodes if e.hint_shown]
    assert all(HINT in tok.decode(e.generation_prompt_ids) for e in hinted)
    # Env-written tokens are masked out of the loss; agent tokens are in it.  (TRL shuffles the rows of a
    # generation batch, so rows are matched to episodes by their completion.)
    by_completion = {tuple(e.completion_ids): e for e in episodes}
    for row in range(4):
        n = int(batch["completion_mask"][row].sum())
        e = by_completion[tuple(batch["completion_ids"][row][:n].tolist())]
        assert batch["tool_mask"][row][:n].tolist() == e.env_mask
    assert any(0 in e.env_mask for e in episodes)


def test_bf16_without_gradient_checkpointing_trains_on_cpu(tmp_path):
    """The CPU speed settings (``dtype=bfloat16``, no recomputation) run GRPO and the adapter learns."""
    cfg = _cfg(tmp_path, "bf16", max_steps=1, save_steps=0, dtype="bfloat16", gradient_checkpointing=False)
    res = train(cfg)
    assert res.steps == 1
    weights = adapter_weights(tmp_path / "adapters" / "bf16")
    assert any("lora_B" in k and v.float().abs().sum() > 0 for k, v in weights.items())
