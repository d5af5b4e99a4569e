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

``reset`` takes ``seed`` (an integer >= 0), ``episode_id`` (a label, returned in the state) and
``options`` (the env's reset options); anything else, or options the env refuses, is answered
with an error and changes nothing.  What the server guarantees under faults and load (every bad
frame answered on its own session, the idle timeout, the routes it serves, a clean stop on
SIGINT/SIGTERM): :mod:`trace_gym.integrations.openenv_server`.
"""

from __future__ import annotations

import json
from typing import Any

from . import require

require("openenv", "openenv")

from openenv.core.client_types import StepResult  # noqa: E402
from openenv.core.env_client import EnvClient  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, SchemaResponse, State  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: E402

from ..core.env import declared_reset_options  # noqa: E402
from .openenv_server import RequestRefused, SessionServer, run_app  # noqa: E402

__all__ = ["TraceAction", "TraceObservation", "TraceState", "TraceOpenEnv", "TraceEnvClient", "ResetArgs",
           "create_trace_app", "serve", "run_app", "json_safe", "RequestRefused"]

DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT_S = 600.0


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


class ResetArgs(BaseModel):
    """What a reset may carry; a reset with anything else is refused before the env is touched."""

    model_config = ConfigDict(extra="forbid", strict=True)

    seed: int | None = Field(default=None, ge=0, description="the episode's seed (an integer >= 0)")
    episode_id: str | None = Field(default=None, max_length=255, description="a label, returned in the state")
    options: dict[str, Any] | None = Field(default=None, description="the env's reset options")


class TraceOpenEnv(Environment[TraceAction, TraceObservation, TraceState]):
    """A trace-gym env behind OpenEnv's ``Environment`` interface (one instance per session).

    Subclassed per env id by :func:`create_trace_app` (``ENV_ID`` and ``ENV_KWARGS`` set).
    ``reset`` raises :class:`RequestRefused` for arguments outside :class:`ResetArgs`, option keys
    the env does not declare or options it refuses, and then changes nothing (the episode in play
    goes on).  ``step`` before ``reset`` or after the episode ended raises ``RuntimeError``.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session makes its own env: no state is shared
    ENV_ID: str = ""
    ENV_KWARGS: dict[str, Any] = {}

    def __init__(self) -> None:
        super().__init__()
        from ..registration import make_env_factory

        self._env = make_env_factory(self.ENV_ID, self.ENV_KWARGS)()
        self._state = TraceState(env_id=self.ENV_ID, done=True)

    def reset(self, /, seed: int | None = None, episode_id: str | None = None, options: dict[str, Any] | None = None,
              **extra: Any) -> TraceObservation:
        try:
            args = ResetArgs.model_validate({"seed": seed, "episode_id": episode_id, "options": options, **extra})
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            raise RequestRefused(f"reset: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        declared = declared_reset_options(self._env)
        unknown = sorted(set(args.options or {}) - declared) if declared is not None else []
        if unknown:
            raise RequestRefused(f"reset: unknown option(s) {unknown} for {self.ENV_ID}; it reads {sorted(declared)}")
        try:
            obs, info = self._env.reset(seed=args.seed, options=args.options)
        except (ValueError, TypeError, KeyError) as exc:  # options the env refuses: it changed nothing
            raise RequestRefused(f"reset: {self.ENV_ID} refused the options: {exc}") from None
        self._state = TraceState(env_id=self.ENV_ID, seed=args.seed, episode_id=args.episode_id, step_count=0)
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


def create_trace_app(env_id: str, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                     idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S, env_kwargs: dict[str, Any] | None = None):
    """The ASGI app serving ``env_id`` (:class:`~trace_gym.integrations.openenv_server.SessionServer`: ``/ws``,
    ``/health``, ``/schema``, ``/metadata``); ``idle_timeout_s`` None: sessions never time out.

    Raises ``gymnasium.error.Error`` (an unknown id) or ``ValueError`` (a limit out of range) before
    anything is served.
    """
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the trace/* ids)

    gym.spec(env_id)
    name = "".join(ch if ch.isalnum() else "_" for ch in env_id)
    cls = type(f"TraceOpenEnv_{name}", (TraceOpenEnv,), {"ENV_ID": env_id, "ENV_KWARGS": dict(env_kwargs or {})})
    probe = cls()  # build one now: a broken env fails at start, not in the first session
    try:
        metadata = probe.get_metadata().model_dump()
    finally:
        probe.close()
    schema = SchemaResponse(action=TraceAction.model_json_schema(), observation=TraceObservation.model_json_schema(),
                            reset_observation=TraceObservation.model_json_schema(),
                            state=TraceState.model_json_schema()).model_dump()
    server = SessionServer(cls, TraceAction, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s,
                           metadata=metadata, schema=schema)
    return server.app


def serve(env_id: str, *, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = DEFAULT_MAX_SESSIONS,
          idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S, env_kwargs: dict[str, Any] | None = None,
          log_level: str = "warning", compress: bool = False) -> None:
    """Serve ``env_id`` (:func:`create_trace_app`) until SIGINT or SIGTERM (``compress``: see :func:`run_app`)."""
    app = create_trace_app(env_id, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s, env_kwargs=env_kwargs)
    run_app(app, host=host, port=port, log_level=log_level, compress=compress)
