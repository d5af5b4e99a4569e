"""Run whole episodes of a text environment at the token level, many at once.

:func:`run_token_episodes` plays one episode per request: it resets the env, renders
the prompt with the model's chat template, and then alternates sampled agent turns
(one batched ``generate`` call for all live episodes per turn) with the env's
replies, until every episode ends or runs out of its token budget.  The result for
each episode is what a GRPO loss needs: the prompt ids, the completion ids, a mask
that is 1 on the agent's sampled tokens and 0 on everything the env wrote, and the
final reward, and, when the sampler reports them (vLLM), the sampler's log-prob of each
agent token (0 on the env's tokens), which TRL's importance-sampling correction needs.

Works with any Gymnasium env with text actions: trace-gym's ``ToolEnv`` family
(``info["messages"]`` / ``info["tools"]``) is rendered message by message; any
other env's observation is treated as a user message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..episode import CONTEXT_LENGTH, Episode
from .chat import ChatRenderer

__all__ = ["EpisodeRequest", "Lockstep", "Sampled", "TokenEpisode", "GenerateFn", "prompt_messages", "run_token_episodes"]

GenerateFn = Callable[[list[list[int]], "int | list[int]"], list[list[int]]]
"""``generate(prompts_ids, max_new_tokens) -> sampled ids per prompt`` (a stop token, if any, included last);
``max_new_tokens`` is one limit for every prompt or a list with one per prompt.  A back end that knows
the log-prob it sampled each token with returns a :class:`Sampled` (a list of the same ids) instead."""

Lockstep = Callable[[Sequence[int]], list[int]]
"""``lockstep(values) -> the element-wise maximum of values over the processes of a distributed run``: a
collective, called by every process at the same points (see :func:`run_token_episodes`)."""


class Sampled(list):
    """A ``GenerateFn``'s answer with log-probs: the sampled ids per prompt (the list itself) and
    :attr:`logprobs`, the log-prob the sampler drew each of those tokens with (``nan`` where it has none).
    A row's log-probs must be as many as its ids (:class:`ValueError` otherwise)."""

    def __init__(self, ids: Sequence[Sequence[int]], logprobs: Sequence[Sequence[float | None]]):
        super().__init__(list(row) for row in ids)
        if len(logprobs) != len(self) or any(len(lp) != len(row) for lp, row in zip(logprobs, self, strict=True)):
            raise ValueError("Sampled: one log-prob per sampled token, per row")
        self.logprobs = [[float("nan") if v is None else float(v) for v in lp] for lp in logprobs]

    def rows(self, n: int) -> Sampled:
        """The first ``n`` rows (and their log-probs)."""
        return Sampled(self[:n], self.logprobs[:n])


@dataclass(slots=True)
class EpisodeRequest:
    """One episode to play: the env seed and whether to ask for the hint (``None``: don't pass the option)."""

    seed: int
    hint: bool | None = None


@dataclass(slots=True)
class TokenEpisode:
    """One played episode, tokenised for the loss."""

    seed: int
    prompt_ids: list[int]  # what the loss conditions on (hint-free when a hint was shown)
    generation_prompt_ids: list[int]  # what the agent was sampled from
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: sampled by the agent, 0: written by the env
    # the sampler's log-prob of each completion token (0.0 on env tokens); None when the sampler reported none
    logprobs: list[float] | None = field(default_factory=list)
    reward: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)
    hint_shown: bool = False
    turns: int = 0
    terminated: bool = False
    truncated: bool = False
    termination_reason: str | None = None

    @property
    def agent_tokens(self) -> int:
        return sum(self.env_mask)


@dataclass(slots=True)
class _Live:
    episode: TokenEpisode
    play: Episode  # the env's side of the episode: steps, cuts, the end-of-episode record
    n_messages: int  # length of info["messages"] before the current agent turn
    structured: bool

    @property
    def done(self) -> bool:
        return self.play.done


