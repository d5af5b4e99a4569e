"""An LLM-user episode on ToolSandbox with a real (tiny, random-weight) local Hugging Face model."""

import gymnasium as gym
import pytest

from tests.extras import need

need("torch")

import trace_gym  # noqa: E402,F401


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    import torch

    from trace_gym.policies.hf import tiny_test_model

    torch.set_num_threads(1)
    model, tok = tiny_test_model(seed=1)
    path = tmp_path_factory.mktemp("tiny-user")
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def test_llm_user_episode_runs_end_to_end(tiny_model_dir):
    env = gym.make("trace/toolsandbox-v0", user="llm-hf", user_model=str(tiny_model_dir))
    obs, info = env.reset(seed=0, options={"category": "multiple_user_turn"})
    assert info["messages"][-1]["role"] == "user"
    obs, reward, term, trunc, info = env.step("Could you tell me a bit more about what you need?")
    # the tiny model's reply (random text) came back as the user's turn, or it ended the conversation
    assert term or info["messages"][-1]["role"] == "user"
    for _ in range(30):  # the user ends after max_turns replies, or the 30-message cap ends the episode
        if term or trunc:
            break
        obs, reward, term, trunc, info = env.step("Thanks, I have everything I need. Goodbye.")
    assert term or trunc
    assert 0.0 <= reward <= 1.0 and "reward_info" in info
