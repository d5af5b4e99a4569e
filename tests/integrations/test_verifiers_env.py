"""``load_environment`` as a verifiers ``MultiTurnEnv``, run by verifiers' own evaluate against a real
OpenAI-compatible server on 127.0.0.1 (the tiny model behind it): every rollout's reward is the env's
reward for the same replies."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.extras import need  # noqa: E402

vf = need("verifiers")
if not hasattr(vf, "MultiTurnEnv"):
    pytest.skip("verifiers>=0.4 has no MultiTurnEnv; the verifiers extra pins <0.4", allow_module_level=True)
need("torch")

import trace_gym  # noqa: E402,F401
from tests.integrations.chat_server import ChatServer  # noqa: E402
from trace_gym.integrations.verifiers import TraceMultiTurnEnv, load_environment  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("tau2_data")]
ENV = "trace/cap-refund-policy-v0"


def _replay(seed: int, replies: list[str]) -> float:
    env = gym.make(ENV, disable_env_checker=True)
    env.reset(seed=seed)
    for text in replies:
        _, reward, term, trunc, _ = env.step(text)
        if term or trunc:
            return float(reward)
    return float(env.unwrapped.truncate()[0])


def _text(m) -> str:
    return (m.get("content") if isinstance(m, dict) else getattr(m, "content", "")) or ""


def _role(m) -> str:
    return m.get("role") if isinstance(m, dict) else m.role


def test_verifiers_load_environment_is_a_multiturn_env_over_seeds():
    env = load_environment(ENV, seeds=[4, 5], max_turns=3)
    assert isinstance(env, vf.MultiTurnEnv) and isinstance(env, TraceMultiTurnEnv)
    rows = env.get_dataset()
    assert [r["info"]["seed"] for r in rows] == [4, 5]
    _, info = gym.make(ENV, disable_env_checker=True).reset(seed=4)
    system, user = rows[0]["prompt"]
    assert system["content"].startswith(info["messages"][0]["content"].strip()[:200])
    assert all(t["function"]["name"] in system["content"] for t in info["tools"]) and "<tool_call>" in system["content"]
    assert user["content"] == info["messages"][1]["content"]
    with pytest.raises(gym.error.Error):
        load_environment("trace/no-such-env-v0", seeds=[0])


def test_verifiers_evaluate_against_a_real_openai_server_scores_with_the_env():
    from trace_gym.policies.hf_models import tiny_test_model

    model, tokenizer = tiny_test_model(0)
    env = load_environment(ENV, seeds=range(3), max_turns=3)
    server = ChatServer(model, tokenizer)
    with server as url:
        client = vf.ClientConfig(api_base_url=url, api_key_var="TRACE_GYM_TEST_NO_KEY", max_retries=0, timeout=120)
        results = env.evaluate_sync(client=client, model="tiny", sampling_args={"max_tokens": 16, "temperature": 1.0},
                                    num_examples=3, rollouts_per_example=2, max_concurrent=2)
    outputs = results["outputs"] if isinstance(results, dict) else results.outputs
    assert len(outputs) == 6 and len(server.requests) >= 6
    rewards = []
    for out in outputs:
        assert not out.get("error"), out.get("error")
        seed = out["info"]["seed"]
        replies = [_text(m) for m in out["completion"] if _role(m) == "assistant"]
        assert replies and all(r.strip() for r in replies)  # the server's replies reached the env
        env_turns = [m for m in out["completion"] if _role(m) == "user"]
        assert env_turns  # the env answered between the model's turns
        assert out["reward"] == pytest.approx(_replay(seed, replies))
        rewards.append(out["reward"])
    assert len(rewards) == 6