def prompt_messages(obs: str, info: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """``(messages, tools, structured)`` of a reset: a ``ToolEnv``'s ``info["messages"]``/``info["tools"]``, or the
    observation as one user message (``structured`` False) for any other env."""
    if isinstance(info.get("messages"), list):
        return list(info["messages"]), list(info.get("tools") or []), True
    return [{"role": "user", "content": obs}], [], False


def run_token_episodes(
    env_factory: Callable[[], Any],
    requests: Sequence[EpisodeRequest],
    renderer: ChatRenderer,
    generate: GenerateFn,
    *,
    stop_texts: Sequence[str] = (),
    max_new_tokens_per_turn: int = 256,
    max_completion_length: int = 1024,
    max_turns: int | None = None,
    truncated_reward: float | None = None,
    hint_option: str = "hint",
    envs: list[Any] | None = None,
    context: int | None = None,
    lockstep: Lockstep | None = None,
) -> list[TokenEpisode]:
    """Play ``requests`` (one env instance each; pass ``envs`` to reuse instances) and return their token episodes.

    ``context``: the model's context in tokens.  A turn never asks for more tokens than the
    room an episode has left; an episode with no room left ends as truncated (reason
    ``context_length``), scored like any episode the trainer's limits cut.  Each episode is
    played through :class:`trace_gym.episode.Episode` (its steps and its cut: the reward, and
    ``reward_info`` with ``"cut"``, are what every cut episode of trace-gym records).

    ``lockstep`` (data-parallel runs whose sampler is a collective, such as TRL's vLLM server
    mode, which gathers every process's prompts at each call): every process then calls
    ``generate`` the same number of times with the same number of prompts, until the last
    episode of every process has ended.  A process pads each call with one-token filler prompts
    (their samples are dropped): up to the largest number of live episodes, plus one whose token
    limit is the largest any process asked for, so a back end that samples every prompt of a
    call with one limit gives each row the room it asked for.
    """
    tok = renderer.tokenizer
    live: list[_Live] = []
    envs = envs if envs is not None else []
    while len(envs) < len(requests):
        envs.append(env_factory())
    for req, env in zip(requests, envs, strict=False):
        options = {hint_option: bool(req.hint)} if req.hint is not None else None
        play = Episode(env, "token-episodes", int(req.seed), options)
        play.start()
        obs, info = play.observation, play.info
        messages, tools, structured = prompt_messages(obs, info)
        gen_ids = renderer.prompt_ids(messages, tools)
        hint_shown = bool(info.get("hint_shown", False))
        loss_ids = gen_ids
        if hint_shown and isinstance(info.get("prompt_messages_without_hint"), list):
            loss_ids = renderer.prompt_ids(list(info["prompt_messages_without_hint"]), tools)
        ep = TokenEpisode(seed=int(req.seed), prompt_ids=loss_ids, generation_prompt_ids=gen_ids, hint_shown=hint_shown)
        live.append(_Live(ep, play, len(messages), structured))

    turn_cap = max_turns if max_turns is not None else 1_000_000
    filler = [tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id]
    while True:
        active = [x for x in live if not x.done]
        rooms = {id(x): (context - len(x.episode.generation_prompt_ids) - len(x.episode.completion_ids)
                         if context is not None else max_new_tokens_per_turn) for x in active}
        for x in active:
            if rooms[id(x)] < 1:
                _cut(x, truncated_reward, CONTEXT_LENGTH)
        active = [x for x in active if not x.done]
        budgets = [max_completion_length - len(x.episode.completion_ids) for x in active]
        limits = [max(1, min(max_new_tokens_per_turn, b, rooms[id(x)])) for x, b in zip(active, budgets, strict=True)]
        prompts = [x.episode.generation_prompt_ids + x.episode.completion_ids for x in active]
        if lockstep is None:
            if not active:
                break
            outs = generate(prompts, limits[0] if len(set(limits)) == 1 else limits)
        else:
            rows, limit = lockstep([len(active) + 1, max(limits, default=1)])
            if rows == 1:  # no process has a live episode
                break
            pad = rows - len(active)
            outs = generate(prompts + [filler] * pad, limits + [limit] * pad)
            outs = outs.rows(len(active)) if isinstance(outs, Sampled) else outs[: len(active)]
        logprobs = outs.logprobs if isinstance(outs, Sampled) else None
        for i, (x, out, budget) in enumerate(zip(active, outs, budgets, strict=True)):
            ep = x.episode
            out = list(out)[: max(0, budget)]
            ep.completion_ids.extend(out)
            ep.env_mask.extend([1] * len(out))
            if logprobs is None or ep.logprobs is None:
                ep.logprobs = None
            else:
                ep.logprobs.extend(logprobs[i][: len(out)])
            ep.turns += 1
            text = tok.decode(out, skip_special_tokens=True)
            obs, reward, terminated, truncated, info = x.play.apply(text)
            if terminated or truncated:
                ep.reward = float(reward)
                ep.reward_info = dict(info.get("reward_info") or {})
                ep.terminated, ep.truncated = bool(terminated), bool(truncated)
                ep.termination_reason = info.get("termination_reason", "terminated" if terminated else "truncated")
                continue
            if ep.turns >= turn_cap or len(ep.completion_ids) >= max_completion_length:
                _cut(x, truncated_reward, "max_turns" if ep.turns >= turn_cap else "token_budget")
                continue
            if x.structured and isinstance(info.get("messages"), list):
                msgs = info["messages"]
                new = msgs[x.n_messages + 1 :]  # skip the agent's own message
                x.n_messages = len(msgs)
            else:
                new = [{"role": "user", "content": obs}]
            last = tok.decode(out[-1:]) if out else ""
            ended_with = last if last in stop_texts else None
            cont = renderer.continuation_ids(new, ended_with)
            room = max_completion_length - len(ep.completion_ids)
            if len(cont) >= room:  # no room left for another agent turn
                _cut(x, truncated_reward, "token_budget")
                continue
            ep.completion_ids.extend(cont)
            ep.env_mask.extend([0] * len(cont))
            if ep.logprobs is not None:
                ep.logprobs.extend([0.0] * len(cont))
    return [x.episode for x in live]


def _cut(x: _Live, reward: float | None, reason: str) -> None:
    """End an episode the trainer's limits stopped (:meth:`~trace_gym.episode.Episode.cut`): ``reward`` if
    given, else the env's score of it as truncated (:meth:`~trace_gym.core.env.ToolEnv.truncate`; 0.0 for an
    env without that method)."""
    x.play.cut(reason, reward)
    ep = x.episode
    ep.truncated = True
    ep.termination_reason = reason
    ep.reward = x.play.final_reward
    ep.reward_info = dict(x.play.traj.reward_info)
