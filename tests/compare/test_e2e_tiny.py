"""End to end on τ²-bench mock with the tiny random-weight model: every method really runs.

Mock has no train/test split (its tasks are split in half) and no starter capability
template, so TRACE reports that it fell back to the base model; GRPO trains one step
and GEPA runs with the tiny model as its own reflection model.
"""

from __future__ import annotations

import json

import pytest

from tests.extras import need

need("torch")
need("trl")
need("gepa")

from trace_gym.compare.pipeline import CompareConfig, run_compare  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_tiny_compare_on_mock(tmp_path):
    cfg = CompareConfig(
        target="trace/tau2-mock-v0", model="tiny", budget=4, out=str(tmp_path / "run"), trials=1,
        n_train_tasks=3, n_test_tasks=2, env_kwargs={"max_steps": 3}, gen={"max_new_tokens": 6, "temperature": 1.0},
        train={"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 6,
               "max_completion_length": 48, "lora_r": 4, "lora_alpha": 8},
        max_train_steps=1, gepa_val=2, gepa_minibatch=1, base_tasks=2)
    doc = run_compare(cfg, log=lambda m: None)
    m = doc["methods"]
    assert set(m) == {"base", "grpo", "gepa", "trace", "single"}
    for name, r in m.items():
        assert r["rollouts"] <= 4, name
        assert r["eval"]["n_tasks"] == 2 and set(r["eval"]["results"]) == set(doc["splits"]["test"])
    assert doc["details"]["grpo"]["steps"] == 1 and m["grpo"]["rollouts"] == 2  # one step, one group of two
    assert doc["details"]["grpo"]["trainer_rollouts"] == 2  # the trainer's own count agrees with the ledger
    assert 2 <= m["gepa"]["rollouts"] <= 4
    assert "falls back to the base model" in m["trace"]["note"]
    assert not set(doc["splits"]["train"]) & set(doc["splits"]["test"])
    ledger = json.loads((tmp_path / "run" / "grpo" / "budget.json").read_text())
    assert ledger["by_stage"] == {"train": 2}
    assert (tmp_path / "run" / "compare.png").exists() and "GRPO on target" in (tmp_path / "run" / "compare.md").read_text()
