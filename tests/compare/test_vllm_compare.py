"""A comparison that trains twice in one process on (fake) vLLM leaves no engine behind.

``trace-gym compare --budgets`` (the GPU configuration's command) trains GRPO once per budget in one
process; vLLM does not free an in-process engine by itself, so each training must free its own before the
next starts its engine.
"""

from __future__ import annotations

import pytest

from tests.extras import need

need("torch")
need("trl")
need("gepa")

from tests.helpers_vllm import FakeLLM, install, live_engines, save_tiny_model  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_two_trainings_in_one_comparison_leave_no_engine_behind(tmp_path, monkeypatch):
    from trace_gym.compare.pipeline import CompareConfig, run_scaling

    fake = install(monkeypatch)
    folder = save_tiny_model(tmp_path / "model")
    cfg = CompareConfig(
        target="trace/tau2-mock-v0", model=folder, budget=4, out=str(tmp_path / "run"), trials=1, methods=["base", "grpo"],
        n_train_tasks=3, n_test_tasks=1, env_kwargs={"max_steps": 2}, gen={"max_new_tokens": 4, "temperature": 1.0},
        train={"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 4,
               "max_completion_length": 32, "lora_r": 4, "lora_alpha": 8, "backend": "vllm"},
        max_train_steps=1)
    doc = run_scaling(cfg, [2, 4], log=lambda m: None)
    assert [r["methods"]["grpo"]["rollouts"] for r in doc["runs"]] == [2, 2]  # one GRPO step per budget
    assert len(FakeLLM.created) == 2  # one engine per training ...
    assert [e["alive_before"] for e in FakeLLM.created] == [0, 0]  # ... each started with no other alive
    assert all(e["record"]["syncs"] == 1 and e["record"]["requests"] for e in FakeLLM.created)
    assert live_engines() == 0 and fake.calls.count("destroy_model_parallel") == 2
