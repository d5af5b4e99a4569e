"""Token-level episodes: what the agent sampled is trained, what the env wrote is masked, hints are swapped out."""

from __future__ import annotations

import gymnasium as gym

from tests.train.conftest import scripted_generate
from tests.train.envs import HINT
from trace_gym.core.toolcalls import format_tool_call
from trace_gym.train.chat import ChatRenderer
from trace_gym.train.episodes import EpisodeRequest, run_token_episodes


def _factory(env_id):
    return lambda: gym.make(env_id, disable_env_checker=True)


def test_multi_turn_sequence_is_the_chat_template_rendering_and_mask_covers_agent_tokens_only(tokenizer):
    renderer = ChatRenderer(tokenizer)
    call = format_tool_call("lookup", {}, style="hermes")
    turns = [call, "Your code is ready.", "Goodbye."]
    gen = scripted_generate(tokenizer, turns)
    [ep] = run_token_episodes(_factory("trace-test/train-multi-v0"), [EpisodeRequest(5)], renderer, gen,
                              stop_texts=[tokenizer.eos_token], max_completion_length=2048)
    assert ep.terminated and ep.turns == 3 and ep.termination_reason == "user_done"

    # Agent tokens are exactly the sampled ones, in order.
    agent = [t for t, m in zip(ep.completion_ids, ep.env_mask, strict=True) if m == 1]
    expected = []
    for text in turns:
        expected += tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert agent == expected
    assert 0 in ep.env_mask and ep.env_mask[0] == 1 and ep.env_mask[-1] == 1

    # The whole sequence reads exactly as the chat template renders the conversation.
    env = gym.make("trace-test/train-multi-v0", disable_env_checker=True)
    obs, info = env.reset(seed=5)
    conversation = list(info["messages"])
    for text in turns:
        obs, r, term, trunc, info = env.step(text)
    conversation = info["messages"]
    # The agent's turns as the raw text it sampled (the env keeps a parsed view of tool calls).
    raw = []
    k = 0
    for m in conversation:
        if m["role"] == "assistant":
            raw.append({"role": "assistant", "content": turns[k]})
            k += 1
        else:
            raw.append(m)
    full = tokenizer.decode(ep.prompt_ids + ep.completion_ids)
    rendered = renderer._render(raw[:-1], generation_prompt=False, tools=info["tools"])  # the final user "Bye." is never shown
    assert full == rendered.rstrip("\n")
    assert "<tool_response>" in full and "Anything else?" in full


def test_hinted_episode_samples_with_hint_and_trains_without(tokenizer):
    renderer = ChatRenderer(tokenizer)
    gen = scripted_generate(tokenizer, ["ok", "ok", "ok"])
    eps = run_token_episodes(_factory("trace-test/train-multi-v0"), [EpisodeRequest(3, True), EpisodeRequest(3, False)],
                             renderer, gen, stop_texts=[tokenizer.eos_token])
    hinted, plain = eps
    assert hinted.hint_shown and not plain.hint_shown
    assert HINT in tokenizer.decode(hinted.generation_prompt_ids)
    assert HINT not in tokenizer.decode(hinted.prompt_ids)
    # The loss prompt of the hinted episode is exactly the prompt an unhinted episode has.
    assert hinted.prompt_ids == plain.prompt_ids == plain.generation_prompt_ids
    # The model was really sampled from the hinted prompt.
    assert gen.state["seen"][0][: len(hinted.generation_prompt_ids)] == hinted.generation_prompt_ids


def test_token_budget_cuts_the_episode(tokenizer):
    renderer = ChatRenderer(tokenizer)
    gen = scripted_generate(tokenizer, ["word " * 30])
    [ep] = run_token_episodes(_factory("trace-test/train-multi-v0"), [EpisodeRequest(1)], renderer, gen,
                              stop_texts=[tokenizer.eos_token], max_completion_length=40, truncated_reward=-1.0)
    assert ep.truncated and ep.termination_reason == "token_budget" and ep.reward == -1.0
    assert len(ep.completion_ids) <= 40 and len(ep.env_mask) == len(ep.completion_ids)


def test_plain_gym_text_env_without_messages_works(tokenizer):
    class Echo(gym.Env):
        from trace_gym.core.spaces import TextSpace

        observation_space = TextSpace(100)
        action_space = TextSpace(100)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.n = 0
            return "say hi", {}

        def step(self, action):
            self.n += 1
            done = self.n >= 2
            return "again", float("hi" in action), done, False, {}

    renderer = ChatRenderer(tokenizer)
    gen = scripted_generate(tokenizer, ["hi", "hi there"])
    [ep] = run_token_episodes(Echo, [EpisodeRequest(0)], renderer, gen, stop_texts=[tokenizer.eos_token])
    assert ep.turns == 2 and ep.reward == 1.0
    assert "again" in tokenizer.decode(ep.completion_ids)


