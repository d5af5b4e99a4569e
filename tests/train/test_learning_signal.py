"""A run that learned nothing says so; training shows progress and no third-party deprecation warnings."""

from __future__ import annotations

import io
import json
import warnings
from types import SimpleNamespace

import pytest

from tests.extras import need
from trace_gym.train.trainer import learning_signal

pytestmark = pytest.mark.model


def test_learning_signal_counts_constant_groups():
    assert learning_signal(SimpleNamespace(groups=4, constant_groups=4)) == {"constant_group_fraction": 1.0, "learned": False}
    assert learning_signal(SimpleNamespace(groups=4, constant_groups=1)) == {"constant_group_fraction": 0.25, "learned": True}
    assert learning_signal(SimpleNamespace(groups=0, constant_groups=0))["learned"] is False  # nothing played


def test_constant_reward_run_warns_loudly_reports_progress_and_hides_renamed_api_warnings(tmp_path, capsys):
    need("trl")
    from rich.console import Console

    from trace_gym.cli import main
    from trace_gym.progress import reporting

    out = tmp_path / "adapters" / "constant"
    con = Console(file=io.StringIO(), width=80, color_system=None)
    with warnings.catch_warnings(record=True) as caught, reporting(con, interval_s=3600):
        warnings.simplefilter("always")
        rc = main(["train", "--env", "trace-test/train-constant-v0", "--model", "tiny", "--out", str(out), "--steps", "1",
                   "--import", "tests.train.envs", "--json", "--set", "num_generations=2", "--set", "seeds_per_step=1",
                   "--set", "max_resamples=0", "--set", "max_new_tokens_per_turn=4", "--set", "max_completion_length=16",
                   "--set", "gradient_checkpointing=true", "--set", "lora_r=2", "--set", "lora_alpha=4",
                   "--set", "plot=false"])
    assert rc == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["learned"] is False and summary["constant_group_fraction"] == 1.0
    assert "warning:" in captured.err and "nothing was learned" in captured.err and "constant reward" in captured.err
    entry = json.loads((out.parent / "manifest.json").read_text())["adapters"][0]
    assert entry["learned"] is False and entry["constant_group_fraction"] == 1.0
    assert entry["rollout_stats"]["constant_groups"] == entry["rollout_stats"]["groups"] == 1
    # the training progress line joined the open display
    assert "train constant: 1/1 steps (100%)" in con.file.getvalue()
    renamed = [str(w.message) for w in caught if issubclass(w.category, FutureWarning) and "checkpointing" in str(w.message)]
    assert renamed == []
