"""examples/trl_grpo.py — a trace-gym env in the user's own TRL GRPOTrainer — runs (one step, tiny model)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

import tests.train.envs  # noqa: E402,F401  (registers trace-test/train-*)

pytestmark = pytest.mark.model

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"


def test_example_trains_one_step_and_saves_an_adapter(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from trace_gym.policies.hf_models import tiny_test_model

    model, tok = tiny_test_model(0)
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    out = tmp_path / "run"
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), str(tmp_path / "tiny"), "trace-test/train-single-v0", "1", str(out)])
    torch.manual_seed(0)
    scope = runpy.run_path(str(SCRIPT), run_name="__main__")
    trainer = scope["trainer"]
    assert trainer.state.global_step == 1
    assert (out / "adapter" / "adapter_model.safetensors").exists()
    assert trainer.rollout_func.stats.rollouts >= 4  # one group of four episodes played through the env
    assert any("reward" in row for row in trainer.state.log_history)
