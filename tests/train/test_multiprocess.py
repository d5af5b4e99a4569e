"""Data-parallel training: two CPU processes (gloo) train one adapter and sum their rollout accounting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import need

need("torch")
need("trl")
need("peft")

from tests.helpers_net import free_port  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_two_processes_train_one_adapter_and_sum_rollouts(tmp_path, tokenizer):
    out = tmp_path / "adapters" / "dp"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "-m", "trace_gym.cli", "train",
           "--env", "trace-test/train-single-v0", "--model", "tiny", "--out", str(out), "--import", "tests.train.envs",
           "--steps", "2", "--num-generations", "2", "--seeds-per-step", "1", "--max-new-tokens", "6",
           "--max-completion-length", "16", "--cpu-threads", "1", "--no-progress", "--json",
           "--set", "lora_r=4", "--set", "lora_alpha=8", "--set", "resample_constant_groups=false", "--set", "save_steps=2"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    # One adapter, written once (by process 0), and one manifest entry.
    assert (out / "adapter_model.safetensors").exists() and (out / "adapter_config.json").exists()
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir() if not p.name.startswith(".")) == ["dp", "manifest.json"]
    entries = json.loads((tmp_path / "adapters" / "manifest.json").read_text())["adapters"]
    assert len(entries) == 1

    # 2 steps x 2 processes x 1 group x 2 rollouts, summed across the processes, in every record.
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert [r["rollouts"] for r in rows] == [4, 8]
    entry = next(iter(entries.values())) if isinstance(entries, dict) else entries[0]
    assert entry["rollouts_used"] == 8 and entry["rollout_stats"]["groups"] == 4
    saved = json.loads((out / "checkpoints" / "checkpoint-2" / "trace_gym_rollouts.json").read_text())
    assert saved["stats"]["rollouts"] == 8
    summaries = [json.loads(block) for block in _json_blocks(proc.stdout)]
    assert len(summaries) == 2 and all(s["rollouts_used"] == 8 for s in summaries)  # each process reports the total


def _json_blocks(text: str) -> list[str]:
    blocks, depth, start = [], 0, None
    for i, ch in enumerate(text):
        if ch == "{":
            depth, start = depth + 1, i if depth == 0 else start
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                blocks.append(text[start : i + 1])
    return [b for b in blocks if '"adapter"' in b]