def test_a_cut_episode_is_scored_by_the_env_as_truncated(tokenizer, toolsandbox_data):
    """By default the token budget does not erase partial credit: the env scores the cut episode as a
    step-limit truncation (here: location service turned on, location never read nor told)."""
    env_id = "trace/cap-ts-location-dependency-v0"
    renderer = ChatRenderer(tokenizer)
    call = format_tool_call("set_location_service_status", {"on": True}, style="hermes")
    gen = scripted_generate(tokenizer, [call, "word " * 200])
    env = gym.make(env_id, disable_env_checker=True)
    for seed in range(40):  # a seed whose world lets the call succeed (low-battery mode off)
        env.reset(seed=seed)
        env.step(call)
        want, info = env.unwrapped.truncate()
        if want > 0:
            break
    assert 0 < want < 1 and info  # partial credit for the prerequisite
    [ep] = run_token_episodes(_factory(env_id), [EpisodeRequest(seed)], renderer, gen, stop_texts=[tokenizer.eos_token],
                              max_new_tokens_per_turn=64, max_completion_length=120, hint_option="hint")
    assert ep.truncated and ep.termination_reason == "token_budget"
    assert ep.turns == 2 and ep.reward == want and ep.reward_info == {**info, "cut": "token_budget"}
    # a fixed truncated_reward still overrides the env
    [fixed] = run_token_episodes(_factory(env_id), [EpisodeRequest(seed)], renderer, scripted_generate(tokenizer, [call, "word " * 200]),
                                 stop_texts=[tokenizer.eos_token], max_new_tokens_per_turn=64, max_completion_length=120,
                                 truncated_reward=0.0)
    assert fixed.truncated and fixed.reward == 0.0


def test_truncate_ends_the_episode_once(toolsandbox_data):
    import pytest

    env = gym.make("trace/cap-ts-location-dependency-v0", disable_env_checker=True).unwrapped
    env.reset(seed=0)
    reward, info = env.truncate()
    assert env.termination_reason == "max_steps" and isinstance(reward, float) and isinstance(info, dict)
    with pytest.raises(RuntimeError, match="finished episode"):
        env.truncate()
    with pytest.raises(RuntimeError, match="finished episode"):
        env.step("hello")


def test_an_episode_that_fills_the_context_ends_truncated_and_turns_ask_for_no_more_than_the_room(tokenizer):
    renderer = ChatRenderer(tokenizer)
    inner = scripted_generate(tokenizer, ["word " * 30])
    asked: list = []

    def gen(prompts, max_new_tokens):
        limits = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        asked.append([(len(p), n) for p, n in zip(prompts, limits, strict=True)])
        return inner(prompts, max_new_tokens)

    env = gym.make("trace-test/train-multi-v0", disable_env_checker=True)
    _, info = env.reset(seed=1)
    prompt = len(renderer.prompt_ids(info["messages"], info["tools"]))
    context = prompt + 40  # the first turn fits; its reply fills the rest
    eps = run_token_episodes(_factory("trace-test/train-multi-v0"), [EpisodeRequest(1), EpisodeRequest(2)], renderer, gen,
                             stop_texts=[tokenizer.eos_token], max_new_tokens_per_turn=64, max_completion_length=4096,
                             context=context)
    assert all(ep.truncated and ep.termination_reason == "context_length" for ep in eps)
    assert all(len(ep.prompt_ids) + len(ep.completion_ids) >= context for ep in eps)
    assert all(0 < n <= min(64, context - length) for turn in asked for length, n in turn)
    assert len(asked) == 1 and asked[0][0][1] == 40  # one turn, asked for no more than its room


def test_lockstep_pads_every_call_to_the_other_processes_rows_and_limit(tokenizer):
    """In lock step a process keeps calling the sampler while another still plays: it pads each call with
    filler prompts up to the most live episodes of any process, plus one carrying the largest token limit,
    and drops their samples."""
    from trace_gym.train.episodes import Sampled

    calls = []
    reply = tokenizer("Hi.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def generate(prompts, limits):
        calls.append((len(prompts), list(limits) if isinstance(limits, list) else limits))
        return Sampled([reply] * len(prompts), [[-0.5] * len(reply)] * len(prompts))

    others = iter([[3, 50], [3, 50], [1, 1]])  # the other process: 2 live episodes asking for 50 tokens, twice
    agreed = []

    def lockstep(values):
        agreed.append(list(values))
        return [max(a, b) for a, b in zip(values, next(others), strict=True)]

    [ep] = run_token_episodes(_factory("trace-test/train-turns-v0"), [EpisodeRequest(11)], ChatRenderer(tokenizer),
                              generate, max_new_tokens_per_turn=6, lockstep=lockstep)
    assert ep.turns == 1 and ep.terminated  # seed 11 wants one reply
    assert agreed == [[2, 6], [1, 1], [1, 1]]  # its live episodes + 1 and its largest limit, each call
    assert calls == [(3, [6, 50, 50]), (3, [50, 50, 50])]  # its own prompt and two fillers, then fillers only
    assert ep.completion_ids == reply and ep.logprobs == [-0.5] * len(reply)  # the fillers' samples dropped
