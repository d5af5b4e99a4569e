"""A trace-gym env as a ``verifiers`` ``MultiTurnEnv`` (the ``verifiers`` extra: ``verifiers>=0.3.1,<0.4``).

``verifiers`` 0.4 moved to a new stack (``verifiers.v1``) without ``MultiTurnEnv``; the
classic one, which prime-rl's environment hub and ``vf-eval`` load, is ``verifiers`` 0.3::

    from trace_gym.integrations.verifiers import load_environment

    env = load_environment("trace/cap-refund-policy-v0", seeds=range(64), max_turns=30)
    results = env.evaluate_sync(client=vf.ClientConfig(api_base_url="http://127.0.0.1:8000/v1", ...),
                                model="my-model", num_examples=8, rollouts_per_example=4)

The dataset has one row per env seed (``prompt``: the episode's opening; ``info.seed``).
The model chats in text (:class:`~trace_gym.integrations.chat.ChatEpisode`): the system
prompt lists the tools, every model reply is one env action, tool results and the user
side's replies come back as user turns.  The rollout stops when the env ends the episode
or at ``max_turns``; the rubric's one reward function, ``env_reward``, is the env's reward
(an episode stopped by ``max_turns`` is scored as a step-limit truncation).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import require

require("verifiers", "verifiers")

import verifiers as vf  # noqa: E402

if not hasattr(vf, "MultiTurnEnv"):  # verifiers 0.4+: only the v1 stack
    from . import MissingExtraError

    raise MissingExtraError("verifiers>=0.4 has no MultiTurnEnv: pip install 'trace-gym[verifiers]' (verifiers<0.4)")

from .chat import ChatEpisode  # noqa: E402

__all__ = ["TraceMultiTurnEnv", "load_environment", "seed_dataset"]


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(getattr(p, "text", "")) for p in content)
    return content or ""


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else getattr(message, "role", None)


def seed_dataset(env_id: str, seeds: Iterable[int], env_kwargs: dict[str, Any] | None = None, *,
                 tool_format: str = "hermes", tool_listing: str = "json"):
    """A ``datasets.Dataset``: per seed the episode's opening (``prompt``) and ``info`` (``seed``, ``env_id``)."""
    from datasets import Dataset

    from ..train.trainer import make_env_factory

    episode = ChatEpisode(make_env_factory(env_id, env_kwargs)(), tool_format=tool_format, tool_listing=tool_listing)
    rows: dict[str, list[Any]] = {"prompt": [], "answer": [], "info": []}
    for s in seeds:
        rows["prompt"].append(episode.open(int(s)))
        rows["answer"].append("")
        rows["info"].append({"seed": int(s), "env_id": env_id})
    episode.env.close()
    if not rows["info"]:
        raise ValueError("seeds is empty")
    return Dataset.from_dict(rows)


class TraceMultiTurnEnv(vf.MultiTurnEnv):
    """A ``MultiTurnEnv`` whose environment turns come from a trace-gym env (one env per rollout)."""

    def __init__(self, trace_env_id: str, *, env_kwargs: dict[str, Any] | None = None, tool_format: str = "hermes",
                 tool_listing: str = "json", **kwargs: Any):
        from ..train.trainer import make_env_factory

        self.trace_env_id = trace_env_id
        self._make = make_env_factory(trace_env_id, env_kwargs)
        self._tool_format, self._tool_listing = tool_format, tool_listing
        self._episodes: dict[str, dict[str, Any]] = {}  # trajectory id -> {"episode", "acted"}
        super().__init__(rubric=vf.Rubric(funcs=[env_reward], weights=[1.0]), **kwargs)

    async def setup_state(self, state: vf.State) -> vf.State:
        episode = ChatEpisode(self._make(), tool_format=self._tool_format, tool_listing=self._tool_listing)
        seed = int((state["info"] or {})["seed"])
        opening = episode.open(seed)
        if [(_role(m), _content(m)) for m in state["prompt"]] != [(m["role"], m["content"]) for m in opening]:
            raise ValueError(f"the row's prompt is not the opening of {self.trace_env_id} seed {seed}")
        self._episodes[state["trajectory_id"]] = {"episode": episode, "acted": 0}
        return state

    async def env_response(self, messages: Any, state: vf.State, **kwargs: Any) -> list[dict[str, Any]]:
        record = self._episodes[state["trajectory_id"]]
        episode: ChatEpisode = record["episode"]
        reply, _, done, _ = episode.act(_content(messages[-1]))
        record["acted"] += 1
        if done:
            state["final_env_response"] = reply or [{"role": "user", "content": "(the episode has ended)"}]
        return reply

    @vf.cleanup
    async def score_trace_episode(self, state: vf.State) -> None:
        """Deliver a last reply the loop did not (``max_turns``), end the episode, keep its reward in the state."""
        record = self._episodes.pop(state["trajectory_id"], None)
        if record is None:
            return
        episode: ChatEpisode = record["episode"]
        trajectory = state["trajectory"]
        if not episode.done and len(trajectory) > record["acted"]:
            completion = trajectory[-1]["completion"]
            last = [m for m in completion if _role(m) == "assistant"]
            if last:
                episode.act(_content(last[-1]))
        state["trace_reward"] = episode.close_scored()
        state["trace_reward_info"] = dict(episode.info.get("reward_info") or {})
        state["trace_termination_reason"] = episode.info.get("termination_reason") or "max_turns"
        episode.env.close()


async def env_reward(state: vf.State, **_: Any) -> float:
    """The trace env's reward for the rollout's episode."""
    return float(state.get("trace_reward", 0.0))


def load_environment(env_id: str = "trace/cap-refund-policy-v0", *, seeds: Iterable[int] = range(64),
                     eval_seeds: Iterable[int] | None = None, env_kwargs: dict[str, Any] | None = None,
                     max_turns: int = 30, tool_format: str = "hermes", tool_listing: str = "json",
                     **kwargs: Any) -> TraceMultiTurnEnv:
    """The ``verifiers`` entry point: ``env_id`` as a ``MultiTurnEnv`` over ``seeds`` (``eval_seeds``: the eval set).

    Raises ``gymnasium.error.Error`` for an unknown id.
    """
    dataset = seed_dataset(env_id, seeds, env_kwargs, tool_format=tool_format, tool_listing=tool_listing)
    eval_dataset = (seed_dataset(env_id, eval_seeds, env_kwargs, tool_format=tool_format, tool_listing=tool_listing)
                    if eval_seeds is not None else None)
    return TraceMultiTurnEnv(trace_env_id=env_id, env_kwargs=env_kwargs, tool_format=tool_format, tool_listing=tool_listing,
                             dataset=dataset, eval_dataset=eval_dataset, max_turns=max_turns, env_id=env_id, **kwargs)
