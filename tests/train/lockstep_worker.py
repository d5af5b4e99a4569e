"""One process of ``test_lockstep.py``'s data-parallel run (``torch.distributed.run``, two CPU processes, gloo).

Each process plays one GRPO group through the rollout function, sampling with TRL's real vLLM server-mode
generation (every call gathers all processes' prompts and broadcasts the completions: a collective), the
server being ``tests/helpers_vllm.py``'s fake client.  Process 0 plays seed 11 (one turn an episode),
process 1 seed 0 (three turns, a constant reward, so its group is drawn again).  Prints one JSON line.

    python -m torch.distributed.run --nproc_per_node 2 -m tests.train.lockstep_worker MODEL_FOLDER [--no-lockstep]

With ``--train OUT`` the processes instead run ``trace_gym.train.train`` (two GRPO steps on
``trace-test/train-turns-v0``) with ``backend=vllm, vllm_mode=server``, the fake client as the server.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace


def main(folder: str, lockstep: bool) -> None:
    import pytest
    import torch
    from accelerate import Accelerator

    import tests.train.envs  # noqa: F401  (trace-test/train-turns-v0)
    from tests.helpers_vllm import FakeVLLMClient, install
    from trace_gym.registration import make_env_factory
    from trace_gym.train.config import TrainConfig
    from trace_gym.train.models import load_model_and_tokenizer
    from trace_gym.train.rollout_func import EnvRolloutFunc, seed_prompt

    torch.set_num_threads(1)
    install(pytest.MonkeyPatch(), launched=True)
    FakeVLLMClient.folder = folder
    from trl.generation.vllm_generation import VLLMGeneration

    accelerator = Accelerator(cpu=True)
    model, tok = load_model_and_tokenizer(folder)
    gen = VLLMGeneration(model, accelerator, tok, mode="server", max_completion_length=8, logprobs=0)
    trainer = SimpleNamespace(vllm_generation=gen, processing_class=tok, accelerator=accelerator, use_vllm=True,
                              model=model, eos_token_ids=[tok.eos_token_id])
    if not lockstep:  # what the rollout function did before: each process on its own
        import trace_gym.train.vllm as vllm

        vllm.needs_lockstep = lambda trainer: False
    rollout = EnvRolloutFunc(make_env_factory("trace-test/train-turns-v0"), TrainConfig(
        num_generations=2, max_new_tokens_per_turn=8, max_completion_length=200, max_resamples=1,
        drop_constant_groups=False, seed=0))
    seed = 11 if accelerator.process_index == 0 else 0
    out = rollout([seed_prompt(seed)] * 2, trainer)
    accelerator.wait_for_everyone()
    print(json.dumps({"rank": accelerator.process_index, "turns": out["turns"], "seeds": out["env_seed"],
                      "rollouts": rollout.stats.rollouts, "resampled": rollout.stats.resampled_groups,
                      "logprobs": [len(lp) == len(ids) for lp, ids in zip(out["logprobs"], out["completion_ids"], strict=True)],
                      "agent_tokens": [sum(m) for m in out["env_mask"]]}), flush=True)


def train_with_server(folder: str, out: str) -> None:
    import pytest

    import tests.train.envs  # noqa: F401
    from tests.helpers_vllm import FakeVLLMClient, install
    from trace_gym.train import TrainConfig, train

    install(pytest.MonkeyPatch(), launched=True)
    FakeVLLMClient.folder = folder
    cfg = TrainConfig(env_id="trace-test/train-turns-v0", model=folder, out=out, backend="vllm", vllm_mode="server",
                      vllm_server_base_url="http://127.0.0.1:8000", max_steps=2, num_generations=2, seeds_per_step=1,
                      max_new_tokens_per_turn=4, max_completion_length=60, num_train_seeds=8, lora_r=4, lora_alpha=8,
                      resample_constant_groups=False,
                      learning_rate=5e-2, progress=False, seed=1, cpu_threads=1)
    res = train(cfg)
    client = FakeVLLMClient.made[0] if FakeVLLMClient.made else None
    print(json.dumps({"steps": res.steps, "rollouts": res.rollouts, "syncs": client._sampler.record["syncs"] if client else None,
                      "requests": len(client._sampler.record["requests"]) if client else None,
                      "communicator": client.communicator if client else None}), flush=True)


if __name__ == "__main__":
    if "--train" in sys.argv:
        train_with_server(sys.argv[1], sys.argv[sys.argv.index("--train") + 1])
    else:
        main(sys.argv[1], "--no-lockstep" not in sys.argv)
