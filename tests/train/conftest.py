"""Fixtures for the trainer tests: the test envs, SmolLM2's tokenizer, and skips when the train extra is missing."""

from __future__ import annotations

import pytest

import tests.train.envs  # noqa: F401  (registers trace-test/train-*)
from tests.extras import need, need_smollm2


@pytest.fixture(scope="session", autouse=True)
def _one_thread_for_training_tests(one_torch_thread):
    """Every training test runs with one torch thread (see ``one_torch_thread`` in tests/conftest.py)."""
    yield


@pytest.fixture(scope="session")
def tokenizer():
    need("transformers")
    from trace_gym.policies.hf import load_smollm2_tokenizer

    need_smollm2()
    tok = load_smollm2_tokenizer()
    tok.padding_side = "left"
    return tok


def scripted_generate(tokenizer, turns: list[str]):
    """A generate function that answers with the given texts in order (each followed by the stop token).

    It stands in for the model where a test needs to know exactly which tokens
    the agent produced; the env, the chat template and the masking are real.
    """
    state = {"i": 0, "seen": []}

    def generate(prompts, max_new_tokens):
        outs = []
        for p in prompts:
            state["seen"].append(list(p))
            text = turns[min(state["i"], len(turns) - 1)]
            outs.append(tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        state["i"] += 1
        return outs

    generate.state = state  # type: ignore[attr-defined]
    return generate


def trained_looking_lora(peft, scale: float = 0.2, seed: int = 1):
    """Give a fresh LoRA adapter random ``lora_B`` weights, so that it changes the forward; returns ``peft``."""
    import torch

    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * scale)
    return peft
