"""Data-parallel rollouts whose sampler is a collective: two CPU processes whose episodes take different
numbers of turns (and resample different numbers of groups) finish, each with its own episodes."""

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

from tests.helpers_net import free_port  # noqa: E402
from tests.helpers_vllm import save_tiny_model  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run_two_ranks(folder: str, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """The worker under ``torch.distributed.run``; on a timeout (a hang) the launcher and its workers are
    killed and :class:`subprocess.TimeoutExpired` raised."""
    import psutil  # accelerate's dependency

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "-m", "tests.train.lockstep_worker", folder, *extra]
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            launcher = psutil.Process(proc.pid)
            for p in [*launcher.children(recursive=True), launcher]:  # the workers hold the pipes open
                p.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_ranks_playing_different_numbers_of_turns_finish(tmp_path):
    folder = save_tiny_model(tmp_path / "model")
    proc = run_two_ranks(folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["rank"]: r for r in (json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{"))}
    assert sorted(rows) == [0, 1]
    assert rows[0]["turns"] == [1, 1] and rows[0]["seeds"] == [11, 11]  # one turn each, no resample
    assert rows[1]["seeds"][0] != 0 and rows[1]["resampled"] == 1  # its constant 3-turn group was drawn again
    assert rows[0]["rollouts"] == 6  # each process's group of 2, and process 1's redrawn group of 2
    # accounting is summed over the processes, so both report the same totals
    assert rows[0]["rollouts"] == rows[1]["rollouts"] and rows[0]["resampled"] == rows[1]["resampled"]
    for r in rows.values():  # each process got its own episodes' samples back, with vLLM's log-probs
        assert all(r["logprobs"]) and all(0 < n <= 8 * t for n, t in zip(r["agent_tokens"], r["turns"], strict=True))


def test_two_processes_train_with_a_vllm_server(tmp_path):
    """Data parallel with vLLM in server mode: the processes share one (fake) server, which only process 0
    talks to (generation for both, weight updates once per step); both train two steps and the rollouts of
    both are counted, whatever turns their episodes took."""
    folder = save_tiny_model(tmp_path / "model")
    out = tmp_path / "adapters" / "dp"
    proc = run_two_ranks(folder, "--train", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(rows) == 2 and all(r["steps"] == 2 for r in rows)
    assert rows[0]["rollouts"] == rows[1]["rollouts"] == 8  # 2 steps x 2 processes x a group of 2, summed
    server = [r for r in rows if r["syncs"] is not None]
    assert len(server) == 1 and server[0]["syncs"] == 2 and server[0]["requests"] >= 8  # process 0's client only
    assert server[0]["communicator"] is False  # closed when the training ended
    assert (out / "adapter_model.safetensors").exists()
