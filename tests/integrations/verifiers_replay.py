"""Replay a verifiers trace (its JSON form) through the trace env in process: every env turn the model saw
must be the env's own reply to the model's previous message, and the recorded reward the env's reward."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from trace_gym.integrations.chat import ChatEpisode


def replay_trace(trace: dict[str, Any]) -> list[str]:
    """Check ``trace`` against a replay of its episode; return the model's replies."""
    data = trace["task"]["data"]
    messages = [node["message"] for node in trace["nodes"]]
    episode = ChatEpisode(gym.make(data["env_id"], disable_env_checker=True))
    system, first = episode.open(int(data["seed"]))
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    assert messages[0]["content"] == system["content"] and messages[1]["content"] == first["content"]
    replies, i = [], 2
    while i < len(messages):
        assert messages[i]["role"] == "assistant", messages[i]
        replies.append(messages[i]["content"] or "")
        env_turns, _, done, _ = episode.act(replies[-1].strip())
        i += 1
        seen = []
        while i < len(messages) and messages[i]["role"] == "user":
            seen.append(messages[i]["content"])
            i += 1
        if done or i == len(messages):  # the episode ended, or the agent's turn limit: the reply went unsent
            assert seen == [] and i == len(messages)
        else:
            assert seen == [m["content"] for m in env_turns], (seen, env_turns)
    reward = episode.close_scored()
    episode.env.close()
    assert trace["rewards"]["env_reward"]["score"] == reward
    parts = episode.info.get("reward_info") or {}
    assert trace["metrics"] == {k: float(v) for k, v in parts.items()
                                if isinstance(v, int | float) and not isinstance(v, bool)}
    assert trace["info"]["termination_reason"] == (episode.info.get("termination_reason") or "max_turns")
    return replies
