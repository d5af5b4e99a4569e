"""The accelerate configs of ``examples/accelerate/`` load as accelerate reads them, and the data-parallel one
starts a training: two CPU processes under ``accelerate launch`` with it (its GPU fields overridden by ``--cpu``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import need

need("accelerate")
need("trl")

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "examples" / "accelerate"


@pytest.mark.parametrize(("name", "kind"), [("multi_gpu.yaml", "MULTI_GPU"), ("zero3.yaml", "DEEPSPEED")])
def test_configs_load_as_accelerate_reads_them(name, kind):
    from accelerate.commands.config.config_args import load_config_from_file

    cfg = load_config_from_file(str(CONFIGS / name))
    assert str(cfg.distributed_type).endswith(kind) and cfg.mixed_precision == "bf16" and cfg.num_processes == 4
    if kind == "DEEPSPEED":
        assert cfg.deepspeed_config["zero_stage"] == 3


@pytest.mark.model
@pytest.mark.slow
def test_the_data_parallel_config_starts_a_training(tmp_path):
    out = tmp_path / "adapters" / "dp"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / "multi_gpu.yaml"), "--cpu",
           "--num_processes", "2", "--mixed_precision", "no", "-m", "trace_gym.cli", "train", "--env", "trace-test/train-single-v0",
           "--model", "tiny", "--out", str(out), "--import", "tests.train.envs", "--steps", "1", "--num-generations", "2",
           "--max-new-tokens", "4", "--max-completion-length", "16", "--cpu-threads", "1", "--no-progress",
           "--set", "lora_r=2", "--set", "lora_alpha=4", "--set", "resample_constant_groups=false"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "adapter_model.safetensors").exists()
