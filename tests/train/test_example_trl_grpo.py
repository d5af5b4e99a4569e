"""examples/trl_grpo.py — a trace-gym env in the user's own TRL GRPOTrainer — runs (one step, tiny model),
TRL trains on the tokens the agent played, and the docs' snippet (docs/training.md) is the same program."""

from __future__ import annotations

import json
import re
import runpy
import sys
from pathlib import Path

import pytest

from tests.extras import need

need("trl")
need("peft")

import tests.train.envs  # noqa: E402,F401  (registers trace-test/train-*)

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "trl_grpo.py"


@pytest.fixture
def tiny_folder(tmp_path):
    from trace_gym.policies.hf_models import tiny_test_model

    model, tok = tiny_test_model(0)
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


@pytest.fixture
def scored(monkeypatch):
    """What TRL computes the loss on: the output of every ``_generate_and_score_completions`` call."""
    from trl import GRPOTrainer

    seen: list[dict] = []
    original = GRPOTrainer._generate_and_score_completions

    def recording(self, inputs):
        out = original(self, inputs)
        seen.append(out)
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", recording)
    return seen


def _run_example(monkeypatch, *argv):
    torch = need("torch")
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *map(str, argv)])
    torch.manual_seed(0)
    return runpy.run_path(str(SCRIPT), run_name="__main__")["trainer"]


def test_example_trains_one_step_on_the_agents_tokens_and_saves_an_adapter(tmp_path, tiny_folder, scored, monkeypatch):
    out = tmp_path / "run"
    trainer = _run_example(monkeypatch, "--model", tiny_folder, "--env", "trace-test/train-spread-v0", "--steps", 1,
                           "--out", out, "--mode", "rollout_func")
    assert trainer.state.global_step == 1
    assert (out / "adapter" / "adapter_model.safetensors").exists()
    stats = trainer.rollout_func.stats
    assert stats.rollouts >= 4 and stats.dropped_groups == 0  # one group of four episodes, rewards differ
    # TRL's loss inputs are the episodes' tokens: the agent's count, the env's masked out
    [batch] = scored
    episodes = trainer.rollout_func.last_episodes
    mask = batch["completion_mask"] * batch["tool_mask"]
    for row, ep in enumerate(episodes):
        assert batch["completion_ids"][row][: len(ep.completion_ids)].tolist() == ep.completion_ids
        assert int(mask[row].sum()) == sum(ep.env_mask) > 0
    [logged] = [r for r in trainer.state.log_history if "completions/mean_length" in r]
    assert logged["completions/mean_length"] == pytest.approx(sum(sum(e.env_mask) for e in episodes) / len(episodes))
    assert any("reward" in row for row in trainer.state.log_history)


def test_a_constant_group_reaches_trl_masked_out(tmp_path, tiny_folder, scored, monkeypatch):
    """What a first step that logs ``completions/mean_length`` 0 over 12 rollouts means: the group's four
    episodes had one reward, twice more on fresh seeds, so the group was masked out of the loss."""
    trainer = _run_example(monkeypatch, "--model", tiny_folder, "--env", "trace-test/train-constant-v0", "--steps", 1,
                           "--out", tmp_path / "run", "--mode", "rollout_func")
    stats = trainer.rollout_func.stats
    assert (stats.rollouts, stats.resampled_groups, stats.dropped_groups) == (12, 2, 1)
    [batch] = scored
    assert int((batch["completion_mask"] * batch["tool_mask"]).sum()) == 0
    assert all(len(e.completion_ids) > 0 for e in trainer.rollout_func.last_episodes)  # the agent did play
    [logged] = [r for r in trainer.state.log_history if "completions/mean_length" in r]
    assert logged["completions/mean_length"] == 0


@pytest.mark.usefixtures("toolsandbox_data")
def test_example_warm_starts_then_trains_through_environment_factory_by_default(tmp_path, tiny_folder, monkeypatch,
                                                                               capsys):
    """The example's default mode: a warm start on reference episodes in TRL's template, then TRL's
    environment_factory on a ToolSandbox capability env from that adapter (shortened: 4 episodes, 1 + 1 steps)."""
    out = tmp_path / "run"
    trainer = _run_example(monkeypatch, "--model", tiny_folder, "--warm-demos", 4, "--warm-steps", 1, "--steps", 1,
                           "--generations", 2, "--out", out)
    assert trainer.state.global_step == 1 and trainer.environment_factories is not None
    assert trainer.rollout_func is None
    record = json.loads((out / "warm_start" / "warm_start.json").read_text())
    assert record["steps"] == 1 and record["loss_after"] < record["loss_before"]
    assert (out / "adapter" / "adapter_model.safetensors").exists()
    printed = capsys.readouterr().out
    assert "warm start: 1 steps on 4 reference episodes" in printed
    assert "step 1: env reward" in printed and "mean of the first 1 steps" in printed


def test_the_docs_snippet_is_the_example(tmp_path, tiny_folder, monkeypatch):
    """The TRL snippet of docs/training.md runs as written (here with the tiny model, one step, a short env) and
    loads the packaged model by name, offline, as the example does."""
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    section = text[text.index("## Training with your own RL library"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'load_model_and_tokenizer("smollm2")' in code and "from_pretrained" not in code
    assert "smollm2" in SCRIPT.read_text(encoding="utf-8")
    code = (code.replace('load_model_and_tokenizer("smollm2")', f"load_model_and_tokenizer({str(tiny_folder)!r})")
            .replace("max_steps=10", "max_steps=1").replace('"runs/trl_grpo', f'"{tmp_path}/trl_grpo')
            .replace("trace/cap-refund-policy-v0", "trace-test/train-single-v0")
            .replace('report_to="none"', 'report_to="none", use_cpu=True, bf16=False'))
    need("torch").manual_seed(0)
    scope: dict = {}
    exec(compile(code, "docs/training.md", "exec"), scope)  # noqa: S102
    assert scope["trainer"].state.global_step == 1
    assert (tmp_path / "trl_grpo" / "adapter" / "adapter_model.safetensors").exists()
