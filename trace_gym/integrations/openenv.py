"""Any registered trace-gym env as an OpenEnv server, and OpenEnv's client for it (the ``openenv`` extra).

``trace-gym serve ENV_ID --port 8000`` runs the server (:func:`serve`); every WebSocket
session (``/ws``) gets its own env instance, so concurrent sessions never share an
episode.  The wire types:

* :class:`TraceAction` — ``text``: one agent action in the env's action grammar
  (a message, or tool calls as ``<tool_call>{...}</tool_call>`` blocks / JSON / call syntax);
* :class:`TraceObservation` — ``text`` (the observation), ``info`` (the env's ``info``
  as JSON: ``messages``, ``tools``, ``reward_info`` at the end, ...), ``terminated``,
  ``truncated``, plus OpenEnv's ``reward`` and ``done``;
* :class:`TraceState` — the session's env id, seed, step count and termination reason.

A client is OpenEnv's own ``EnvClient`` typed with these (:class:`TraceEnvClient`)::

    from trace_gym.integrations.openenv import TraceAction, TraceEnvClient

    with TraceEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=3)
        while not result.done:
            result = env.step(TraceAction(text=my_policy(result.observation.text)))
        print(result.reward)

``reset`` takes ``seed`` and ``options`` (the env's reset options).  A step after the
episode ended, an action of the wrong shape or an unknown message type is answered with
an error on that session; the server keeps serving.
"""

from __future__ import annotations

import json
from typing import Any

from . import require

require("openenv", "openenv")

from openenv.core.client_types import StepResult  # noqa: E402
from openenv.core.env_client import EnvClient  # noqa: E402
from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State  # noqa: E402
from pydantic import Field  # noqa: E402

__all__ = ["TraceAction", "TraceObservation", "TraceState", "TraceOpenEnv", "TraceEnvClient", "create_trace_app",
           "serve", "run_app", "json_safe"]

DEFAULT_MAX_SESSIONS = 64


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (what reaches a client): tuples become lists, other objects their ``str``."""
    return json.loads(json.dumps(value, default=str))


class TraceAction(Action):
    """One agent action, as text in the env's action grammar."""

    text: str = Field(..., description="the agent's action: a message, or tool calls (<tool_call>{...}</tool_call>)")


class TraceObservation(Observation):
    """What the agent sees after reset or a step, with the env's ``info`` as JSON."""

    text: str = Field(default="", description="the observation text")
    info: dict[str, Any] = Field(default_factory=dict, description="the env's info: messages, tools, reward_info, ...")
    terminated: bool = Field(default=False)
    truncated: bool = Field(default=False)


class TraceState(State):
    """The session's episode: env id, seed and how it ended."""

    env_id: str = ""
    seed: int | None = None
    done: bool = False
    termination_reason: str | None = None


class TraceOpenEnv(Environment[TraceAction, TraceObservation, TraceState]):
    """A trace-gym env behind OpenEnv's ``Environment`` interface (one instance per session).

    Subclassed per env id by :func:`create_trace_app` (``ENV_ID`` and ``ENV_KWARGS`` set).
    ``step`` before ``reset`` or after the episode ended raises ``RuntimeError``.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session makes its own env: no state is shared
    ENV_ID: str = ""
    ENV_KWARGS: dict[str, Any] = {}

    def __init__(self) -> None:
        super().__init__()
        from ..train.trainer import make_env_factory

        self._env = make_env_factory(self.ENV_ID, self.ENV_KWARGS)()
        self._state = TraceState(env_id=self.ENV_ID, done=True)

    def reset(self, seed: int | None = None, episode_id: str | None = None, options: dict[str, Any] | None = None,
              **_: Any) -> TraceObservation:
        obs, info = self._env.reset(seed=seed, options=options)
        self._state = TraceState(env_id=self.ENV_ID, seed=seed, episode_id=episode_id, step_count=0)
        return TraceObservation(text=obs, info=json_safe(info), reward=None, done=False)

    def step(self, action: TraceAction, timeout_s: float | None = None, **_: Any) -> TraceObservation:
        if self._state.done:
            raise RuntimeError("no open episode: call reset() first")
        obs, reward, terminated, truncated, info = self._env.step(action.text)
        done = bool(terminated or truncated)
        self._state.step_count += 1
        if done:
            self._state.done = True
            self._state.termination_reason = info.get("termination_reason")
        return TraceObservation(text=obs, info=json_safe(info), reward=float(reward), done=done,
                                terminated=bool(terminated), truncated=bool(truncated))

    @property
    def state(self) -> TraceState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=self.ENV_ID, description=f"trace-gym env {self.ENV_ID}", version="1")

    def close(self) -> None:
        self._env.close()


class TraceEnvClient(EnvClient[TraceAction, TraceObservation, TraceState]):
    """OpenEnv's WebSocket client, typed for a trace-gym server."""

    def _step_payload(self, action: TraceAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TraceObservation]:
        obs = dict(payload.get("observation") or {})
        obs.pop("metadata", None)
        observation = TraceObservation(**obs, reward=payload.get("reward"), done=bool(payload.get("done", False)),
                                       metadata=payload.get("metadata") or {})
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done", False)),
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> TraceState:
        return TraceState(**payload)


def create_trace_app(env_id: str, *, max_sessions: int = DEFAULT_MAX_SESSIONS, env_kwargs: dict[str, Any] | None = None):
    """The FastAPI app serving ``env_id`` (OpenEnv's routes: ``/ws``, ``/health``, ``/schema``, ...).

    Raises ``gymnasium.error.Error`` (an unknown id) before anything is served.
    """
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the trace/* ids)

    gym.spec(env_id)
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
    name = "".join(ch if ch.isalnum() else "_" for ch in env_id)
    cls = type(f"TraceOpenEnv_{name}", (TraceOpenEnv,), {"ENV_ID": env_id, "ENV_KWARGS": dict(env_kwargs or {})})
    cls().close()  # build one now: a broken env fails at start, not in the first session
    return create_fastapi_app(cls, TraceAction, TraceObservation, max_concurrent_envs=max_sessions, env_name=name,
                              state_cls=TraceState)


def run_app(app: Any, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Serve ``app`` until interrupted (SIGINT/SIGTERM end it cleanly, closing every session)."""
    uvicorn = require("uvicorn", "openenv")
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def serve(env_id: str, *, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = DEFAULT_MAX_SESSIONS,
          env_kwargs: dict[str, Any] | None = None, log_level: str = "warning") -> None:
    """Serve ``env_id`` (:func:`create_trace_app`) until interrupted."""
    run_app(create_trace_app(env_id, max_sessions=max_sessions, env_kwargs=env_kwargs), host=host, port=port,
            log_level=log_level)
