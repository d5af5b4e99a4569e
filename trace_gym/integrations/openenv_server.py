"""The server behind ``trace-gym serve``: OpenEnv's WebSocket protocol, one env per session.

OpenEnv's own server (``openenv.core.env_server.http_server``) is replaced, not wrapped: under
load and faults it stepped envs whose replies it then failed to send, reset before validating,
closed whole sessions over one bad frame, built envs for HTTP requests outside the session limit
and had no idle timeout.  This one speaks the same protocol, so OpenEnv's ``EnvClient`` (and
:class:`~trace_gym.integrations.openenv.TraceEnvClient`) talk to it unchanged, and holds these:

* ``/ws``: a connection is one session with its own env, built when it opens, inside the limit
  ``max_sessions``; one past the limit gets ``CAPACITY_REACHED`` and is closed at once.  Each text
  frame is one request and gets exactly one reply, in order: ``{"type": "reset", "data": {"seed",
  "episode_id", "options"}}`` and ``{"type": "step", "data": {"text"}}`` answer an observation,
  ``{"type": "state"}`` the state; ``{"type": "close"}`` ends the session.
* A frame that is not such a request (not JSON, JSON that is not an object or is nested too deep,
  a binary frame, an unknown type, a field of the wrong type or name, a lone surrogate anywhere,
  reset arguments or options the env refuses) gets an error reply (``INVALID_JSON``,
  ``UNKNOWN_TYPE``, ``VALIDATION_ERROR``), is never seen by the env, changes nothing and leaves
  the session open.  A step with no open episode gets ``EXECUTION_ERROR`` and changes nothing.
* A session silent for ``idle_timeout_s`` gets ``IDLE_TIMEOUT`` and is closed.  A session that
  ends in any way (close, disconnect, idle) frees its slot as soon as its env is closed, after any
  step in flight.
* ``/health``, ``/schema`` and ``/metadata`` answer from what was computed at start (no env is
  built).  OpenEnv's stateless ``/reset``, ``/step`` and ``/state`` are answered 404 saying to use
  ``/ws``; its MCP and task routes are not served.
* :func:`run_app`: SIGINT or SIGTERM closes every session (code 1012) and returns (exit status 0).

:class:`ServerProcess` runs ``trace-gym serve`` as a child process (the tests and
``benchmarks/serve_load.py`` drive it so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from . import require

require("openenv", "openenv")
uvicorn = require("uvicorn", "openenv")

from openenv.core.env_server.serialization import serialize_observation  # noqa: E402
from openenv.core.env_server.types import WSErrorCode, WSResetMessage, WSStateMessage, WSStepMessage  # noqa: E402
from pydantic import BaseModel, ValidationError  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route, WebSocketRoute  # noqa: E402
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState  # noqa: E402

__all__ = ["SessionServer", "ServerProcess", "RequestRefused", "run_app", "IDLE_TIMEOUT"]

log = logging.getLogger("trace_gym.serve")
IDLE_TIMEOUT = "IDLE_TIMEOUT"  # the error code of a session closed for silence (OpenEnv's codes lack one)
GRACEFUL_SHUTDOWN_S = 30  # a signal waits this long for steps in flight
_MESSAGES: dict[str, type[BaseModel]] = {"reset": WSResetMessage, "step": WSStepMessage, "state": WSStateMessage}


class RequestRefused(ValueError):
    """A request the env refuses before it changes anything (answered ``VALIDATION_ERROR``)."""


class _Error(Exception):
    """A request answered with an error frame."""

    def __init__(self, code: WSErrorCode | str, message: str, **extra: Any):
        super().__init__(message)
        self.reply = {"type": "error", "data": {"message": message, "code": getattr(code, "value", code), **extra}}


def _encode(reply: dict[str, Any]) -> str:
    text = json.dumps(reply, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a string UTF-8 cannot carry: JSON's \u escapes carry it exactly
        text = json.dumps(reply, default=str)
    return text


def _lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate (``U+D800`` to ``U+DFFF``) in any key or string of ``value``, as ``U+XXXX``."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"U+{ord(v[exc.start]):04X}"
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def _parse_request(message: dict[str, Any]) -> dict[str, Any]:
    """The request an ASGI ``websocket.receive`` message holds; raises :class:`_Error` for anything else."""
    text = message.get("text")
    if text is None:
        raise _Error(WSErrorCode.INVALID_JSON, "binary frames are not read: send each request as a JSON text frame")
    try:
        request = json.loads(text)
    except RecursionError:
        raise _Error(WSErrorCode.INVALID_JSON, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # not JSON, or an integer too long to read
        raise _Error(WSErrorCode.INVALID_JSON, f"invalid JSON: {exc}") from None
    if not isinstance(request, dict):
        raise _Error(WSErrorCode.VALIDATION_ERROR, 'a request is a JSON object {"type": "reset" | "step" | "state" | '
                     f'"close", "data": {{...}}}}, not {type(request).__name__}')
    bad = _lone_surrogate(request)
    if bad is not None:
        raise _Error(WSErrorCode.VALIDATION_ERROR, f"the request holds a lone surrogate ({bad}), which is not text: "
                     "send valid Unicode")
    return request


def _validation_error(exc: ValidationError) -> _Error:
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    first = errors[0] if errors else {}
    where = ".".join(str(x) for x in first.get("loc", ()))
    return _Error(WSErrorCode.VALIDATION_ERROR, f"invalid request: {where}: {first.get('msg', exc)}", errors=errors)


class _Session:
    """One connection's env and its one job in flight (envs are stepped one request at a time)."""

    def __init__(self, server: SessionServer):
        self.server = server
        self.env: Any = None
        self.pending: Future | None = None

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.pending = self.server.pool.submit(fn, *args, **kwargs)
        return await asyncio.wrap_future(self.pending)

    def end(self) -> None:
        """Close the env once no job of it is running, then free the slot (never waits: safe when cancelled)."""
        def finish(_: Any = None) -> None:
            try:
                if self.env is not None:
                    self.env.close()
            except Exception as exc:  # noqa: BLE001 - a close that fails still frees the slot
                log.warning("closing an env failed: %s: %s", type(exc).__name__, exc)
            finally:
                self.server.release()

        def submit(_: Any = None) -> None:
            try:
                self.server.pool.submit(finish)
            except RuntimeError:  # the pool is shut down: the server is stopping
                finish()

        if self.pending is not None and not self.pending.done():
            self.pending.add_done_callback(submit)
        else:
            submit()


