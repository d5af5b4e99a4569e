"""TRL's environment mode (``GRPOTrainer(environment_factory=...)``) on a trace env: tools as typed
methods, a seeded reset, the env's reward; two real GRPO steps with the tiny model, offline."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from tests.extras import need  # noqa: E402

need("trl")
need("peft")

import trace_gym  # noqa: E402,F401
from trace_gym.core.toolcalls import format_tool_call  # noqa: E402
from trace_gym.integrations.trl import (  # noqa: E402
    environment_factory,
    environment_trainer_kwargs,
    tool_calling_tokenizer,
    tool_method,
)

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("tau2_data")]
ENV = "trace/cap-refund-policy-v0"


def _replay(seed: int, completion: list[dict]) -> float:
    """The env's own reward for the episode TRL played: each logged tool call one step, then the last message."""
    env = gym.make(ENV, disable_env_checker=True)
    env.reset(seed=seed)
    done = False
    reward = 0.0
    for m in completion:
        if m["role"] != "assistant" or done:
            continue
        actions = [format_tool_call(tc["function"]["name"], tc["function"]["arguments"]) for tc in m.get("tool_calls") or []]
        if not m.get("tool_calls") and (m.get("content") or "").strip():
            actions = [m["content"]]
        for a in actions:
            _, reward, term, trunc, _ = env.step(a)
            if term or trunc:
                done = True
                break
    if not done:
        reward, _ = env.unwrapped.truncate()
    return float(reward)


def test_environment_factory_tools_are_the_envs_typed_documented_tools():
    from transformers.utils import get_json_schema

    cls = environment_factory(ENV)
    _, info = gym.make(ENV, disable_env_checker=True).reset(seed=0)
    assert list(cls._tool_names) == [t["function"]["name"] for t in info["tools"]]
    for tool in info["tools"]:
        schema = get_json_schema(getattr(cls, tool["function"]["name"]))["function"]
        want = tool["function"]["parameters"]
        assert set(schema["parameters"]["properties"]) == set(want["properties"])
        assert set(schema["parameters"].get("required", [])) == set(want.get("required", []))
        for name, prop in want["properties"].items():
            assert schema["parameters"]["properties"][name]["type"] == prop["type"]
    with pytest.raises(ValueError, match="Python method"):
        tool_method({"name": "bad-name", "parameters": {"properties": {}}})


def _parse(action: str) -> tuple[str, dict]:
    body = json.loads(action.split("<tool_call>")[1].split("</tool_call>")[0])
    return body["name"], body["arguments"]


@pytest.mark.parametrize("seed", range(6))
def test_environment_factory_reference_episode_matches_the_env(seed):
    """The reference's calls up to its first message, then that message, through the class's methods:
    each tool result and the reward are the env's own for the same actions."""
    cls = environment_factory(ENV)
    ours = cls()
    opening = ours.reset(seed=seed)
    env = gym.make(ENV, disable_env_checker=True)
    _, info = env.reset(seed=seed)
    assert opening.startswith("[system]") and info["messages"][-1]["content"].strip() in opening
    reference = env.unwrapped.reference_actions()
    calls = [a for a in reference[: next(i for i, a in enumerate(reference) if "<tool_call>" not in a)]]
    message = reference[len(calls)]
    for action in calls:
        name, arguments = _parse(action)
        _, _, _, _, info = env.step(action)
        assert getattr(ours, name)(**arguments) == info["messages"][-1]["content"]
    _, reward, term, trunc, _ = env.step(message)
    if not (term or trunc):
        reward, _ = env.unwrapped.truncate()
    assert ours._finish(message) == reward
    with pytest.raises(RuntimeError, match="episode is over"):
        getattr(ours, _parse(calls[0])[0])(**_parse(calls[0])[1])
    if len([a for a in reference if "<tool_call>" not in a]) == 1:  # a refusal: one message ends the case
        assert reward == 1.0


def test_environment_factory_reset_refuses_a_prompt_of_another_episode():
    from trace_gym.integrations.trl import environment_dataset

    cls = environment_factory(ENV)
    ds = environment_dataset(ENV, [1, 2])
    assert cls().reset(seed=1, prompt=ds[0]["prompt"]) is None
    with pytest.raises(ValueError, match="not the opening"):
        cls().reset(seed=2, prompt=ds[0]["prompt"])


