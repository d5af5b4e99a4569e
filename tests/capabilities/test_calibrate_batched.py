"""Calibration plays model policies in lock-step batches, with one policy seed per (seed, sample)."""

from __future__ import annotations

import gymnasium as gym

from trace_gym.capabilities.calibrate import calibrate

REFUND = "trace/cap-refund-policy-v0"


class AlternatingBatchPolicy:
    """Even samples play the episode's reference solution, odd samples only say "Okay."

    It sees episodes only through ``act_batch`` and its seeds, so the batched
    path must hand each (seed, sample) its own policy seed ``seed * 1000 + sample``.
    """

    policy_id = "alternating"
    batch_size = 3
    accepts_seeds = True

    def __init__(self, seeds: list[int]):
        self.reference: dict[int, list[str]] = {}
        for s in seeds:
            env = gym.make(REFUND).unwrapped
            env.reset(seed=s)
            self.reference[s] = env.reference_actions()
            env.close()
        self.batches: list[list[int]] = []

    def act(self, messages, tools):  # pragma: no cover - the batched path never calls it
        raise AssertionError("calibration should batch this policy")

    def act_batch(self, requests, seeds=None):
        self.batches.append(list(seeds))
        out = []
        for (messages, _), ps in zip(requests, seeds, strict=True):
            seed, sample = divmod(ps, 1000)
            sent = sum(1 for m in messages if m["role"] == "assistant" and m.get("name") is None)
            actions = self.reference[seed]
            if sample % 2 == 0 and sent < len(actions):
                out.append(actions[sent])
            else:
                out.append("Okay." if sample % 2 else "Is there anything else I can help you with?")
        return out


def test_batched_calibration_gives_each_sample_its_own_policy_seed(tau2_data):
    seeds = [0, 1]
    policy = AlternatingBatchPolicy(seeds)
    res = calibrate(REFUND, policy, seeds, samples=4)
    for s in seeds:
        rewards = res.rewards[s]
        assert rewards[0] == rewards[2] == 1.0  # reference samples
        assert rewards[1] < 1.0 and rewards[3] < 1.0  # "Okay." samples
        assert res.cases[s] != "?"
    seen = {ps for batch in policy.batches for ps in batch}
    assert seen == {s * 1000 + k for s in seeds for k in range(4)}
    assert max(len(b) for b in policy.batches) == policy.batch_size  # 8 episodes in batches of at most 3
