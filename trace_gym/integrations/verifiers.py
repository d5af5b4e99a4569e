"""A trace-gym env as a ``verifiers`` environment (the ``verifiers`` extra: ``verifiers>=0.4``, its ``verifiers.v1`` stack).

Three pieces, which an environment module exports for ``vf-eval`` (the ``trace-gym-env`` package in
``examples/verifiers/``) and which Python code can use directly:

* :class:`TraceTaskset` — one task per env seed: the episode's opening (the env's system prompt with
  its tools listed, the user's first turn) is the task's prompt.  Its config
  (``--env.taskset.env-id``, ``--env.taskset.seeds``, ``--env.taskset.env-kwargs``) picks the env;
* :class:`TraceEnv` — plays one episode per rollout: every model reply is one env action, the env's
  tool results and the user side's replies come back as the next user turn, and the env's reward is
  the rollout's reward (``env_reward``; its parts are metrics).  An episode stopped by the agent's
  ``max_turns`` is scored as a step-limit truncation;
* :class:`TraceHarness` — the model side: one chat completion per turn, in text (the tools are listed
  in the system prompt), sent through verifiers' interception endpoint with trace-gym's chat client,
  in process (no sandbox, nothing installed at run time).

::

    import verifiers.v1 as vf
    from trace_gym.integrations.verifiers import load_environment

    env = load_environment("trace/cap-refund-policy-v0", seeds=range(8), max_turns=30)
    # env.taskset, env.run_episode(...) under env.serving(): see docs/integrations.md
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from . import MissingExtraError, require

require("verifiers", "verifiers")

try:
    import verifiers.v1 as vf
except ModuleNotFoundError as exc:  # verifiers < 0.4: the classic stack only
    if exc.name != "verifiers.v1":
        raise
    raise MissingExtraError("verifiers<0.4 has no verifiers.v1: pip install 'trace-gym[verifiers]' (verifiers>=0.4)") \
        from None

from ..llm.http import OpenAIChatClient  # noqa: E402
from .chat import DEFAULT_TOOL_LISTING, ChatEpisode  # noqa: E402

__all__ = ["TraceEnv", "TraceEnvConfig", "TraceHarness", "TraceTask", "TraceTaskData", "TraceTaskset",
           "TraceTasksetConfig", "load_environment"]

DEFAULT_ENV_ID = "trace/cap-refund-policy-v0"


def _make_env(env_id: str, env_kwargs: dict[str, Any] | None):
    from ..registration import make_env_factory

    return make_env_factory(env_id, env_kwargs)()


class TraceTaskData(vf.TaskData):
    """One episode to play: the env id and the seed its opening came from."""

    env_id: str
    seed: int


class TraceTask(vf.Task[TraceTaskData, vf.State, vf.TaskConfig]):
    """A trace env episode; the reward is recorded by :class:`TraceEnv` from the env itself."""

    @property
    def key(self) -> str:
        return f"{self.data.env_id}#{self.data.seed}"


class TraceTasksetConfig(vf.TasksetConfig):
    """Which trace env, on which seeds, rendered how (``--env.taskset.*``)."""

    env_id: str = DEFAULT_ENV_ID
    """A registered trace-gym id (``trace-gym envs`` lists them)."""
    seeds: list[int] = list(range(64))
    """The env seeds, one task each."""
    env_kwargs: dict[str, Any] = {}
    """Keyword arguments for ``gym.make``."""
    tool_format: str = "hermes"
    """How the system prompt asks for tool calls: ``hermes`` (``<tool_call>`` JSON) or ``smollm2``."""
    tool_listing: str = DEFAULT_TOOL_LISTING
    """How the system prompt lists the tools."""


def _opening_task(episode: ChatEpisode, env_id: str, seed: int) -> TraceTaskData:
    system, *turns = episode.open(seed)
    if system.get("role") != "system" or not turns:
        raise ValueError(f"{env_id} seed {seed}: the opening is not a system prompt and a first turn")
    prompt: str | list[vf.UserMessage] = (turns[0]["content"] if len(turns) == 1
                                           else [vf.UserMessage(content=m["content"]) for m in turns])
    return TraceTaskData(name=f"{env_id}#{seed}", env_id=env_id, seed=seed, system_prompt=system["content"],
                         prompt=prompt)


class TraceTaskset(vf.Taskset[TraceTask, TraceTasksetConfig]):
    """One task per seed of ``config.env_id``; raises ``gymnasium.error.Error`` for an unknown id and
    ``ValueError`` for an empty seed list."""

    def load(self) -> Iterator[TraceTask]:
        cfg = self.config
        if not cfg.seeds:
            raise ValueError("seeds is empty")
        episode = ChatEpisode(_make_env(cfg.env_id, cfg.env_kwargs), tool_format=cfg.tool_format,
                              tool_listing=cfg.tool_listing)
        try:
            tasks = [TraceTask(_opening_task(episode, cfg.env_id, int(s)), cfg.task) for s in cfg.seeds]
        finally:
            episode.env.close()
        yield from tasks


class TraceHarnessConfig(vf.HarnessConfig):
    """The model side's knobs (``--env.agent.harness.*``)."""

    request_timeout: float = 600.0
    """Seconds one chat completion may take."""


