"""A trace env as a verifiers (>= 0.4, ``verifiers.v1``) environment, run by verifiers' own episode machinery
against a real OpenAI-compatible server on 127.0.0.1 (the tiny model behind it): every env turn the model saw
is the env's reply to its previous message and every reward is the env's reward for the same replies.
(``vf-eval`` on the packaged module, in a venv holding only the wheel and its verifiers extra, is in
tests/test_wheel.py.)"""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest

from tests.extras import need

need("verifiers")
need("torch")

import trace_gym  # noqa: E402,F401
from tests.integrations.chat_server import ChatServer  # noqa: E402
from tests.integrations.verifiers_replay import replay_trace  # noqa: E402
from trace_gym.integrations.verifiers import TraceEnv, TraceTaskset, load_environment  # noqa: E402

vf = pytest.importorskip("verifiers.v1", reason="verifiers.v1 is the verifiers extra's stack (verifiers>=0.4)",
                         exc_type=ModuleNotFoundError)

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("tau2_data")]
ENV = "trace/cap-refund-policy-v0"


def test_the_taskset_has_one_task_per_seed_opening_the_env_episode():
    env = load_environment(ENV, seeds=[4, 5], max_turns=3)
    assert isinstance(env, TraceEnv) and isinstance(env.taskset, TraceTaskset)
    tasks = list(env.taskset)
    assert [t.data.seed for t in tasks] == [4, 5] and [t.key for t in tasks] == [f"{ENV}#4", f"{ENV}#5"]
    _, info = gym.make(ENV, disable_env_checker=True).reset(seed=4)
    system, prompt = tasks[0].data.system_prompt, tasks[0].data.prompt
    assert system.startswith(info["messages"][0]["content"].strip()[:200])
    assert all(t["function"]["name"] in system for t in info["tools"]) and "<tool_call>" in system
    assert prompt == info["messages"][1]["content"]
    with pytest.raises(gym.error.Error):
        list(load_environment("trace/no-such-env-v0", seeds=[0]).taskset)
    with pytest.raises(ValueError, match="seeds is empty"):
        list(load_environment(ENV, seeds=[]).taskset)


def test_verifiers_episodes_against_a_real_openai_server_score_with_the_env(one_torch_thread):
    from trace_gym.policies.hf_models import tiny_test_model

    model, tokenizer = tiny_test_model(0)
    env = load_environment(ENV, seeds=range(3), max_turns=3)
    tasks = list(env.taskset)
    server = ChatServer(model, tokenizer)

    async def play(url: str):
        ctx = vf.ModelContext(client=vf.EvalClientConfig(base_url=url, api_key_var="TRACE_GYM_TEST_NO_KEY"),
                              model="tiny", sampling=vf.SamplingConfig(max_tokens=16, temperature=1.0))
        async with env.serving():
            return await asyncio.gather(*(env.run_episode(t, ctx) for t in tasks for _ in range(2)))

    with server as url:
        episodes = asyncio.run(play(url))
    assert len(episodes) == 6 and len(server.requests) >= 6
    for episode in episodes:
        assert episode.ok, episode.errors
        [trace] = episode.traces
        replies = replay_trace(trace.model_dump(mode="json"))
        assert 1 <= len(replies) <= 3 and all(r.strip() for r in replies)  # the server's replies reached the env
        assert trace.reward == trace.rewards["env_reward"].score