class SessionServer:
    """The ASGI app (:attr:`app`) serving sessions of the envs ``make_env`` builds.

    ``make_env()`` returns an OpenEnv ``Environment`` (``reset(**data)``, ``step(action)``,
    ``state``, ``close()``) whose ``reset`` raises :class:`RequestRefused` (or pydantic's
    ``ValidationError``) for arguments it refuses, before changing anything, and whose ``step``
    raises ``RuntimeError`` when no episode is open.  ``action_cls`` validates a step's ``data``.
    ``metadata`` and ``schema`` are what ``/metadata`` and ``/schema`` answer.
    """

    def __init__(self, make_env: Callable[[], Any], action_cls: type[BaseModel], *, max_sessions: int,
                 idle_timeout_s: float | None, metadata: dict[str, Any], schema: dict[str, Any]):
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        if idle_timeout_s is not None and idle_timeout_s <= 0:
            raise ValueError(f"idle_timeout_s must be > 0 (or None: no timeout), got {idle_timeout_s}")
        self.make_env, self.action_cls = make_env, action_cls
        self.max_sessions, self.idle_timeout_s = max_sessions, idle_timeout_s
        self.active = 0
        self._lock = threading.Lock()
        # one job in flight per session: a slow step never waits behind another session's
        self.pool = ThreadPoolExecutor(max_workers=max_sessions, thread_name_prefix="trace-env")
        answers = {"/health": {"status": "healthy"}, "/metadata": metadata, "/schema": schema}

        async def fixed(request: Request) -> JSONResponse:
            return JSONResponse(answers[request.url.path])

        routes = [*(Route(path, fixed) for path in answers), WebSocketRoute("/ws", self._session),
                  Route("/{path:path}", _not_served, methods=["GET", "POST", "PUT", "DELETE", "PATCH"])]
        self.app = Starlette(routes=routes, lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _: Any) -> Any:
        yield
        self.pool.shutdown(wait=False)

    def _acquire(self) -> bool:
        with self._lock:
            if self.active >= self.max_sessions:
                return False
            self.active += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.active -= 1

    async def _session(self, ws: WebSocket) -> None:
        await ws.accept()
        if not self._acquire():
            await _send(ws, _Error(WSErrorCode.CAPACITY_REACHED, f"server at capacity: {self.max_sessions} sessions "
                                   "open; try again when one ends", active_sessions=self.active,
                                   max_sessions=self.max_sessions).reply)
            await _close(ws, 1013, "at capacity")
            return
        session = _Session(self)
        try:
            try:
                session.env = await session.run(self.make_env)
            except Exception as exc:  # noqa: BLE001 - reported to the client and logged
                log.warning("building an env failed: %s: %s", type(exc).__name__, exc)
                await _send(ws, _Error(WSErrorCode.FACTORY_ERROR, f"the env could not be built: {exc}").reply)
                return
            await self._serve(ws, session)
        finally:
            session.end()
            await _close(ws)

    async def _serve(self, ws: WebSocket, session: _Session) -> None:
        while True:
            try:
                message = await asyncio.wait_for(ws.receive(), self.idle_timeout_s)
            except TimeoutError:
                await _send(ws, _Error(IDLE_TIMEOUT, f"session closed: idle for more than {self.idle_timeout_s:g} s "
                                       "(--idle-timeout)").reply)
                return
            if message["type"] == "websocket.disconnect":
                return
            try:
                reply = await self._answer(session, _parse_request(message))
            except _Error as exc:
                reply = exc.reply
            if reply is None or not await _send(ws, reply):
                return

    async def _answer(self, session: _Session, request: dict[str, Any]) -> dict[str, Any] | None:
        kind = request.get("type")
        if kind == "close":
            return None
        if not isinstance(kind, str) or kind not in _MESSAGES:
            raise _Error(WSErrorCode.UNKNOWN_TYPE, f"unknown request type {kind!r}: one of reset, step, state, close")
        try:
            message = _MESSAGES[kind].model_validate(request)
            if kind == "state":
                return {"type": "state", "data": session.env.state.model_dump()}
            if kind == "reset":
                observation = await session.run(lambda: session.env.reset(**message.data))
            else:
                action = self.action_cls.model_validate(message.data)
                observation = await session.run(session.env.step, action)
        except ValidationError as exc:
            raise _validation_error(exc) from None
        except RequestRefused as exc:
            raise _Error(WSErrorCode.VALIDATION_ERROR, str(exc)) from None
        except RuntimeError as exc:
            raise _Error(WSErrorCode.EXECUTION_ERROR, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - an env failure is this request's answer, not the session's end
            log.warning("%s failed: %s: %s", kind, type(exc).__name__, exc)
            raise _Error(WSErrorCode.EXECUTION_ERROR, f"{kind} failed: {type(exc).__name__}: {exc}") from None
        return {"type": "observation", "data": serialize_observation(observation)}


async def _not_served(request: Request) -> JSONResponse:
    path = request.url.path
    detail = "not served"
    if path in ("/reset", "/step", "/state"):
        detail = (f"{path} is not served: episodes are played over the WebSocket /ws (OpenEnv's EnvClient), "
                  "one env per connection")
    return JSONResponse({"detail": detail}, status_code=404)


async def _send(ws: WebSocket, reply: dict[str, Any]) -> bool:
    """Send ``reply``; False when the client is gone (a client that leaves mid-step is not an error)."""
    try:
        await ws.send_text(_encode(reply))
        return True
    except (WebSocketDisconnect, RuntimeError, OSError):
        return False


async def _close(ws: WebSocket, code: int = 1000, reason: str = "") -> None:
    if ws.application_state == WebSocketState.DISCONNECTED or ws.client_state == WebSocketState.DISCONNECTED:
        return
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await ws.close(code, reason)


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, except that a signal only stops it: uvicorn raises the signal again once it has shut
    down, which ends the process by SIGTERM (status -15) instead of returning."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_app(app: Any, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning",
            compress: bool = False) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, which close every session and return.

    ``compress``: offer WebSocket compression (permessage-deflate) to clients that ask for it:
    replies shrink several times, each costing the server about as much CPU as the env's step.
    """
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, ws_per_message_deflate=compress,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    _Uvicorn(config).run()


class ServerProcess:
    """``trace-gym serve ENV_ID`` in a child process on 127.0.0.1 at a free port, healthy once constructed.

    ``args`` are more ``serve`` flags (``--max-sessions 4``); ``env`` the child's environment
    variables (default: this process's).  Raises ``RuntimeError`` with the child's output when it
    exits or is not healthy within ``start_timeout_s``.  :meth:`stop` sends a signal and returns
    the exit status and everything the server printed.
    """

    def __init__(self, env_id: str, *args: str, env: dict[str, str] | None = None, cwd: str | None = None,
                 start_timeout_s: float = 300):
        import subprocess
        import sys
        import tempfile
        import time
        import urllib.request

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/ws"
        self._out = tempfile.TemporaryFile("w+", encoding="utf-8")  # a pipe nobody reads would stall a chatty server
        self.proc = subprocess.Popen([sys.executable, "-m", "trace_gym.cli", "serve", env_id, "--port", str(self.port),
                                      *args], stdout=self._out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"trace-gym serve exited with status {self.proc.returncode}: {self.output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if json.load(r).get("status") == "healthy":
                        return
            except OSError:
                time.sleep(0.2)
        _, out = self.stop()
        raise RuntimeError(f"trace-gym serve was not healthy within {start_timeout_s:g} s: {out}")

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 30) -> tuple[int, str]:
        """Send ``sig`` and wait (then kill); ``(exit status, the server's output)``."""
        import subprocess

        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode, self.output()

    def output(self) -> str:
        """Everything the server has printed so far."""
        self._out.seek(0)
        return self._out.read()