def _wire(message: Any) -> dict[str, Any]:
    role = message.get("role") if isinstance(message, dict) else message.role
    content = message.get("content") if isinstance(message, dict) else message.content
    if isinstance(content, list):  # content parts: the text ones
        content = "".join(p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") or "" for p in content)
    return {"role": role, "content": content or ""}


class TraceHarness(vf.Harness[TraceHarnessConfig]):
    """One chat completion per turn, in process, through the interception ``endpoint`` (text only:
    the system prompt lists the tools and the reply is parsed by the env's action grammar)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: vf.TaskData, **_: Any) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages.extend(_wire(m) for m in prompt or [])
        client = OpenAIChatClient(endpoint, model=ctx.model, api_key=secret, max_retries=0,
                                  timeout=self.config.request_timeout)
        reply = await asyncio.to_thread(client.chat, messages)
        return vf.ProgramResult(exit_code=0, stdout=reply.content or "", stderr="")


class TraceEnvConfig(vf.EnvConfig):
    """The env's one role, ``agent`` (``--env.agent.max-turns`` caps an episode's model turns).  Its
    harness runs in this process, so its runtime is the local one (verifiers' default is a remote sandbox)."""

    agent: vf.AgentConfig = vf.AgentConfig(max_turns=30, runtime=vf.SubprocessConfig())


class TraceEnv(vf.Env[TraceEnvConfig]):
    """Plays each task's seed of its trace env against the ``agent`` role and records the env's reward."""

    async def run(self, task: TraceTask, agents: Any) -> None:
        cfg = self.taskset.config
        episode = ChatEpisode(_make_env(task.data.env_id, cfg.env_kwargs), tool_format=cfg.tool_format,
                              tool_listing=cfg.tool_listing)
        try:
            if _opening_task(episode, task.data.env_id, task.data.seed).prompt != task.data.prompt:
                raise ValueError(f"the task's prompt is not the opening of {task.data.env_id} seed {task.data.seed}")
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn()
                while not segment.terminated:
                    replies, _, done, _ = episode.act(segment.last_reply)
                    if done:
                        break
                    segment = await interaction.turn([vf.UserMessage(content=m["content"]) for m in replies])
            reward = episode.close_scored()
            trace = interaction.trace
            trace.record_reward("env_reward", reward, 1.0)
            parts = episode.info.get("reward_info") or {}
            trace.record_metrics({k: float(v) for k, v in parts.items()
                                  if isinstance(v, int | float) and not isinstance(v, bool)})
            trace.info["termination_reason"] = episode.info.get("termination_reason") or "max_turns"
        finally:
            episode.env.close()


def load_environment(env_id: str = DEFAULT_ENV_ID, *, seeds: Iterable[int] = range(64),
                     env_kwargs: dict[str, Any] | None = None, max_turns: int = 30, tool_format: str = "hermes",
                     tool_listing: str = DEFAULT_TOOL_LISTING) -> TraceEnv:
    """A :class:`TraceEnv` over ``env_id``'s ``seeds``, its agent on :class:`TraceHarness`.

    The env's config names the ``trace-gym-env`` taskset module (``examples/verifiers/``), which
    verifiers imports to load the taskset and harness classes: install it first.
    """
    config = TraceEnvConfig(
        taskset=TraceTasksetConfig(id="trace-gym-env", env_id=env_id, seeds=[int(s) for s in seeds],
                                   env_kwargs=dict(env_kwargs or {}), tool_format=tool_format,
                                   tool_listing=tool_listing),
        agent=vf.AgentConfig(max_turns=max_turns, runtime=vf.SubprocessConfig()),
    )
    return TraceEnv(config)