def test_environment_factory_trains_two_grpo_steps_and_logs_the_envs_reward(tmp_path):
    torch = need("torch")
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trace_gym.policies.hf_models import tiny_test_model

    model, tokenizer = tiny_test_model(0)
    tokenizer = tool_calling_tokenizer(tokenizer)
    tokenizer.padding_side = "left"
    logged: list[dict] = []

    class Snapshot(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            logs = trainer._logs
            logged.append({"completions": list(logs["completion"]), "rewards": list(logs["rewards"]["env_reward"]),
                           "seeds": list(logs["extra"]["env_seed"])})

    args = GRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2, max_completion_length=48,
                      max_steps=2, learning_rate=1e-4, logging_steps=1, report_to="none", use_cpu=True, bf16=False,
                      max_tool_calling_iterations=2, temperature=1.0, seed=0)
    torch.manual_seed(0)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer, callbacks=[Snapshot()],
                          **environment_trainer_kwargs(ENV, seeds=range(8)))
    trainer.train()
    assert trainer.state.global_step == 2 and len(logged) == 2
    history = [r for r in trainer.state.log_history if "rewards/env_reward/mean" in r]
    assert len(history) == 2
    for step, snap in zip(history, logged, strict=True):
        assert len(snap["completions"]) == 2
        assert all(c and any((m.get("content") or m.get("tool_calls")) for m in c) for c in snap["completions"])
        assert step["completions/mean_length"] > 0
        replayed = [_replay(s, c) for s, c in zip(snap["seeds"], snap["completions"], strict=True)]
        assert snap["rewards"] == pytest.approx(replayed)
        assert step["rewards/env_reward/mean"] == pytest.approx(sum(replayed) / len(replayed))


def test_environment_factory_refuses_an_episode_with_other_tools():
    cls = environment_factory(ENV)
    other = type("Other", (cls,), {"_tool_names": cls._tool_names[:-1]})
    with pytest.raises(ValueError, match="one tool list per env"):
        other().reset(seed=0)


@pytest.mark.usefixtures("toolsandbox_data")
def test_environment_factory_gives_an_env_with_per_episode_tools_one_class_per_tool_list():
    """ToolSandbox scenarios offer different tools: TRL's dict form, each row naming its episode's class."""
    kwargs = environment_trainer_kwargs("trace/cap-ts-multiple-tool-call-v0", seeds=range(12))
    factories, rows = kwargs["environment_factory"], kwargs["train_dataset"]
    assert isinstance(factories, dict) and len(factories) > 1
    for row in rows:
        env = factories[row["environment"]]()
        assert env.reset(seed=row["seed"], prompt=row["prompt"]) is None  # its tools are the episode's
    assert isinstance(environment_trainer_kwargs(ENV, seeds=range(4))["environment_factory"], type)


def test_environment_factory_warm_start_demonstrations_render_the_prompt_trl_shows():
    """A warm start for TRL's mode trains on exactly what the trainer later renders: the same tool
    schemas (TRL's, from the class's methods, in its order) and the same opening, in the same template."""
    from trace_gym.integrations.trl import environment_demonstrations, environment_tools
    from trace_gym.policies.hf_models import tiny_test_model
    from trace_gym.train.chat import ChatRenderer
    from trace_gym.train.demos import tokenize_demonstration

    env_id = "trace/cap-ts-state-dependency-v0"
    _, tokenizer = tiny_test_model(0)
    tokenizer = tool_calling_tokenizer(tokenizer)
    demos = environment_demonstrations(env_id, 6)
    assert len(demos) >= 4  # single-request episodes of the train split
    cls = environment_factory(env_id)
    renderer = ChatRenderer(tokenizer)
    for demo in demos:
        names = tuple(t["function"]["name"] for t in demo.tools)
        assert list(names) == sorted(names)  # TRL lists an environment's methods by name
        assert demo.tools == environment_tools(cls)
        env = cls.__new__(cls)
        methods = [getattr(env, n) for n in names]
        opening = [{"role": m["role"], "content": m["content"]} for m in demo.messages[:2]]
        trl_prompt = tokenizer.apply_chat_template(opening, tools=methods, tokenize=False, add_generation_prompt=True)
        row = tokenize_demonstration(renderer, demo)
        first_target = row["assistant_masks"].index(1)
        assert tokenizer.decode(row["input_ids"][:first_target]) == trl_prompt
        assert sum(m["role"] == "user" for m in demo.messages) == 1
        assert demo.assistant_turns()[-1].get("content")  # it ends on a message, as a TRL rollout does
