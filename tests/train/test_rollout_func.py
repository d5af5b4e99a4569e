"""EnvRolloutFunc: groups, constant-group resampling and dropping, hint shares, budget accounting."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import gymnasium as gym
import pytest

from tests.train.conftest import scripted_generate
from trace_gym.train.config import TrainConfig
from trace_gym.train.rollout_func import (
    EnvRolloutFunc,
    derived_seed,
    env_reward,
    parse_seed_prompt,
    seed_dataset,
    seed_prompt,
)


def _host(tokenizer):
    """The few trainer attributes the rollout function reads (it is called by TRL with the trainer)."""
    return SimpleNamespace(processing_class=tokenizer, eos_token_ids=[tokenizer.eos_token_id], use_vllm=False,
                           model=SimpleNamespace(training=True), _metrics={"train": defaultdict(list), "eval": defaultdict(list)})


def _factory(env_id):
    return lambda: gym.make(env_id, disable_env_checker=True)


def test_seed_prompts_round_trip_and_reject_other_text():
    assert parse_seed_prompt(seed_prompt(17)) == 17
    assert parse_seed_prompt([{"role": "user", "content": seed_prompt(3)}]) == 3
    with pytest.raises(ValueError, match="seed prompt"):
        parse_seed_prompt("hello")
    ds = seed_dataset(range(4))
    assert [parse_seed_prompt(p) for p in ds["prompt"]] == [0, 1, 2, 3]


def test_derived_seeds_are_stable_and_distinct():
    assert derived_seed(0, 5, 0) == 5
    seeds = {derived_seed(0, 5, a) for a in range(1, 6)}
    assert len(seeds) == 5 and 5 not in seeds
    assert derived_seed(0, 5, 1) == derived_seed(0, 5, 1) != derived_seed(1, 5, 1)


def test_constant_groups_are_resampled_a_bounded_number_of_times_then_masked(tokenizer):
    fn = EnvRolloutFunc(_factory("trace-test/train-constant-v0"), TrainConfig(num_generations=3, max_resamples=2),
                        generate=scripted_generate(tokenizer, ["hello"]))
    out = fn([seed_prompt(7)] * 3 + [seed_prompt(8)] * 3, _host(tokenizer))
    assert fn.stats.rollouts == 2 * 3 * (1 + 2)  # two groups, each drawn three times
    assert fn.stats.resampled_groups == 4 and fn.stats.dropped_groups == 2 and fn.stats.groups == 2
    assert len(out["completion_ids"]) == 6
    assert all(sum(m) == 0 for m in out["env_mask"])  # no loss tokens from constant groups
    assert out["env_reward"] == [0.5] * 6 and all(out["constant_group"])
    assert env_reward(completions=[""] * 6, env_reward=out["env_reward"]) == [0.5] * 6


def test_constant_groups_kept_when_dropping_is_off(tokenizer):
    fn = EnvRolloutFunc(_factory("trace-test/train-constant-v0"),
                        TrainConfig(num_generations=2, max_resamples=0, drop_constant_groups=False),
                        generate=scripted_generate(tokenizer, ["hello"]))
    out = fn([seed_prompt(1)] * 2, _host(tokenizer))
    assert fn.stats.rollouts == 2 and fn.stats.resampled_groups == 0 and fn.stats.dropped_groups == 0
    assert all(sum(m) > 0 for m in out["env_mask"])


def test_varied_groups_are_not_resampled(tokenizer):
    # Different answer lengths give different rewards in the single-turn env.
    answers = iter(["a", "a much longer answer than the first one", "mid length"])

    def gen(prompts, n):
        return [tokenizer(next(answers), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for _ in prompts]

    fn = EnvRolloutFunc(_factory("trace-test/train-single-v0"), TrainConfig(num_generations=3), generate=gen)
    out = fn([seed_prompt(2)] * 3, _host(tokenizer))
    assert fn.stats.rollouts == 3 and fn.stats.resampled_groups == 0
    assert len(set(out["env_reward"])) == 3
    assert [sum(m) for m in out["env_mask"]] == [len(c) for c in out["completion_ids"]]  # single turn: all agent tokens


def test_hint_share_is_exact_per_group_and_reproducible(tokenizer):
    fn = EnvRolloutFunc(_factory("trace-test/train-multi-v0"), TrainConfig(num_generations=4, hint_fraction=0.5, max_resamples=0),
                        generate=scripted_generate(tokenizer, ["hi"]))
    prompts = [seed_prompt(s) for s in (1, 2) for _ in range(4)]
    out = fn(prompts, _host(tokenizer))
    assert sum(out["hint_shown"][:4]) == 2 and sum(out["hint_shown"][4:]) == 2
    assert fn.hint_mask(1, 0, 4) == fn.hint_mask(1, 0, 4)
    assert fn.stats.hinted_rollouts == 4
    # Every row's loss prompt is the hint-free one: identical within a group.
    assert all(p == out["prompt_ids"][0] for p in out["prompt_ids"][:4])
    no_hint = EnvRolloutFunc(_factory("trace-test/train-multi-v0"), TrainConfig(num_generations=4, hint_fraction=0.0),
                             generate=scripted_generate(tokenizer, ["hi"]))
    out0 = no_hint(prompts[:4], _host(tokenizer))
    assert not any(out0["hint_shown"]) and out0["prompt_ids"][0] == out["prompt_ids"][0]


def test_env_without_hints_gets_no_hint_option(tokenizer):
    fn = EnvRolloutFunc(_factory("trace-test/train-single-v0"), TrainConfig(num_generations=2, hint_fraction=1.0),
                        generate=scripted_generate(tokenizer, ["x"]))
    assert not fn.supports_hints()
    out = fn([seed_prompt(0)] * 2, _host(tokenizer))
    assert not any(out["hint_shown"])


def test_hint_left_to_the_env_by_default(tokenizer):
    fn = EnvRolloutFunc(_factory("trace-test/train-multi-v0"), TrainConfig(num_generations=2),
                        generate=scripted_generate(tokenizer, ["hi"]))
    assert fn.config.hint_fraction is None and fn._requests(4, 0, 2)[0].hint is None
    out = fn([seed_prompt(4)] * 2, _host(tokenizer))
    assert not any(out["hint_shown"])  # this test env shows the hint only when asked


def test_the_rollout_function_reads_the_run_config(tokenizer):
    """The trainer hands over its TrainConfig whole: the rollout settings are read from it, seed included."""
    cfg = TrainConfig(num_generations=2, seed=5, max_resamples=0, shared_prefix=False, sampling_lookahead=0)
    fn = EnvRolloutFunc(_factory("trace-test/train-multi-v0"), cfg, generate=scripted_generate(tokenizer, ["hi"]))
    assert fn.config is cfg and fn.base_seed == 5 and fn.num_generations == 2
    assert fn._requests(4, 1, 2)[0].seed == derived_seed(5, 4, 1)
    with pytest.raises(TypeError, match="TrainConfig"):
        EnvRolloutFunc(_factory("trace-test/train-multi-v0"), {"num_generations": 2})
